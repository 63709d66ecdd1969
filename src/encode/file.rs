//! Encoding a whole file into a NumPy `.npy` array of token ids.
//!
//! The input is read in chunks cut at safe places ([`crate::chunks`]); worker threads take chunks in
//! turn and encode them, and the calling thread writes them in order, so memory is a few chunks and
//! their ids whatever the file size, and the encoders share nothing but the queue of chunks. The array
//! goes to a temporary file beside the output, whose header is written last (the length is known only
//! at the end) and which is renamed over the output only when everything succeeded: an error or an
//! interruption leaves no partial `.npy` (see [`crate::output`], which also keeps devices, directories
//! and the input itself from being replaced).
//!
//! Invariants: chunks are written in input order, so the array is the ids of the whole file whatever
//! the threads; at most `2 * threads` chunks are between reading and writing; the error reported is the
//! first in the file.

use std::fs::File;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::{Condvar, Mutex, PoisonError};

use super::cache::{CacheCap, Scratch};
use super::npy::{npy_header, NpyWriter};
use super::Encoder;
use crate::chunks::{Chunk, ChunkReader, DEFAULT_CHUNK_SIZE};
use crate::error::{try_reserve, Error, Result};
use crate::input::open_input;
use crate::output::Output;
use crate::progress::{Phase, Progress};
use crate::threads::{thread_count, StartGate};

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

/// An encoded chunk (its bytes in the output's dtype, its number of tokens, its length in the input),
/// or the error that stopped it.
type Encoded = Result<(Vec<u8>, u64, u64)>;

/// The chunks of the input, handed to workers in order, and the encoded chunks on their way to the
/// writer.
struct ChunkQueue<'s> {
    chunks: ChunkReader<'s, File>,
    /// The sequence number of the next chunk to hand out.
    next: u64,
    /// The sequence number of the next chunk to write.
    written: u64,
    /// Set when writing failed or finished: workers take no more chunks.
    stop: bool,
    /// Encoded chunks not yet written, by sequence number, in any order: at most one per chunk in
    /// flight, so a vector reserved for them never grows (a channel or an ordered map allocated as
    /// chunks went by, and an allocation that fails there aborts the process).
    encoded: Vec<(u64, Encoded)>,
    /// Workers that may still add to `encoded`.
    workers: usize,
    /// Output buffers that were written, for the next chunks (as [`ChunkReader::recycle`] does for the
    /// input): at most one per chunk in flight.
    spare_out: Vec<Vec<u8>>,
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

/// Counts a worker out when it ends, by returning or by panicking, and wakes the writer.
struct WorkerDone<'a, 's>(&'a Mutex<ChunkQueue<'s>>, &'a Condvar);

impl Drop for WorkerDone<'_, '_> {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .workers -= 1;
        self.1.notify_all();
    }
}

/// Writes `ids` into `out` as the little-endian bytes of `dtype`; fails on an id that does not fit,
/// and when `out` cannot be allocated.
pub(crate) fn to_le_bytes(ids: &[u32], dtype: Dtype, out: &mut Vec<u8>) -> Result<()> {
    // Into a buffer of the final size, in fixed-size steps: the compiler vectorizes this, where
    // collecting a flat_map went byte by byte.
    out.clear();
    let width = match dtype {
        Dtype::U16 => 2,
        Dtype::U32 => 4,
    };
    try_reserve(out, ids.len() * width).map_err(|e| e.named("the output of a chunk"))?;
    match dtype {
        Dtype::U16 => {
            out.resize(ids.len() * 2, 0);
            // The range check rides along as an OR of all ids: a separate `find` for an id out of
            // range could not be vectorized (it stops early).
            let mut all = 0;
            for (bytes, &id) in out.chunks_exact_mut(2).zip(ids) {
                all |= id;
                bytes.copy_from_slice(&(id as u16).to_le_bytes());
            }
            if all > u16::MAX as u32 {
                return Err(Error::IdOutOfRange {
                    id: ids.iter().copied().max().unwrap_or(all),
                    dtype: dtype.name(),
                });
            }
        }
        Dtype::U32 => {
            out.resize(ids.len() * 4, 0);
            for (bytes, &id) in out.chunks_exact_mut(4).zip(ids) {
                bytes.copy_from_slice(&id.to_le_bytes());
            }
        }
    }
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
    let EncodeFileOptions {
        dtype,
        num_threads,
        chunk_size,
    } = *options;
    let file = open_input(input, progress)?;
    let input_meta = file.metadata().map_err(|e| Error::io(input, e))?;
    let total = input_meta.len();
    let (specials, _) = encoder.specials();
    let chunks = ChunkReader::new(file, specials, chunk_size);

    let (destination, out_file) = Output::open(output, &input_meta)?;
    let write_err = |e| Error::io(output, e);
    let mut out = NpyWriter::new(out_file).map_err(write_err)?;

    let threads = thread_count(num_threads);
    // `bytes` comes from `spare_out`.
    let encode_chunk = |chunk: &Chunk, worker: &mut Worker, mut bytes: Vec<u8>| {
        let text = std::str::from_utf8(&chunk.bytes).map_err(|e| Error::InvalidUtf8 {
            path: input.to_path_buf(),
            offset: chunk.offset + e.valid_up_to() as u64,
        })?;
        let scratch = match &mut worker.scratch {
            Some(scratch) => scratch,
            None => worker.scratch.insert(
                Scratch::for_text(chunk_size, CacheCap::CALL)
                    .map_err(|e| e.named("the encoder's caches"))?,
            ),
        };
        worker.ids.clear();
        encoder.encode_with(text, &mut worker.ids, scratch)?;
        to_le_bytes(&worker.ids, dtype, &mut bytes)?;
        Ok::<_, Error>((bytes, worker.ids.len() as u64))
    };

    // Each worker takes the next chunk from the reader, encodes it and sends it on; this thread writes
    // the chunks in order. So reading overlaps encoding (a worker reads while the others encode), and
    // no worker waits for the slowest chunk of a batch. A worker only takes a chunk within `window`
    // chunks of the next one to write, which bounds memory however uneven the chunks.
    let window = 2 * threads;
    let (mut encoded, mut spare_out) = (Vec::new(), Vec::new());
    try_reserve(&mut encoded, window).map_err(|e| e.named("the queue of chunks"))?;
    try_reserve(&mut spare_out, window).map_err(|e| e.named("the queue of chunks"))?;
    let queue = Mutex::new(ChunkQueue {
        chunks,
        next: 0,
        written: 0,
        stop: false,
        encoded,
        workers: 0,
        spare_out,
    });
    let window = window as u64;
    // `room`: a chunk was written (workers may take more); `ready`: a chunk was encoded or a worker
    // ended (the writer may go on).
    let (room, ready) = (Condvar::new(), Condvar::new());
    let gate = StartGate::default();
    let lock = || queue.lock().unwrap_or_else(PoisonError::into_inner);
    // Takes the next chunk, once fewer than `window` wait to be written, and encodes it; `None` at
    // the end of the input or once told to stop.
    let encode_next = |worker: &mut Worker| {
        let (seq, chunk, bytes) = {
            let mut q = lock();
            if let Some(input) = worker.done_with.take() {
                q.chunks.recycle(input);
            }
            while !q.stop && q.next >= q.written + window {
                q = room.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
            if q.stop {
                return None;
            }
            let seq = q.next;
            let chunk = q.chunks.next()?;
            q.next += 1;
            let bytes = q.spare_out.pop().unwrap_or_default();
            (
                seq,
                chunk.map_err(|e| Error::read(input, e, chunk_size)),
                bytes,
            )
        };
        let encoded = chunk.and_then(|chunk| {
            let (bytes, n) = encode_chunk(&chunk, worker, bytes)?;
            let len = chunk.bytes.len() as u64;
            worker.done_with = Some(chunk.bytes);
            Ok((bytes, n, len))
        });
        Some((seq, encoded))
    };
    let encode_next = &encode_next;
    let (tokens, out) = std::thread::scope(|scope| -> Result<(u64, NpyWriter)> {
        let mut workers = Vec::new();
        // Room reserved for as many workers as asked for (a few): pushing cannot allocate.
        try_reserve(&mut workers, threads).map_err(|e| e.named("the queue of chunks"))?;
        for _ in 0..threads {
            let (room, ready, lock, queue, gate) = (&room, &ready, &lock, &queue, &gate);
            lock().workers += 1;
            let started = crate::threads::spawn_scoped(scope, move || {
                let _done = WorkerDone(queue, ready);
                gate.enter();
                let mut worker = Worker::default();
                let work = || {
                    while let Some(encoded) = encode_next(&mut worker) {
                        // Room reserved: at most `window` chunks are between `written` and `next`.
                        lock().encoded.push(encoded);
                        ready.notify_all();
                    }
                };
                // A panic would leave its chunk unwritten and the others waiting for it: stop
                // everyone, then let the panic reach the caller through `join`.
                if let Err(panic) = catch_unwind(AssertUnwindSafe(work)) {
                    lock().stop = true;
                    room.notify_all();
                    resume_unwind(panic);
                }
            });
            match started {
                Ok(worker) => workers.push(worker),
                // Out of memory for a stack, or at the process's thread limit: the workers that
                // started do the work.
                Err(_) => {
                    lock().workers -= 1;
                    break;
                }
            }
        }
        gate.open(workers.len());
        // With no worker at all, this thread encodes each chunk before writing it.
        let mut alone = workers.is_empty().then(Worker::default);
        let (mut tokens, mut done, mut written) = (0u64, 0u64, 0u64);
        // The chunk to write next, in order: errors too are taken in order, so the one reported is
        // the first in the file. None when every worker has ended and no chunk is left.
        let mut next_in_order = || -> Option<Encoded> {
            if let Some(worker) = &mut alone {
                return encode_next(worker).map(|(_, encoded)| encoded);
            }
            let mut q = lock();
            loop {
                let written = q.written;
                if let Some(at) = q.encoded.iter().position(|&(seq, _)| seq == written) {
                    return Some(q.encoded.swap_remove(at).1);
                }
                if q.workers == 0 {
                    return None;
                }
                q = ready.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let mut write_all = || -> Result<()> {
            while let Some(encoded) = next_in_order() {
                let (bytes, n, len) = encoded?;
                out.write(&bytes).map_err(write_err)?;
                (tokens, done, written) = (tokens + n, done + len, written + 1);
                let mut q = lock();
                q.written = written;
                q.spare_out.push(bytes);
                drop(q);
                room.notify_all();
                progress.report(Phase::Encode, done, total)?;
            }
            Ok(())
        };
        let result = write_all();
        // On an error, workers stop at their next chunk.
        lock().stop = true;
        room.notify_all();
        for worker in workers {
            if let Err(panic) = worker.join() {
                resume_unwind(panic);
            }
        }
        result.map(|()| (tokens, out))
    })?;
    // The buffers of the chunks are freed before the header and the commit allocate (a little).
    drop(queue);
    out.finish(&npy_header(dtype.descr(), tokens))
        .map_err(write_err)?;
    destination.commit()?;
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uint16_takes_every_id_up_to_65535_and_names_the_largest_beyond() {
        let mut out = Vec::new();
        to_le_bytes(&[0, 65535, 258], Dtype::U16, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0xFF, 0xFF, 2, 1]);
        for (ids, named) in [(&[1, 65536, 3][..], 65536), (&[65536, 70000], 70000)] {
            match to_le_bytes(ids, Dtype::U16, &mut out) {
                Err(Error::IdOutOfRange { id, dtype }) => {
                    assert_eq!((id, dtype), (named, "uint16"))
                }
                other => panic!("{ids:?} gave {other:?}"),
            }
        }
        to_le_bytes(&[70000], Dtype::U32, &mut out).unwrap();
        assert_eq!(out, 70000u32.to_le_bytes());
    }
}
