//! Writing one token shard: its ids (the data file) and where each document starts (the index file),
//! in one of the three layouts of [`ShardFormat`].
//!
//! Both files are written under temporary names in the output folder ([`crate::output::TempFile`]),
//! the data as it comes and the index a few bytes a document, so memory does not grow with the shard.
//! The headers hold lengths known only at the end, so they are written last over the room kept for
//! them; Megatron's index also holds each document's byte offset after all the lengths, computed at the
//! end by reading the lengths back from the file ([`ShardWriter::close`]). [`ClosedShard::commit`]
//! then flushes both files to disk (their writeback started every 8 MB as they were written, so little
//! is left), closes them, renames them to their names and flushes the folder: a shard under its final
//! names is whole (a crash before that leaves only temporary files, which dropping the writer or the
//! next run removes). The two steps may run on different threads: a worker writes a shard and the
//! calling thread commits it, so that the worker need not wait on the disk; a closed shard keeps its
//! two files open until then, unless [`ClosedShard::sync`] flushes and closes them first. Whether a
//! shard is complete is for the manifest to say, which the caller writes after.
//!
//! Each file's CRC-32 (the zlib polynomial, as Python's `zlib.crc32` computes it) is computed from the
//! bytes as they are written, the header folded in front at the end ([`Hasher::combine`]), so that
//! checking it later reads the file once, and writing it costs no second pass.
//!
//! Invariant: the index describes exactly the data written: its document count is the number of
//! documents ended, and their lengths add up to the tokens in the data file.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crc32fast::Hasher;

use crate::encode::file::Dtype;
use crate::encode::npy::{close, npy_header, HEADER_LEN};
use crate::error::{Error, Result};
use crate::output::TempFile;

/// The layout of a shard's two files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardFormat {
    /// Megatron-LM's indexed dataset (`NAME.bin` and `NAME.idx`), as
    /// `megatron.core.datasets.indexed_dataset.IndexedDataset("NAME")` reads it: the ids, and an index of
    /// the header `MMIDIDX\0\0`, version 1 (u64), the dtype's code (u8: 8 for uint16, 4 for int32),
    /// the number of sequences and of document indices (u64 each), then each sequence's length
    /// (int32), its offset in the data in bytes (int64), and the document indices `0, 1, ..., n`
    /// (int64): each document is one sequence.
    Megatron,
    /// nanoGPT's raw ids (`NAME.bin`, little-endian, no header, for `np.memmap`) and the start of
    /// each document in ids, then the total (`NAME.idx.npy`, int64, one more than the documents).
    Bin,
    /// A NumPy array of the ids (`NAME.npy`) and the same offsets as [`ShardFormat::Bin`]
    /// (`NAME.offsets.npy`).
    Npy,
}

impl ShardFormat {
    /// The name users give the format: `megatron`, `bin`, `npy`.
    pub fn name(self) -> &'static str {
        match self {
            ShardFormat::Megatron => "megatron",
            ShardFormat::Bin => "bin",
            ShardFormat::Npy => "npy",
        }
    }

    /// The format named `name` (as [`Self::name`] gives it).
    pub fn from_name(name: &str) -> Option<ShardFormat> {
        [ShardFormat::Megatron, ShardFormat::Bin, ShardFormat::Npy]
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// What the shard `NAME`'s data file and index file are called after `NAME`.
    pub fn suffixes(self) -> [&'static str; 2] {
        match self {
            ShardFormat::Megatron => [".bin", ".idx"],
            ShardFormat::Bin => [".bin", ".idx.npy"],
            ShardFormat::Npy => [".npy", ".offsets.npy"],
        }
    }

    /// The room kept at the start of the data and index files for headers written last.
    fn header_lens(self) -> [usize; 2] {
        match self {
            ShardFormat::Megatron => [0, MEGATRON_HEADER_LEN],
            ShardFormat::Bin => [0, HEADER_LEN],
            ShardFormat::Npy => [HEADER_LEN, HEADER_LEN],
        }
    }
}

/// Megatron's index header: magic (9 bytes), version (8), dtype code (1), two counts (8 each).
const MEGATRON_HEADER_LEN: usize = 34;
const MEGATRON_MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";

/// Bytes of index gathered before each write.
const INDEX_BUFFER: usize = 64 << 10;

/// A file of a finished shard: its name in the folder, its size, and its CRC-32.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardFile {
    /// The file's name (`NAME.bin`).
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The CRC-32 of its bytes (zlib's, as Python's `zlib.crc32`).
    pub crc32: u32,
}

/// A shard written whole: its files (data, then index) and what they hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// The name the files are named after.
    pub name: String,
    /// The data file, then the index file.
    pub files: [ShardFile; 2],
    /// Ids in the data file.
    pub tokens: u64,
    /// Documents in the index.
    pub documents: u64,
}

/// One of a shard's files, written under a temporary name until [`ClosedShard::commit`] renames it.
struct Part {
    /// The temporary file; removed on drop unless renamed (then None).
    temp: Option<TempFile>,
    /// The temporary file, open; None once flushed and closed ([`Self::sync`]).
    file: Option<File>,
    /// The CRC-32 of the bytes after the header, and how many there are.
    crc: Hasher,
    /// The file's final path, which errors name.
    path: PathBuf,
    /// Bytes written, and where the range not yet handed to writeback ([`start_writeback`]) starts.
    written: u64,
    writeback_from: u64,
}

/// Bytes of a shard's file written before their writeback is started.
const WRITEBACK_STEP: u64 = 8 << 20;

/// Starts writing `file`'s bytes `from..to` to disk, without waiting: the `fsync` that puts a shard in
/// place then waits only for the last few megabytes, rather than for the whole shard when it is the
/// last one written (with one large shard, all of it, after every id is encoded). Its errors are left
/// to that `fsync`, which reports a write-back error again.
fn start_writeback(file: &File, from: u64, to: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a plain system call on an open descriptor; it reads no memory of ours.
        unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                from as libc::off64_t,
                (to - from) as libc::off64_t,
                libc::SYNC_FILE_RANGE_WRITE,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, from, to);
}

impl Part {
    /// Creates the temporary file for `path` and keeps `header_len` bytes for its header.
    fn create(path: PathBuf, header_len: usize) -> Result<Part> {
        let (temp, file) = TempFile::create(&path, None).map_err(|e| Error::io(&path, e))?;
        let mut part = Part {
            temp: Some(temp),
            file: Some(file),
            crc: Hasher::new(),
            path,
            written: 0,
            writeback_from: 0,
        };
        part.write_raw(&[0; HEADER_LEN][..header_len])?;
        Ok(part)
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        let path = &self.path;
        let file = self
            .file
            .as_mut()
            .expect("a part is written until it is finished");
        crate::output::write_in_slices(file, bytes).map_err(|e| Error::io(path, e))?;
        self.written += bytes.len() as u64;
        if self.written - self.writeback_from >= WRITEBACK_STEP {
            start_writeback(file, self.writeback_from, self.written);
            self.writeback_from = self.written;
        }
        Ok(())
    }

    /// Appends `bytes` after the header.
    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.crc.update(bytes);
        self.write_raw(bytes)
    }

    /// Writes `header` over the room kept for it; returns the file's size and CRC-32. The file stays
    /// open for [`Self::sync`].
    fn close(&mut self, header: &[u8]) -> Result<(u64, u32)> {
        let fail = |e| Error::io(&self.path, e);
        let file = self.file.as_mut().expect("a part is closed once");
        if !header.is_empty() {
            file.seek(SeekFrom::Start(0))
                .and_then(|_| file.write_all(header))
                .map_err(fail)?;
        }
        let mut crc = Hasher::new();
        crc.update(header);
        crc.combine(&self.crc);
        Ok((header.len() as u64 + self.crc.total_len(), crc.finalize()))
    }

    /// Flushes the file to disk and closes it. On disk before the rename: once the manifest says the
    /// shard is complete, it must be, even after a power cut. Flushed through the descriptor that
    /// wrote it, which sees every write-back error (started every `WRITEBACK_STEP`, so most of it is
    /// on disk already), and on the thread that commits the shard, not the worker that wrote it: a
    /// worker waiting on the disk is a core idle (token shards of 1 GB on 2 cores: the workers waited
    /// 0.9 s each in 200 flushes).
    fn sync(&mut self) -> Result<()> {
        let fail = |e| Error::io(&self.path, e);
        // Taken only once flushed: a part whose flush failed is never renamed as if it had not.
        let file = self.file.as_ref().expect("a part is synced once");
        file.sync_all().map_err(fail)?;
        let file = self.file.take().expect("a part is synced once");
        close(file).map_err(fail)
    }

    /// Renames the synced file to its final path.
    fn commit(&mut self) -> Result<()> {
        let temp = self.temp.take().expect("a part is committed once");
        temp.rename().map_err(|e| Error::io(&self.path, e))
    }
}

/// Writes one shard: ids as they come, documents as they end.
pub(crate) struct ShardWriter {
    format: ShardFormat,
    dtype: Dtype,
    folder: PathBuf,
    name: String,
    data: Part,
    index: Part,
    /// Index entries not yet written.
    index_buf: Vec<u8>,
    /// Ids written.
    tokens: u64,
    documents: u64,
    /// Where the document not yet ended starts, in ids.
    open_since: u64,
}

impl ShardWriter {
    /// Starts the shard `name` in `folder`: its files under temporary names, nothing under its own.
    pub(crate) fn create(
        folder: &Path,
        name: &str,
        format: ShardFormat,
        dtype: Dtype,
    ) -> Result<ShardWriter> {
        let [data_suffix, index_suffix] = format.suffixes();
        let [data_header, index_header] = format.header_lens();
        let data = Part::create(folder.join(format!("{name}{data_suffix}")), data_header)?;
        let index = Part::create(folder.join(format!("{name}{index_suffix}")), index_header)?;
        let mut index_buf = Vec::with_capacity(INDEX_BUFFER + 8);
        if format != ShardFormat::Megatron {
            // The offsets start with the first document's start.
            index_buf.extend_from_slice(&0i64.to_le_bytes());
        }
        Ok(ShardWriter {
            format,
            dtype,
            folder: folder.to_path_buf(),
            name: name.to_string(),
            data,
            index,
            index_buf,
            tokens: 0,
            documents: 0,
            open_since: 0,
        })
    }

    /// Ids written so far.
    pub(crate) fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Documents ended so far.
    pub(crate) fn documents(&self) -> u64 {
        self.documents
    }

    /// The bytes of one id.
    fn width(&self) -> u64 {
        match self.dtype {
            Dtype::U16 => 2,
            Dtype::U32 => 4,
        }
    }

    /// Appends `ids` (little-endian, in the shard's dtype) and ends a document after each of `ends`:
    /// positions in `ids`, counted in ids, in order. A document may be empty, and the last one may be
    /// left open, to go on in the next call.
    pub(crate) fn write(&mut self, ids: &[u8], ends: &[u64]) -> Result<()> {
        let n = ids.len() as u64 / self.width();
        debug_assert_eq!(ids.len() as u64 % self.width(), 0);
        self.data.write(ids)?;
        for &end in ends {
            debug_assert!(end <= n, "ends within the ids");
            let end = self.tokens + end;
            debug_assert!(end >= self.open_since, "ends in order");
            self.end_document(end)?;
        }
        self.tokens += n;
        Ok(())
    }

    /// Ends the document left open, if it has any tokens, after appending `eot` (the end-of-text
    /// token's id, little-endian, when documents end with one).
    pub(crate) fn end_open_document(&mut self, eot: Option<&[u8]>) -> Result<()> {
        if self.open_since == self.tokens {
            return Ok(());
        }
        match eot {
            Some(eot) => self.write(eot, &[eot.len() as u64 / self.width()]),
            None => self.write(&[], &[0]),
        }
    }

    /// Ends the open document at `end` (in ids from the start of the shard).
    fn end_document(&mut self, end: u64) -> Result<()> {
        match self.format {
            ShardFormat::Megatron => {
                let len = end - self.open_since;
                let len = i32::try_from(len).map_err(|_| {
                    let why = format!(
                        "a document of {len} ids: Megatron's index holds at most 2^31 - 1 a document"
                    );
                    Error::io(&self.index.path, io::Error::new(io::ErrorKind::InvalidData, why))
                })?;
                self.index_buf.extend_from_slice(&len.to_le_bytes());
            }
            ShardFormat::Bin | ShardFormat::Npy => {
                self.index_buf
                    .extend_from_slice(&(end as i64).to_le_bytes());
            }
        }
        self.documents += 1;
        self.open_since = end;
        if self.index_buf.len() >= INDEX_BUFFER {
            self.flush_index()?;
        }
        Ok(())
    }

    fn flush_index(&mut self) -> Result<()> {
        self.index.write(&self.index_buf)?;
        self.index_buf.clear();
        Ok(())
    }

    /// Megatron's index after the lengths: each document's offset in bytes (from the lengths, read
    /// back from the file), then the document indices `0..=documents`.
    fn write_megatron_tail(&mut self) -> Result<()> {
        let temp = self.index.temp.as_ref().expect("written until finished");
        let path = self.index.path.clone();
        let fail = |e| Error::io(&path, e);
        let mut lengths =
            BufReader::with_capacity(INDEX_BUFFER, File::open(temp.path()).map_err(fail)?);
        lengths
            .seek(SeekFrom::Start(MEGATRON_HEADER_LEN as u64))
            .map_err(fail)?;
        let (width, mut pointer) = (self.width() as i64, 0i64);
        let mut len = [0; 4];
        for _ in 0..self.documents {
            lengths.read_exact(&mut len).map_err(fail)?;
            self.index_buf.extend_from_slice(&pointer.to_le_bytes());
            pointer += i32::from_le_bytes(len) as i64 * width;
            if self.index_buf.len() >= INDEX_BUFFER {
                self.flush_index()?;
            }
        }
        for i in 0..=self.documents {
            self.index_buf.extend_from_slice(&(i as i64).to_le_bytes());
            if self.index_buf.len() >= INDEX_BUFFER {
                self.flush_index()?;
            }
        }
        self.flush_index()
    }

    /// Finishes the shard: headers, files flushed to disk, renamed to their names, the folder flushed.
    /// The document left open is ended first ([`Self::end_open_document`] without an end-of-text).
    pub(crate) fn finish(self) -> Result<Shard> {
        self.close()?.commit()
    }

    /// Finishes writing the shard, whose files keep their temporary names until
    /// [`ClosedShard::commit`]: the document left open ended ([`Self::end_open_document`] without an
    /// end-of-text), the index completed, the headers written; the files stay open for the commit's
    /// flush.
    pub(crate) fn close(mut self) -> Result<ClosedShard> {
        self.end_open_document(None)?;
        self.flush_index()?;
        let (descr, code) = match self.dtype {
            Dtype::U16 => ("<u2", 8u8),
            // Megatron has no uint32; its int32 holds every id below 2^31, which vocabularies are.
            Dtype::U32 => ("<u4", 4u8),
        };
        let (data_header, index_header) = match self.format {
            ShardFormat::Megatron => {
                self.write_megatron_tail()?;
                let mut header = MEGATRON_MAGIC.to_vec();
                header.extend_from_slice(&1u64.to_le_bytes());
                header.push(code);
                header.extend_from_slice(&self.documents.to_le_bytes());
                header.extend_from_slice(&(self.documents + 1).to_le_bytes());
                (Vec::new(), header)
            }
            ShardFormat::Bin => (Vec::new(), npy_header("<i8", self.documents + 1)),
            ShardFormat::Npy => (
                npy_header(descr, self.tokens),
                npy_header("<i8", self.documents + 1),
            ),
        };
        let (data_bytes, data_crc) = self.data.close(&data_header)?;
        let (index_bytes, index_crc) = self.index.close(&index_header)?;
        let file = |part: &Part, bytes, crc32| ShardFile {
            name: part
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            bytes,
            crc32,
        };
        let shard = Shard {
            name: self.name.clone(),
            files: [
                file(&self.data, data_bytes, data_crc),
                file(&self.index, index_bytes, index_crc),
            ],
            tokens: self.tokens,
            documents: self.documents,
        };
        Ok(ClosedShard {
            shard,
            folder: self.folder,
            data: self.data,
            index: self.index,
        })
    }
}

/// A shard written whole under temporary names ([`ShardWriter::close`]), its two files still open for
/// the commit to flush; dropped, it closes and removes them.
pub(crate) struct ClosedShard {
    shard: Shard,
    folder: PathBuf,
    data: Part,
    index: Part,
}

impl ClosedShard {
    /// Flushes the shard's files to disk and closes them, so that it waits for its commit without
    /// open files.
    pub(crate) fn sync(&mut self) -> Result<()> {
        for part in [&mut self.data, &mut self.index] {
            if part.file.is_some() {
                part.sync()?;
            }
        }
        Ok(())
    }

    /// Puts the shard in place: its files flushed to disk and closed (unless [`Self::sync`] did),
    /// renamed to their names, the folder flushed.
    pub(crate) fn commit(mut self) -> Result<Shard> {
        self.sync()?;
        self.data.commit()?;
        if let Err(e) = self.index.commit() {
            // Not a data file under its name without its index.
            let _ = std::fs::remove_file(&self.data.path);
            return Err(e);
        }
        sync_folder(&self.folder)?;
        Ok(self.shard)
    }
}

/// Flushes `folder`'s entries to disk, so that renames into it survive a power cut.
fn sync_folder(folder: &Path) -> Result<()> {
    #[cfg(unix)]
    File::open(folder)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(folder, e))?;
    #[cfg(not(unix))]
    let _ = folder;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn folder(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("bytepair-shards-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn u16s(ids: &[u16]) -> Vec<u8> {
        ids.iter().flat_map(|id| id.to_le_bytes()).collect()
    }

    fn i64s(bytes: &[u8]) -> Vec<i64> {
        bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect()
    }

    /// Documents [1, 2, 3], [], [4, 5] (the first across two writes), then [6] left open.
    fn write_documents(dir: &Path, format: ShardFormat) -> Shard {
        let mut w = ShardWriter::create(dir, "s", format, Dtype::U16).unwrap();
        w.write(&u16s(&[1, 2]), &[]).unwrap();
        w.write(&u16s(&[3, 4, 5]), &[1, 1, 3]).unwrap();
        w.write(&u16s(&[6]), &[]).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn megatron_layout_is_the_published_one() {
        let dir = folder("megatron");
        let shard = write_documents(&dir, ShardFormat::Megatron);
        assert_eq!((shard.tokens, shard.documents), (6, 4));
        let data = fs::read(dir.join("s.bin")).unwrap();
        assert_eq!(data, u16s(&[1, 2, 3, 4, 5, 6]));
        let idx = fs::read(dir.join("s.idx")).unwrap();
        assert_eq!(&idx[..9], b"MMIDIDX\x00\x00");
        assert_eq!(u64::from_le_bytes(idx[9..17].try_into().unwrap()), 1);
        assert_eq!(idx[17], 8, "uint16's code");
        assert_eq!(u64::from_le_bytes(idx[18..26].try_into().unwrap()), 4);
        assert_eq!(u64::from_le_bytes(idx[26..34].try_into().unwrap()), 5);
        let lengths: Vec<i32> = idx[34..50]
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(lengths, [3, 0, 2, 1]);
        assert_eq!(i64s(&idx[50..82]), [0, 6, 6, 10], "offsets in bytes");
        assert_eq!(i64s(&idx[82..]), [0, 1, 2, 3, 4]);
        assert_eq!(shard.files[0].crc32, crc32fast::hash(&data));
        assert_eq!(shard.files[1].crc32, crc32fast::hash(&idx));
        assert_eq!(shard.files[1].bytes, idx.len() as u64);
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            2,
            "no temporary file left"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bin_and_npy_offsets_have_one_more_entry_than_documents() {
        let dir = folder("npy");
        for format in [ShardFormat::Bin, ShardFormat::Npy] {
            let shard = write_documents(&dir, format);
            let [data_name, index_name] = format.suffixes().map(|s| format!("s{s}"));
            assert_eq!(shard.files[0].name, data_name);
            let data = fs::read(dir.join(&data_name)).unwrap();
            let index = fs::read(dir.join(&index_name)).unwrap();
            let header = if format == ShardFormat::Npy {
                assert_eq!(&data[..HEADER_LEN], npy_header("<u2", 6));
                HEADER_LEN
            } else {
                0
            };
            assert_eq!(&data[header..], u16s(&[1, 2, 3, 4, 5, 6]));
            assert_eq!(&index[..HEADER_LEN], npy_header("<i8", 5));
            assert_eq!(i64s(&index[HEADER_LEN..]), [0, 3, 3, 5, 6]);
            assert_eq!(shard.files[0].crc32, crc32fast::hash(&data));
            assert_eq!(shard.files[1].crc32, crc32fast::hash(&index));
        }
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_data_file_of_many_megabytes_holds_its_header_ids_and_checksum() {
        let dir = folder("large");
        // Seventeen megabytes and a bit (so that two steps of writeback are started on the way), in
        // writes of uneven lengths.
        let ids: Vec<u16> = (0..(17usize << 20) / 2 + 3)
            .map(|i| (i * 7919 % 50257) as u16)
            .collect();
        let mut w = ShardWriter::create(&dir, "s", ShardFormat::Npy, Dtype::U16).unwrap();
        let bytes = u16s(&ids);
        for (k, part) in bytes.chunks(1_300_002).enumerate() {
            w.write(part, if k % 2 == 0 { &[1] } else { &[] }).unwrap();
        }
        let shard = w.finish().unwrap();
        let data = fs::read(dir.join("s.npy")).unwrap();
        assert_eq!(&data[..HEADER_LEN], npy_header("<u2", ids.len() as u64));
        assert_eq!(data[HEADER_LEN..], bytes);
        assert_eq!(shard.files[0].bytes, data.len() as u64);
        assert_eq!(shard.files[0].crc32, crc32fast::hash(&data));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_open_document_ends_with_the_end_of_text_token_and_an_empty_one_not_at_all() {
        let dir = folder("eot");
        let mut w = ShardWriter::create(&dir, "s", ShardFormat::Npy, Dtype::U32).unwrap();
        w.end_open_document(Some(&9u32.to_le_bytes())).unwrap();
        w.write(&7u32.to_le_bytes(), &[]).unwrap();
        w.end_open_document(Some(&9u32.to_le_bytes())).unwrap();
        w.end_open_document(Some(&9u32.to_le_bytes())).unwrap();
        let shard = w.finish().unwrap();
        assert_eq!((shard.tokens, shard.documents), (2, 1));
        let data = fs::read(dir.join("s.npy")).unwrap();
        assert_eq!(&data[HEADER_LEN..], [7, 0, 0, 0, 9, 0, 0, 0]);
        fs::remove_dir_all(dir).unwrap();
    }

    /// The files of this process open in `dir`.
    #[cfg(target_os = "linux")]
    fn open_in(dir: &Path) -> usize {
        fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|fd| fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count()
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_closed_shard_keeps_its_files_open_until_its_commit_flushes_and_puts_them_in_place() {
        let dir = folder("closed");
        let mut w = ShardWriter::create(&dir, "s", ShardFormat::Megatron, Dtype::U16).unwrap();
        w.write(&u16s(&[1, 2]), &[2]).unwrap();
        assert_eq!(open_in(&dir), 2, "both files open while written");
        let closed = w.close().unwrap();
        assert_eq!(open_in(&dir), 2, "open for the commit's flush");
        assert!(!dir.join("s.bin").exists() && !dir.join("s.idx").exists());
        let shard = closed.commit().unwrap();
        assert_eq!(fs::read(dir.join("s.bin")).unwrap(), u16s(&[1, 2]));
        assert_eq!(
            shard.files[1].crc32,
            crc32fast::hash(&fs::read(dir.join("s.idx")).unwrap())
        );
        assert_eq!(open_in(&dir), 0);
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            2,
            "no temporary file left"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_closed_shard_synced_early_waits_without_open_files_and_commits_the_same() {
        let dir = folder("synced");
        let mut w = ShardWriter::create(&dir, "s", ShardFormat::Npy, Dtype::U16).unwrap();
        w.write(&u16s(&[3, 4, 5]), &[1, 3]).unwrap();
        let mut closed = w.close().unwrap();
        closed.sync().unwrap();
        assert_eq!(open_in(&dir), 0, "flushed and closed");
        assert!(!dir.join("s.npy").exists(), "still under a temporary name");
        let shard = closed.commit().unwrap();
        assert_eq!(
            shard.files.clone().map(|f| f.name),
            ["s.npy", "s.offsets.npy"]
        );
        for file in &shard.files {
            assert_eq!(
                file.crc32,
                crc32fast::hash(&fs::read(dir.join(&file.name)).unwrap())
            );
        }
        assert_eq!((shard.tokens, shard.documents), (3, 2));
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 2);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_shard_dropped_unfinished_leaves_nothing() {
        let dir = folder("dropped");
        let mut w = ShardWriter::create(&dir, "s", ShardFormat::Megatron, Dtype::U16).unwrap();
        w.write(&u16s(&[1, 2]), &[2]).unwrap();
        drop(w);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
        fs::remove_dir_all(dir).unwrap();
    }
}
