//! [`NpyWriter`]: writing a `.npy` array of unknown length, around the page cache where it can.
//!
//! Writing through the page cache costs a kernel copy of every byte: on this project's test machine
//! (ext4) 1.3 GB took 1.9 s of CPU, about 15% of all the CPU `encode_file` spent on 1.2 GB of C code,
//! for ids that are rarely read back soon. With `O_DIRECT` the disk reads the bytes from our buffer
//! (0.35 s of CPU for the same 1.3 GB), and the writer thread waits on the disk instead of taking a
//! core from the encoders. `O_DIRECT` needs the buffer, the file offset and the length aligned to the
//! device's blocks, so:
//!
//! - the header takes one whole aligned block ([`HEADER_LEN`] bytes, as the format allows), written
//!   last through an ordinary file handle when the length is known;
//! - the data goes out in aligned blocks from an aligned buffer;
//! - the last partial block goes through the ordinary handle too.
//!
//! The two handles never write the same bytes. Where `O_DIRECT` is refused (tmpfs, other systems)
//! everything goes through the ordinary handle.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Bytes of header, padded with spaces: one block of every common block size, so the data after it is
/// aligned for `O_DIRECT`. The `.npy` format only asks for a multiple of 64.
pub const HEADER_LEN: usize = 4096;

/// The alignment `O_DIRECT` gets: 4096 covers devices of 512- and 4096-byte blocks.
const ALIGN: usize = 4096;

/// Bytes gathered before each write: large writes keep the disk busy with few system calls.
const BUFFER: usize = 8 << 20;

/// The `.npy` header (format 1.0) of a one-dimensional array of `len` elements of type `descr`
/// (`<u2`, `<u4`), [`HEADER_LEN`] bytes long whatever `len`.
pub fn npy_header(descr: &str, len: u64) -> Vec<u8> {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len},), }}");
    let mut header = b"\x93NUMPY\x01\x00".to_vec();
    header.extend_from_slice(&((HEADER_LEN - 10) as u16).to_le_bytes());
    header.extend_from_slice(dict.as_bytes());
    header.resize(HEADER_LEN - 1, b' ');
    header.push(b'\n');
    header
}

/// Writes the data of a `.npy` file, after a header written by [`Self::finish`].
pub struct NpyWriter {
    file: File,
    /// The same file opened with `O_DIRECT`, if the system allows it.
    direct: Option<File>,
    /// `BUFFER + ALIGN` bytes, of which `BUFFER` from offset `start` are aligned to `ALIGN`.
    buffer: Vec<u8>,
    start: usize,
    /// Bytes gathered in the buffer.
    len: usize,
    /// Where the next block goes in the file.
    offset: u64,
}

impl NpyWriter {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> io::Result<NpyWriter> {
        Self::create_with(path, true)
    }

    fn create_with(path: &Path, try_direct: bool) -> io::Result<NpyWriter> {
        let file = File::create(path)?;
        let direct = if try_direct { open_direct(path) } else { None };
        let buffer = vec![0u8; BUFFER + ALIGN];
        let start = buffer.as_ptr().align_offset(ALIGN);
        Ok(NpyWriter {
            file,
            direct,
            buffer,
            start,
            len: 0,
            offset: HEADER_LEN as u64,
        })
    }

    /// Appends `bytes` to the data.
    pub fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = bytes.len().min(BUFFER - self.len);
            let at = self.start + self.len;
            self.buffer[at..at + n].copy_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
            if self.len == BUFFER {
                self.flush_blocks()?;
            }
        }
        Ok(())
    }

    /// Writes the whole blocks gathered, keeping the partial one at the front of the buffer.
    fn flush_blocks(&mut self) -> io::Result<()> {
        let whole = self.len / ALIGN * ALIGN;
        let blocks = &self.buffer[self.start..self.start + whole];
        write_at(
            self.direct.as_ref().unwrap_or(&self.file),
            blocks,
            self.offset,
        )?;
        self.offset += whole as u64;
        self.buffer
            .copy_within(self.start + whole..self.start + self.len, self.start);
        self.len -= whole;
        Ok(())
    }

    /// Writes the rest of the data and then `header` (at most [`HEADER_LEN`] bytes, from
    /// [`npy_header`]), and returns the file.
    pub fn finish(mut self, header: &[u8]) -> io::Result<File> {
        assert!(header.len() <= HEADER_LEN, "headers fit their block");
        self.flush_blocks()?;
        let tail = &self.buffer[self.start..self.start + self.len];
        write_at(&self.file, tail, self.offset)?;
        write_at(&self.file, header, 0)?;
        Ok(self.file)
    }
}

/// `path` opened for writing with `O_DIRECT`, or None where that is refused.
fn open_direct(path: &Path) -> Option<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None::<File>
    }
}

/// Writes all of `bytes` at `offset` of `file`.
fn write_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.write_all_at(bytes, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = file;
        file.seek(SeekFrom::Start(offset))?;
        file.write_all(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_one_block_in_numpy_layout() {
        let h = npy_header("<u2", 12345);
        assert_eq!(h.len(), HEADER_LEN);
        assert!(h.starts_with(b"\x93NUMPY\x01\x00\xf6\x0f{'descr': '<u2', 'fortran_order': False, 'shape': (12345,), }"));
        assert!(h.ends_with(b" \n"));
        assert_eq!(npy_header("<u4", u64::MAX).len(), HEADER_LEN);
    }

    #[test]
    fn direct_and_buffered_files_hold_the_same_bytes() {
        let dir = std::env::temp_dir().join(format!("bytepair-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Lengths around the block and buffer sizes, written in uneven pieces.
        for total in [
            0,
            1,
            ALIGN - 1,
            ALIGN,
            ALIGN + 1,
            BUFFER - 3,
            BUFFER,
            2 * BUFFER + 4097,
        ] {
            let data: Vec<u8> = (0..total).map(|i| (i * 31 % 251) as u8).collect();
            for direct in [true, false] {
                let path = dir.join(format!("{total}-{direct}.npy"));
                let mut w = NpyWriter::create_with(&path, direct).unwrap();
                for piece in data.chunks(ALIGN / 3 + 1000) {
                    w.write(piece).unwrap();
                }
                drop(w.finish(&npy_header("<u1", total as u64)).unwrap());
                let bytes = std::fs::read(&path).unwrap();
                assert_eq!(&bytes[..HEADER_LEN], &npy_header("<u1", total as u64)[..]);
                assert_eq!(
                    &bytes[HEADER_LEN..],
                    &data[..],
                    "{total} bytes, direct: {direct}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
