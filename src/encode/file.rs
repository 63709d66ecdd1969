//! Encoding a whole file into a NumPy `.npy` array of token ids.
//!
//! The input is read in chunks cut at safe places ([`crate::chunks`]); worker threads take chunks in
//! turn and encode them, and the calling thread writes them in order ([`crate::ordered`], the pipeline
//! `encode_dataset` runs too), so memory is a few chunks and their ids whatever the file size. The array
//! goes to a temporary file beside the output, whose header is written last (the length is known only
//! at the end) and which is renamed over the output only when everything succeeded: an error or an
//! interruption leaves no partial `.npy` (see [`crate::output`], which also keeps devices, directories
//! and the input itself from being replaced).
//!
//! Invariants: chunks are written in input order, so the array is the ids of the whole file whatever
//! the threads; at most `2 * threads` chunks are between reading and writing; the error reported is the
//! first in the file.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use super::cache::Scratch;
use super::npy::{npy_header, NpyWriter};
use super::{Encoder, PieceTable};
use crate::chunks::{Chunk, ChunkReader, DEFAULT_CHUNK_SIZE};
use crate::error::{try_reserve, Error, Result};
use crate::input::open_input;
use crate::ordered::{run_ordered, OrderedSink, OrderedWork};
use crate::output::Output;
use crate::progress::{Phase, Progress};
use crate::threads::thread_count;

/// Bytes of text a worker encodes before converting their ids into the output's bytes.
const IDS_BLOCK: usize = 64 << 10;

/// The element type of the output array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `uint16`: for vocabularies of at most 65,536 ids; a larger id is an error.
    U16,
    /// `uint32`.
    U32,
}

/// How to encode a file.
#[derive(Clone, Debug)]
pub struct EncodeFileOptions {
    /// The element type of the output array.
    pub dtype: Dtype,
    /// Worker threads; `None` uses every core (see [`crate::thread_count`]).
    pub num_threads: Option<usize>,
    /// Target size of the pieces the input is read in (see [`crate::DEFAULT_CHUNK_SIZE`]).
    pub chunk_size: usize,
}

impl EncodeFileOptions {
    /// Options for an array of `dtype`: every core, chunks of [`crate::DEFAULT_CHUNK_SIZE`].
    pub fn new(dtype: Dtype) -> EncodeFileOptions {
        EncodeFileOptions {
            dtype,
            num_threads: None,
            chunk_size: DEFAULT_CHUNK_SIZE,
        }
    }
}

impl Dtype {
    fn descr(self) -> &'static str {
        match self {
            Dtype::U16 => "<u2",
            Dtype::U32 => "<u4",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dtype::U16 => "uint16",
            Dtype::U32 => "uint32",
        }
    }
}

/// Appends the ids of `text` to `out` as the little-endian bytes of `dtype`, and returns how many
/// there are: encoded ([`Encoder::encode_with`], into `ids`, a worker's buffer left empty, with its
/// caches) a block of about [`IDS_BLOCK`] bytes at a time, so that each block's ids are converted while
/// they are in cache (a chunk's, 4 MB for 4 MB of text, are not). Blocks end where cutting changes
/// nothing, so the ids are those of the whole text. After each block, `after_block` is handed `out`
/// and the block's number of ids: it may write `out` out and clear it, while its bytes are in cache.
pub(crate) fn encode_to_bytes(
    encoder: &Encoder,
    text: &str,
    dtype: Dtype,
    (ids, scratch): (&mut Vec<u32>, &mut Scratch),
    out: &mut Vec<u8>,
    mut after_block: impl FnMut(&mut Vec<u8>, u64) -> Result<()>,
) -> Result<u64> {
    let (mut start, mut tokens) = (0, 0);
    while start < text.len() {
        let end = encoder.block_end(text, start, IDS_BLOCK);
        ids.clear();
        encoder.encode_with(&text[start..end], ids, scratch)?;
        push_le_bytes(ids, dtype, out)?;
        tokens += ids.len() as u64;
        after_block(out, ids.len() as u64)?;
        start = end;
    }
    ids.clear();
    Ok(tokens)
}

/// Appends `ids` to `out` as the little-endian bytes of `dtype`; fails on an id that does not fit
/// (then `out` is as before), and when `out` cannot grow.
pub(crate) fn push_le_bytes(ids: &[u32], dtype: Dtype, out: &mut Vec<u8>) -> Result<()> {
    // Into the spare room, in fixed-size steps: the compiler vectorizes this, where collecting a
    // flat_map went byte by byte; and not into zeros first: clearing the room cost a third as much
    // as the conversion.
    let width = match dtype {
        Dtype::U16 => 2,
        Dtype::U32 => 4,
    };
    let (len, added) = (out.len(), ids.len() * width);
    try_reserve(out, added).map_err(|e| e.named("the output of a chunk"))?;
    let spare = &mut out.spare_capacity_mut()[..added];
    match dtype {
        Dtype::U16 => {
            // The range check rides along as an OR of all ids: a separate `find` for an id out of
            // range could not be vectorized (it stops early).
            let mut all = 0;
            for (bytes, &id) in spare.chunks_exact_mut(2).zip(ids) {
                all |= id;
                let [lo, hi] = (id as u16).to_le_bytes();
                bytes[0].write(lo);
                bytes[1].write(hi);
            }
            if all > u16::MAX as u32 {
                return Err(Error::IdOutOfRange {
                    id: ids.iter().copied().max().unwrap_or(all),
                    dtype: dtype.name(),
                });
            }
        }
        Dtype::U32 => {
            for (bytes, &id) in spare.chunks_exact_mut(4).zip(ids) {
                for (byte, b) in bytes.iter_mut().zip(id.to_le_bytes()) {
                    byte.write(b);
                }
            }
        }
    }
    // SAFETY: the loop wrote every byte of the `added` past `len`.
    unsafe { out.set_len(len + added) };
    Ok(())
}

/// Encodes the UTF-8 file `input` into `output` (`.npy`, one-dimensional, of `options.dtype`) on
/// `options.num_threads` worker threads (fewer when not all can start), and returns the number of
/// tokens. `output` is replaced only when everything succeeded (see the module docs).
pub fn encode_file(
    encoder: &Encoder,
    input: &Path,
    output: &Path,
    options: &EncodeFileOptions,
    progress: &dyn Progress,
) -> Result<u64> {
    let file = open_input(input, progress)?;
    let input_meta = file.metadata().map_err(|e| Error::io(input, e))?;
    let total = input_meta.len();
    let (specials, _) = encoder.specials();
    let chunks = ChunkReader::new(file, specials, options.chunk_size);

    let (destination, out_file) = Output::open(output, &input_meta)?;
    let out = NpyWriter::new(out_file).map_err(|e| Error::io(output, e))?;
    let mut sink = FileSink {
        out,
        output,
        progress,
        total,
        tokens: 0,
        done: 0,
    };
    let threads = thread_count(options.num_threads);
    // What is not a regular file has no known size.
    let input_bytes = if input_meta.is_file() { total } else { 0 };
    let table = encoder
        .table_for_workers(options.chunk_size, input_bytes, threads)
        .map_err(|e| e.named("the encoder's caches"))?;
    let work = FileWork {
        encoder,
        input,
        options,
        input_bytes,
        table,
    };
    run_ordered(&work, chunks, threads, 2 * threads, &mut sink)?;
    let FileSink { out, tokens, .. } = sink;
    out.finish(&npy_header(options.dtype.descr(), tokens))
        .map_err(|e| Error::io(output, e))?;
    destination.commit()?;
    Ok(tokens)
}

/// Reading a file's chunks and encoding each into the bytes of the output's dtype.
struct FileWork<'a> {
    encoder: &'a Encoder,
    input: &'a Path,
    options: &'a EncodeFileOptions,
    /// The input's size, which bounds the workers' tables (0 when unknown).
    input_bytes: u64,
    /// The table of pieces the workers share, if they do not each have their own.
    table: Option<Arc<PieceTable>>,
}

/// A worker's own buffers, kept from chunk to chunk.
#[derive(Default)]
struct Worker {
    /// Caches stay warm for the whole file. Made with the first chunk, so that failing to allocate
    /// them is that chunk's error.
    scratch: Option<Scratch>,
    ids: Vec<u32>,
    /// The input buffer of the last chunk, to hand back to the reader.
    done_with: Option<Vec<u8>>,
}

/// A chunk encoded: its bytes in the output's dtype, its number of tokens, its length in the input.
struct EncodedChunk {
    bytes: Vec<u8>,
    tokens: u64,
    len: u64,
}

impl<'a> OrderedWork for FileWork<'a> {
    type Reader = ChunkReader<'a, File>;
    type Worker = Worker;
    type Item = Chunk;
    type Done = EncodedChunk;

    fn read(&self, chunks: &mut Self::Reader, worker: &mut Worker) -> Option<Result<Chunk>> {
        if let Some(input) = worker.done_with.take() {
            chunks.recycle(input);
        }
        let chunk = chunks.next()?;
        Some(chunk.map_err(|e| Error::read(self.input, e, self.options.chunk_size)))
    }

    fn work(&self, chunk: Chunk, worker: &mut Worker, mut bytes: Vec<u8>) -> Result<EncodedChunk> {
        let text = simdutf8::compat::from_utf8(&chunk.bytes).map_err(|e| Error::InvalidUtf8 {
            path: self.input.to_path_buf(),
            offset: chunk.offset + e.valid_up_to() as u64,
        })?;
        let scratch = match &mut worker.scratch {
            Some(scratch) => scratch,
            None => worker.scratch.insert(
                Scratch::for_worker(
                    self.options.chunk_size,
                    self.input_bytes,
                    self.table.as_ref(),
                )
                .map_err(|e| e.named("the encoder's caches"))?,
            ),
        };
        bytes.clear();
        let tokens = encode_to_bytes(
            self.encoder,
            text,
            self.options.dtype,
            (&mut worker.ids, scratch),
            &mut bytes,
            |_, _| Ok(()),
        )?;
        let len = chunk.bytes.len() as u64;
        worker.done_with = Some(chunk.bytes);
        Ok(EncodedChunk { bytes, tokens, len })
    }
}

/// Writes the encoded chunks in order into the `.npy` file.
struct FileSink<'a> {
    out: NpyWriter,
    output: &'a Path,
    progress: &'a dyn Progress,
    /// The input's size, for progress reports.
    total: u64,
    tokens: u64,
    /// Bytes of input encoded and written.
    done: u64,
}

impl OrderedSink<EncodedChunk> for FileSink<'_> {
    fn write(&mut self, chunk: EncodedChunk) -> Result<Vec<u8>> {
        self.out
            .write(&chunk.bytes)
            .map_err(|e| Error::io(self.output, e))?;
        self.tokens += chunk.tokens;
        self.done += chunk.len;
        Ok(chunk.bytes)
    }

    fn written(&mut self) -> Result<()> {
        self.progress.report(Phase::Encode, self.done, self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uint16_takes_every_id_up_to_65535_and_names_the_largest_beyond() {
        let mut out = Vec::new();
        push_le_bytes(&[0, 65535, 258], Dtype::U16, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0xFF, 0xFF, 2, 1]);
        for (ids, named) in [(&[1, 65536, 3][..], 65536), (&[65536, 70000], 70000)] {
            match push_le_bytes(ids, Dtype::U16, &mut out) {
                Err(Error::IdOutOfRange { id, dtype }) => {
                    assert_eq!((id, dtype), (named, "uint16"))
                }
                other => panic!("{ids:?} gave {other:?}"),
            }
            assert_eq!(out, [0, 0, 0xFF, 0xFF, 2, 1], "an error appends nothing");
        }
        push_le_bytes(&[70000], Dtype::U32, &mut out).unwrap();
        assert_eq!(out[6..], 70000u32.to_le_bytes());
    }

    #[test]
    fn ids_encoded_a_block_at_a_time_are_those_of_the_whole_text() {
        const EOT: &str = "<|endoftext|>";
        let mut vocab: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        let merges: Vec<(Vec<u8>, Vec<u8>)> = [("a", "a"), (" ", "a"), ("aa", "aa"), ("\n", "\n")]
            .iter()
            .map(|(l, r)| (l.as_bytes().to_vec(), r.as_bytes().to_vec()))
            .collect();
        for (i, (l, r)) in merges.iter().enumerate() {
            vocab.push((256 + i as u32, [&l[..], &r[..]].concat()));
        }
        vocab.push((300, EOT.as_bytes().to_vec()));
        let encoder = Encoder::new(&vocab, &merges, &[EOT.to_string()]).unwrap();
        // Blocks end near multiples of IDS_BLOCK: put there a special token, a run with no safe cut
        // for longer than a block, runs of spaces and of newlines, and characters of several bytes.
        let mut text = String::new();
        for i in 0..12 {
            while text.len() < i * IDS_BLOCK + IDS_BLOCK - 5 {
                text.push_str(["aa a ", "日本語 ", "\n\n\n", "   a"][i % 4]);
            }
            text.push_str(EOT);
            if i == 5 {
                text.push_str(&"a".repeat(3 * IDS_BLOCK / 2));
            }
        }
        let mut expected = Vec::new();
        encoder.encode(&text, &mut expected).unwrap();
        let table = encoder.table_for_workers(DEFAULT_CHUNK_SIZE, 0, 3).unwrap();
        let mut scratch = Scratch::for_worker(DEFAULT_CHUNK_SIZE, 0, table.as_ref()).unwrap();
        for dtype in [Dtype::U16, Dtype::U32] {
            // After each block, the bytes so far are handed over with the block's ids counted; every
            // other time they are taken away, as a shard's writer takes them.
            let (mut ids, mut out, mut taken) = (vec![7], Vec::new(), Vec::new());
            let (mut blocks, mut counted) = (0, 0);
            let width = if dtype == Dtype::U16 { 2 } else { 4 };
            let tokens = encode_to_bytes(
                &encoder,
                &text,
                dtype,
                (&mut ids, &mut scratch),
                &mut out,
                |out, n| {
                    counted += n;
                    blocks += 1;
                    assert_eq!(taken.len() + out.len(), counted as usize * width);
                    if blocks % 2 == 0 {
                        taken.append(out);
                    }
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(tokens, expected.len() as u64);
            assert_eq!(counted, tokens);
            assert!(blocks >= 12, "{blocks} blocks");
            assert!(ids.is_empty());
            taken.append(&mut out);
            let mut want = Vec::new();
            push_le_bytes(&expected, dtype, &mut want).unwrap();
            assert!(taken == want, "{dtype:?}: the ids differ");
        }
    }
}
