//! Encoding a whole file into a NumPy `.npy` array of token ids.
//!
//! The input is read in chunks cut at safe places ([`crate::chunks`]); a batch of chunks is encoded on
//! all threads at once and written in order, so memory is a few chunks and their ids whatever the file
//! size, and threads never talk. The array goes to a temporary file beside the output, whose header is
//! written last (the length is known only at the end) and which is renamed over the output only when
//! everything succeeded: an error or an interruption leaves no partial `.npy`.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rayon::prelude::*;

use crate::chunks::{Chunk, ChunkReader};
use crate::encode::{ids_capacity, Encoder};
use crate::error::{Error, Result};
use crate::npy_writer::{npy_header, NpyWriter};
use crate::progress::{Phase, Progress};
use crate::scratch::Scratch;

/// The element type of the output array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    U16,
    U32,
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

/// Removes the temporary file unless it was renamed into place.
struct TempFile(Option<PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// `ids` as the little-endian bytes of `dtype`; fails on an id that does not fit.
fn to_le_bytes(ids: &[u32], dtype: Dtype) -> Result<Vec<u8>> {
    // Into a buffer of the final size, in fixed-size steps: the compiler vectorizes this, where
    // collecting a flat_map went byte by byte.
    match dtype {
        Dtype::U16 => {
            if let Some(&id) = ids.iter().find(|&&id| id > u16::MAX as u32) {
                return Err(Error::IdOutOfRange {
                    id,
                    dtype: dtype.name(),
                });
            }
            let mut out = vec![0u8; ids.len() * 2];
            for (bytes, &id) in out.chunks_exact_mut(2).zip(ids) {
                bytes.copy_from_slice(&(id as u16).to_le_bytes());
            }
            Ok(out)
        }
        Dtype::U32 => {
            let mut out = vec![0u8; ids.len() * 4];
            for (bytes, &id) in out.chunks_exact_mut(4).zip(ids) {
                bytes.copy_from_slice(&id.to_le_bytes());
            }
            Ok(out)
        }
    }
}

/// Encodes the UTF-8 file `input` into `output` (`.npy`, one-dimensional, `dtype`) on the current
/// rayon pool and returns the number of tokens.
pub fn encode_file(
    encoder: &Encoder,
    input: &Path,
    output: &Path,
    dtype: Dtype,
    chunk_size: usize,
    progress: &dyn Progress,
) -> Result<u64> {
    let file = File::open(input).map_err(|e| Error::io(input, e))?;
    let total = file.metadata().map_err(|e| Error::io(input, e))?.len();
    let (specials, _) = encoder.specials();
    let mut chunks = ChunkReader::new(file, specials, chunk_size);

    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp_path = output.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let tmp = TempFile(Some(tmp_path.clone()));
    let write_err = |e| Error::io(output, e);
    let mut out = NpyWriter::create(&tmp_path).map_err(write_err)?;

    let batch_size = 3 * rayon::current_num_threads();
    // One encoder scratch per worker thread, kept across chunks: its caches of pieces stay warm for the
    // whole file instead of starting empty at every chunk (no thread waits on another's lock).
    let scratches: Vec<Mutex<Scratch>> = (0..rayon::current_num_threads())
        .map(|_| Mutex::new(Scratch::for_text(chunk_size)))
        .collect();
    let encode_chunk = |chunk: &Chunk| -> Result<(Vec<u8>, u64)> {
        let text = std::str::from_utf8(&chunk.bytes).map_err(|e| Error::InvalidUtf8 {
            path: input.to_path_buf(),
            offset: chunk.offset + e.valid_up_to() as u64,
        })?;
        let mut ids = Vec::with_capacity(ids_capacity(text.len()));
        let worker = rayon::current_thread_index().unwrap_or(0) % scratches.len();
        let mut scratch = scratches[worker].lock().unwrap_or_else(|p| p.into_inner());
        encoder.encode_with(text, &mut ids, &mut scratch);
        Ok((to_le_bytes(&ids, dtype)?, ids.len() as u64))
    };

    // Batches are encoded on the pool while a writer thread writes the previous one, so the pool does
    // not wait for the disk, and the disk does not wait for the pool.
    let (tokens, out) = std::thread::scope(|scope| -> Result<(u64, NpyWriter)> {
        let (send, receive) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(0);
        let writer = scope.spawn(move || -> std::io::Result<NpyWriter> {
            for batch in receive {
                for bytes in batch {
                    out.write(&bytes)?;
                }
            }
            Ok(out)
        });
        let (mut tokens, mut done) = (0u64, 0u64);
        let encoded = loop {
            let batch = chunks
                .by_ref()
                .take(batch_size)
                .collect::<std::io::Result<Vec<_>>>()
                .map_err(|e| Error::io(input, e));
            let batch = match batch {
                Ok(batch) if batch.is_empty() => break Ok(()),
                Ok(batch) => batch,
                Err(e) => break Err(e),
            };
            let encoded: Result<Vec<(Vec<u8>, u64)>> = batch.par_iter().map(encode_chunk).collect();
            let encoded = match encoded {
                Ok(encoded) => encoded,
                Err(e) => break Err(e),
            };
            tokens += encoded.iter().map(|(_, n)| n).sum::<u64>();
            done += batch.iter().map(|c| c.bytes.len() as u64).sum::<u64>();
            if send
                .send(encoded.into_iter().map(|(b, _)| b).collect())
                .is_err()
            {
                break Ok(()); // the writer failed; its error is reported below
            }
            if let Err(e) = progress.report(Phase::Encode, done, total) {
                break Err(e);
            }
        };
        drop(send);
        let out = writer
            .join()
            .expect("the writer does not panic")
            .map_err(write_err);
        encoded?;
        Ok((tokens, out?))
    })?;
    let file = out
        .finish(&npy_header(dtype.descr(), tokens))
        .map_err(write_err)?;
    // No fsync: the rename makes the output appear whole or not at all to every reader, which is the
    // guarantee; forcing gigabytes to disk first took seconds and protects only against power loss.
    drop(file);
    fs::rename(&tmp_path, output).map_err(write_err)?;
    std::mem::forget(tmp);
    Ok(tokens)
}
