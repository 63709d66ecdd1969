//! Encoding a dataset into token shards: [`encode_dataset`].
//!
//! The inputs are read in order, a [`Piece`] at a time, by whichever worker thread holds the reader:
//! each piece gets the next sequence number. Workers encode their pieces in parallel, and the calling
//! thread writes them in sequence into the shard of their input, finishing a shard when its last input
//! ends ([`crate::ordered`], the pipeline `encode_file` runs too). So one large text file keeps every
//! thread busy as `encode_file` does, many small files do too, and the bytes of every shard depend only
//! on its inputs, never on the threads or the piece sizes (every piece boundary is a document boundary
//! or a safe cut). A worker takes a piece only within `2 * threads` pieces of the next one to write,
//! which bounds memory whatever the inputs.
//!
//! Reading (decompression, JSON parsing, Parquet decoding, an iterable's batches) is serial, one piece
//! at a time; it is several times faster than encoding the same text, so on a few cores it keeps the
//! encoders fed.
//!
//! Many inputs of about the same size, each with its own shard (a dataset as it ships: hundreds of
//! shards), go another way ([`WholeInputs`]): each worker takes the next input whole, reads, encodes and
//! writes it into its shard under temporary names, and the calling thread puts the shards in place in
//! order. Workers then wait neither for the reader nor for the writer, and do not share the cores with
//! a writer thread. Memory is bounded as before: a worker holds one piece, and the at most
//! `2 * threads` shards waiting to be put in place are files written whole (at most [`OPEN_WAITING`]
//! of them still open, for the calling thread to flush). The shards' bytes are the same either way.
//!
//! A worker's piece is the chunk size asked for, or less when the workers are many
//! ([`piece_size`]): each piece is held with its reader's buffers, so memory would otherwise grow by a
//! chunk's worth of buffers with every core.
//!
//! Invariants: a shard is put in place (flushed, renamed to its names, then reported to the caller)
//! only after its last piece and after every shard before it; the error returned is the first in input
//! order, so every shard before it is in place and none after it is (the temporary files of those
//! started are removed).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::writer::{ClosedShard, Shard, ShardFormat, ShardWriter};
use crate::encode::cache::Scratch;
use crate::encode::file::{encode_to_bytes, push_le_bytes, Dtype};
use crate::encode::{Encoder, PieceTable};
use crate::error::{try_push, Error, Result};
use crate::ordered::{run_ordered, OrderedSink, OrderedWork};
use crate::progress::Progress;
use crate::sources::{
    open_documents, DocumentOptions, DocumentReader, Errors, Piece, SourceKind, MAX_KEPT_ERRORS,
};
use crate::special::Segment;
use crate::threads::thread_count;

/// Where a shard's documents come from.
pub enum DatasetInput<'a> {
    /// A source file, read by the engine ([`open_documents`]).
    File(PathBuf, SourceKind),
    /// Documents read elsewhere (the Python layer's iterables of `str`).
    Reader(Box<dyn DocumentReader + 'a>),
}

/// One input and the shard it goes into.
pub struct DatasetJob<'a> {
    /// The documents.
    pub input: DatasetInput<'a>,
    /// The shard's name: consecutive jobs with the same name go into one shard, in order.
    pub shard: String,
}

/// How to encode a dataset.
#[derive(Clone, Copy, Debug)]
pub struct DatasetOptions<'a> {
    /// The shards' layout.
    pub format: ShardFormat,
    /// The ids' type in the shards.
    pub dtype: Dtype,
    /// The id written after every document, if any.
    pub eot: Option<u32>,
    /// The special token that separates the documents of a text file (a file is one document when it
    /// is not one of the encoder's special tokens).
    pub separator: Option<&'a str>,
    /// The field of JSON lines records that holds the text.
    pub text_field: &'a str,
    /// Whether a bad record fails the work or is skipped.
    pub errors: Errors,
    /// Worker threads; `None` uses every core (see [`crate::thread_count`]).
    pub num_threads: Option<usize>,
    /// About how many bytes of text a piece holds (see [`crate::DEFAULT_CHUNK_SIZE`]).
    pub chunk_size: usize,
    /// The bytes of all inputs, for progress reports (0 when unknown).
    pub total_bytes: u64,
}

/// What was encoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DatasetSummary {
    /// Ids written.
    pub tokens: u64,
    /// Documents written.
    pub documents: u64,
    /// Bad records skipped ([`Errors::Skip`]).
    pub skipped: u64,
    /// The messages of the first [`MAX_KEPT_ERRORS`] records skipped, in order.
    pub skipped_errors: Vec<String>,
    /// Bytes of input read (compressed, as on disk).
    pub input_bytes: u64,
}

impl DatasetSummary {
    /// Counts what some input held besides its ids: `input_bytes` read, `skipped` records and their
    /// `messages`, of which the first are kept.
    fn add_input(
        &mut self,
        input_bytes: u64,
        skipped: u64,
        messages: impl IntoIterator<Item = String>,
    ) {
        self.input_bytes += input_bytes;
        self.skipped += skipped;
        keep_first_errors(&mut self.skipped_errors, messages);
    }
}

/// Appends to `kept` the first of `messages` it has room for ([`MAX_KEPT_ERRORS`] in all).
fn keep_first_errors(kept: &mut Vec<String>, messages: impl IntoIterator<Item = String>) {
    let room = MAX_KEPT_ERRORS.saturating_sub(kept.len());
    kept.extend(messages.into_iter().take(room));
}

/// What a shard holds besides its files ([`Shard`]): what `on_shard` gets with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardInputs {
    /// Bad records skipped in its inputs ([`Errors::Skip`]).
    pub skipped: u64,
    /// Bytes of text encoded (UTF-8, the documents' text; a text file's separators included).
    pub text_bytes: u64,
}

/// A piece encoded: the ids (little-endian bytes of the dtype) and where its documents end.
struct Encoded {
    job: usize,
    bytes: Vec<u8>,
    ends: Vec<u64>,
    /// The input ended with this piece.
    ended: bool,
    input_bytes: u64,
    text_bytes: u64,
    skipped: u64,
    skip_messages: Vec<String>,
}

/// The inputs, read in order.
struct Reading<'a> {
    inputs: Vec<Option<DatasetInput<'a>>>,
    next_job: usize,
    current: Option<(usize, Box<dyn DocumentReader + 'a>)>,
}

/// A piece read: its job, and whether its input ended with it (the text is in the worker's piece).
struct PieceRead {
    job: usize,
    ended: bool,
}

/// A worker's own buffers and caches, kept from piece to piece.
#[derive(Default)]
struct Worker {
    /// Made with the first piece, so that failing to allocate it is that piece's error.
    scratch: Option<Scratch>,
    ids: Vec<u32>,
    /// The piece read last.
    piece: Piece,
}

/// Reading the inputs' pieces and encoding each.
struct DatasetWork<'a, 'o> {
    encoder: &'o Encoder,
    options: &'o DatasetOptions<'a>,
    documents: DocumentOptions<'a>,
    progress: &'o dyn Progress,
    /// The path of each input read by the engine, for errors found while encoding.
    paths: Vec<Option<PathBuf>>,
    /// The index among the encoder's special tokens of the one that separates documents.
    separator: Option<usize>,
    /// The table of pieces the workers share, if they do not each have their own.
    table: Option<Arc<PieceTable>>,
}

impl<'a> OrderedWork for DatasetWork<'a, '_> {
    type Reader = Reading<'a>;
    type Worker = Worker;
    type Item = PieceRead;
    type Done = Encoded;

    /// Reads the next piece of the current input, or of the next one, into the worker's piece.
    fn read(&self, reading: &mut Reading<'a>, worker: &mut Worker) -> Option<Result<PieceRead>> {
        if reading.current.is_none() {
            let job = reading.next_job;
            let input = reading.inputs.get_mut(job)?.take();
            reading.next_job += 1;
            let opened = match input {
                Some(DatasetInput::File(path, kind)) => {
                    open_documents(&path, kind, &self.documents, self.progress)
                }
                Some(DatasetInput::Reader(reader)) => Ok(reader),
                None => unreachable!("each input is opened once"),
            };
            match opened {
                Ok(reader) => reading.current = Some((job, reader)),
                Err(e) => return Some(Err(e)),
            }
        }
        let (job, reader) = reading.current.as_mut().expect("opened above");
        let job = *job;
        let read = reader.read(&mut worker.piece);
        if !matches!(read, Ok(false)) {
            reading.current = None;
        }
        Some(read.map(|ended| PieceRead { job, ended }))
    }

    fn work(&self, read: PieceRead, worker: &mut Worker, bytes: Vec<u8>) -> Result<Encoded> {
        let PieceRead { job, ended } = read;
        let (bytes, ends) = self.encode(job, worker, bytes, None)?;
        let piece = &mut worker.piece;
        Ok(Encoded {
            job,
            bytes,
            ends,
            ended,
            input_bytes: piece.input_bytes,
            text_bytes: piece.text_len() as u64,
            skipped: piece.skipped,
            skip_messages: std::mem::take(&mut piece.skip_messages),
        })
    }
}

impl DatasetWork<'_, '_> {
    /// The ids of the worker's piece (of input `job`) as the bytes of the dtype, into `bytes`, and
    /// where its documents end. With `shard`, the bytes are written through to it whenever
    /// [`WRITE_THROUGH`] of them have gathered, and what is returned is the rest, not yet written.
    fn encode(
        &self,
        job: usize,
        worker: &mut Worker,
        mut bytes: Vec<u8>,
        shard: Option<&mut ShardWriter>,
    ) -> Result<(Vec<u8>, Vec<u64>)> {
        let (encoder, options) = (self.encoder, self.options);
        let Worker {
            scratch,
            ids,
            piece,
        } = worker;
        let scratch = match scratch {
            Some(scratch) => scratch,
            None => scratch.insert(
                Scratch::for_worker(options.chunk_size, options.total_bytes, self.table.as_ref())
                    .map_err(|e| e.named("the encoder's caches"))?,
            ),
        };
        bytes.clear();
        let mut gathered = Gathered {
            ends: Vec::new(),
            ids: 0,
            shard,
        };
        // The ids of `text` appended, converted a block at a time while in cache.
        let mut encode = |text: &str, bytes: &mut Vec<u8>, gathered: &mut Gathered| {
            encode_to_bytes(
                encoder,
                text,
                options.dtype,
                (&mut *ids, &mut *scratch),
                bytes,
                |bytes, n| gathered.added(bytes, n),
            )
        };
        let eot = options.eot.map(|eot| (eot, options.dtype));
        match piece.chunk() {
            Some((chunk, offset)) => {
                let text = simdutf8::compat::from_utf8(chunk).map_err(|e| Error::InvalidUtf8 {
                    path: self.paths[job].clone().unwrap_or_default(),
                    offset: offset + e.valid_up_to() as u64,
                })?;
                let (specials, _) = encoder.specials();
                // Where the document being encoded starts, and where the next segment does.
                let (mut start, mut at) = (0, 0);
                for segment in specials.split(text) {
                    match segment {
                        Segment::Text(part) => {
                            at = part.as_ptr() as usize - text.as_ptr() as usize + part.len();
                        }
                        Segment::Special(i) => {
                            let token_start = at;
                            at += specials.tokens()[i].len();
                            if Some(i) == self.separator {
                                encode(&text[start..token_start], &mut bytes, &mut gathered)?;
                                gathered.end_document(&mut bytes, eot)?;
                                start = at;
                            }
                        }
                    }
                }
                // The open document goes on in the next piece.
                encode(&text[start..], &mut bytes, &mut gathered)?;
            }
            None => {
                for text in piece.documents() {
                    encode(text, &mut bytes, &mut gathered)?;
                    gathered.end_document(&mut bytes, eot)?;
                }
            }
        }
        Ok((bytes, gathered.ends))
    }
}

/// About how much text the pieces of all workers hold at once, when they are many: a worker reads
/// pieces of the chunk size asked for, or of this shared among the workers when that is less (down to
/// [`MIN_PIECE`]). A piece is held with its reader's buffers (a Parquet row group's compressed and
/// decoded pages, its strings), several times its size, so that with pieces of the default chunk size
/// eight workers took `encode_dataset` past its 300 MB bound (`benchmarks/README.md`); up to four keep
/// the default.
const PIECES_TEXT: usize = 16 << 20;

/// The smallest piece [`piece_size`] gives for many workers: a piece's fixed costs (a scratch's
/// bookkeeping, splitting at special tokens) stay small beside a megabyte of encoding.
const MIN_PIECE: usize = 1 << 20;

/// The text a worker reads at a time, for pieces of `chunk_size` asked for and `threads` workers: the
/// chunk size, or less when the workers are many ([`PIECES_TEXT`]). The bytes of the shards do not
/// depend on it (a piece ends at a document boundary or a safe cut).
fn piece_size(chunk_size: usize, threads: usize) -> usize {
    chunk_size.min((PIECES_TEXT / threads.max(1)).max(MIN_PIECE))
}

/// Bytes of ids a worker that writes its own shard gathers before it writes them: one write of the size
/// the kernel takes at a low and steady cost ([`crate::output::WRITE_SLICE`]), while its bytes are
/// still in cache.
const WRITE_THROUGH: usize = crate::output::WRITE_SLICE;

/// What goes with the bytes of a piece's ids while they are encoded ([`DatasetWork::encode`]).
struct Gathered<'s> {
    /// Where each document ended, in ids from the start of the bytes.
    ends: Vec<u64>,
    /// The ids in the bytes.
    ids: u64,
    /// The shard the bytes are written through to, when the worker writes one.
    shard: Option<&'s mut ShardWriter>,
}

impl Gathered<'_> {
    /// Counts `n` ids appended to `bytes`, and writes `bytes` through to the shard (then clears them)
    /// once there are [`WRITE_THROUGH`] of them.
    fn added(&mut self, bytes: &mut Vec<u8>, n: u64) -> Result<()> {
        self.ids += n;
        if let Some(shard) = self.shard.as_deref_mut() {
            if bytes.len() >= WRITE_THROUGH {
                shard.write(bytes, &self.ends)?;
                bytes.clear();
                self.ends.clear();
                self.ids = 0;
            }
        }
        Ok(())
    }

    /// Ends the document whose ids were just appended to `bytes`, after the end-of-text id if
    /// documents end with one (with the dtype of the bytes).
    fn end_document(&mut self, bytes: &mut Vec<u8>, eot: Option<(u32, Dtype)>) -> Result<()> {
        if let Some((eot, dtype)) = eot {
            push_le_bytes(&[eot], dtype, bytes)?;
            self.ids += 1;
        }
        try_push(&mut self.ends, self.ids).map_err(|e| e.named("the ids of a piece"))
    }
}

/// The inputs, handed out whole in order.
struct WholeReading<'a> {
    inputs: Vec<Option<DatasetInput<'a>>>,
    next_job: usize,
}

/// An input encoded whole into its shard, not yet in place.
struct WholeShard {
    job: usize,
    /// Whether the shard's files are open, counted in [`WholeInputs::open_waiting`].
    kept_open: bool,
    shard: ClosedShard,
    inputs: ShardInputs,
    input_bytes: u64,
    skip_messages: Vec<String>,
    /// The worker's buffer of ids, for a next input.
    bytes: Vec<u8>,
}

/// Each worker reads, encodes and writes whole inputs, each into its own shard; the calling thread
/// puts the shards in place in order ([`Committer`]).
struct WholeInputs<'a, 'o, 'f> {
    pieces: DatasetWork<'a, 'o>,
    folder: &'f Path,
    shards: &'f [String],
    eot: Option<&'f [u8]>,
    /// Where the workers stop, once an input failed.
    stop: &'f StopFrom,
    /// Closed shards waiting for the calling thread with their files open, and the most that may
    /// ([`OPEN_WAITING`]).
    open_waiting: &'f AtomicUsize,
    open_limit: usize,
}

/// The most closed shards that wait for their commit with their two files open, for the calling thread
/// to flush: a worker that flushes its own shard waits on the disk with its core idle (1 GB of token
/// shards on 2 cores: each worker waited 0.9 s in 200 flushes). Past it, a worker flushes and closes
/// its shard itself, so that the open files stay within a process's usual limit (1,024) whatever the
/// threads. The tests keep one open, so that both ways run in them (and one test each way alone).
const OPEN_WAITING: usize = if cfg!(test) { 1 } else { 64 };

/// The first input whose worker stops at its next piece, rather than encode a whole input whose shard
/// will never be put in place (an input may be gigabytes): `usize::MAX` until something fails.
///
/// After an input that failed, or whose shard could not be put in place, workers on earlier inputs go
/// on, so that every shard before the error is complete; after a report that failed (Ctrl-C), the
/// workers on inputs whose shards are not yet in place stop; after a panic, which is what the caller
/// gets, every worker stops.
struct StopFrom(AtomicUsize);

impl StopFrom {
    fn new() -> StopFrom {
        StopFrom(AtomicUsize::new(usize::MAX))
    }

    /// Stops the workers on input `job` and later ones.
    fn at(&self, job: usize) {
        self.0.fetch_min(job, Ordering::SeqCst);
    }

    /// Whether a worker on input `job` stops.
    fn stops(&self, job: usize) -> bool {
        job >= self.0.load(Ordering::SeqCst)
    }
}

/// Stops every worker ([`StopFrom::at`] 0) when dropped while its thread panics: a worker's or the
/// calling thread's (the [`Committer`]'s).
struct StopOnPanic<'f>(&'f StopFrom);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.at(0);
        }
    }
}

impl<'a> OrderedWork for WholeInputs<'a, '_, '_> {
    type Reader = WholeReading<'a>;
    type Worker = Worker;
    type Item = (usize, DatasetInput<'a>);
    type Done = WholeShard;

    fn read(
        &self,
        reading: &mut WholeReading<'a>,
        _: &mut Worker,
    ) -> Option<Result<(usize, DatasetInput<'a>)>> {
        let job = reading.next_job;
        if self.stop.stops(job) {
            return None;
        }
        let input = reading.inputs.get_mut(job)?.take()?;
        reading.next_job += 1;
        Some(Ok((job, input)))
    }

    fn work(
        &self,
        (job, input): (usize, DatasetInput<'a>),
        worker: &mut Worker,
        bytes: Vec<u8>,
    ) -> Result<WholeShard> {
        let _panicking = StopOnPanic(self.stop);
        let encoded = self.encode_whole(job, input, worker, bytes);
        if encoded.is_err() {
            self.stop.at(job + 1);
        }
        encoded
    }
}

impl<'a> WholeInputs<'a, '_, '_> {
    /// The shard of input `job`, written whole under temporary names.
    fn encode_whole(
        &self,
        job: usize,
        input: DatasetInput<'a>,
        worker: &mut Worker,
        mut bytes: Vec<u8>,
    ) -> Result<WholeShard> {
        let work = &self.pieces;
        let options = work.options;
        let mut reader = match input {
            DatasetInput::File(path, kind) => {
                open_documents(&path, kind, &work.documents, work.progress)?
            }
            DatasetInput::Reader(reader) => reader,
        };
        let mut shard = ShardWriter::create(
            self.folder,
            &self.shards[job],
            options.format,
            options.dtype,
        )?;
        let (mut inputs, mut input_bytes) = (ShardInputs::default(), 0);
        let mut skip_messages = Vec::new();
        loop {
            // Ctrl-C between pieces, as the calling thread's progress reports let it in otherwise.
            if work.progress.cancelled() || self.stop.stops(job) {
                return Err(Error::Interrupted);
            }
            let ended = reader.read(&mut worker.piece)?;
            let (encoded, ends) = work.encode(job, worker, bytes, Some(&mut shard))?;
            shard.write(&encoded, &ends)?;
            bytes = encoded;
            let piece = &mut worker.piece;
            inputs.skipped += piece.skipped;
            inputs.text_bytes += piece.text_len() as u64;
            input_bytes += piece.input_bytes;
            keep_first_errors(&mut skip_messages, piece.skip_messages.drain(..));
            if ended {
                break;
            }
        }
        shard.end_open_document(self.eot)?;
        let mut shard = shard.close()?;
        let kept_open = self.open_waiting.fetch_add(1, Ordering::Relaxed) < self.open_limit;
        if !kept_open {
            self.open_waiting.fetch_sub(1, Ordering::Relaxed);
            shard.sync()?;
        }
        Ok(WholeShard {
            job,
            kept_open,
            shard,
            inputs,
            input_bytes,
            skip_messages,
            bytes,
        })
    }
}

/// The calling thread's side of [`WholeInputs`]: puts each shard in place, in order.
struct Committer<'o, 'a, 'f> {
    options: &'o DatasetOptions<'a>,
    /// [`WholeInputs::stop`].
    stop: &'f StopFrom,
    /// [`WholeInputs::open_waiting`].
    open_waiting: &'f AtomicUsize,
    progress: &'o dyn Progress,
    on_shard: &'f mut dyn FnMut(&Shard, ShardInputs) -> Result<()>,
    /// The shards put in place: those of the first `committed` inputs.
    committed: usize,
    summary: DatasetSummary,
}

impl OrderedSink<WholeShard> for Committer<'_, '_, '_> {
    fn write(&mut self, done: WholeShard) -> Result<Vec<u8>> {
        // A panic here (putting a shard in place, `on_shard`) reaches the caller: the workers stop at
        // their next piece rather than finish inputs whose shards will never be put in place.
        let _panicking = StopOnPanic(self.stop);
        let job = done.job;
        let written = self.commit(done);
        match written {
            Ok(_) => self.committed = job + 1,
            Err(_) => self.stop.at(job + 1),
        }
        written
    }

    fn written(&mut self) -> Result<()> {
        let _panicking = StopOnPanic(self.stop);
        let summary = &self.summary;
        let reported = self.progress.encoded(
            summary.input_bytes,
            self.options.total_bytes,
            summary.documents,
            summary.tokens,
        );
        if reported.is_err() {
            self.stop.at(self.committed);
        }
        reported
    }
}

impl Committer<'_, '_, '_> {
    /// Puts `done`'s shard in place and reports it; returns the worker's buffer.
    fn commit(&mut self, done: WholeShard) -> Result<Vec<u8>> {
        let shard = done.shard.commit();
        if done.kept_open {
            self.open_waiting.fetch_sub(1, Ordering::Relaxed);
        }
        let shard = shard?;
        let summary = &mut self.summary;
        summary.tokens += shard.tokens;
        summary.documents += shard.documents;
        summary.add_input(done.input_bytes, done.inputs.skipped, done.skip_messages);
        (self.on_shard)(&shard, done.inputs)?;
        Ok(done.bytes)
    }
}

/// Encodes the documents of `jobs` into shards in `folder` (`ShardWriter`: written under temporary
/// names, renamed into place when whole), on `options.num_threads` worker threads (fewer when not all
/// can start), and calls `on_shard` with each shard once it is in place, and what its inputs held.
///
/// Every record of a JSON lines file or of a reader is a document, followed by `options.eot` when
/// given; a text file's documents are separated by `options.separator` (the token itself is not
/// written; `options.eot` follows each document, the last one included). The bytes of each shard depend
/// only on its inputs and the options, whatever the threads.
///
/// Fails with the first error in input order: an input that cannot be opened or read (naming it),
/// invalid UTF-8 in a text file, a bad record in strict mode, a shard that cannot be written, an error
/// from `on_shard`, or when memory runs out or `progress` asks to stop. The shards before it stay in
/// place; none after it is put in place, and the temporary files of those being written are removed.
pub fn encode_dataset<'a>(
    encoder: &Encoder,
    folder: &Path,
    jobs: Vec<DatasetJob<'a>>,
    options: &DatasetOptions<'a>,
    on_shard: &mut dyn FnMut(&Shard, ShardInputs) -> Result<()>,
    progress: &dyn Progress,
) -> Result<DatasetSummary> {
    encode_shards(
        encoder,
        folder,
        jobs,
        options,
        on_shard,
        progress,
        OPEN_WAITING,
    )
}

/// [`encode_dataset`], with at most `open_limit` closed shards of whole inputs waiting with their files
/// open.
fn encode_shards<'a>(
    encoder: &Encoder,
    folder: &Path,
    jobs: Vec<DatasetJob<'a>>,
    options: &DatasetOptions<'a>,
    on_shard: &mut dyn FnMut(&Shard, ShardInputs) -> Result<()>,
    progress: &dyn Progress,
    open_limit: usize,
) -> Result<DatasetSummary> {
    let (specials, _) = encoder.specials();
    let separator = options
        .separator
        .and_then(|s| specials.tokens().iter().position(|t| t == s));
    let eot_bytes = match options.eot {
        Some(eot) => {
            let mut bytes = Vec::new();
            push_le_bytes(&[eot], options.dtype, &mut bytes)?;
            Some(bytes)
        }
        None => None,
    };
    let threads = thread_count(options.num_threads);
    let table = encoder
        .table_for_workers(options.chunk_size, options.total_bytes, threads)
        .map_err(|e| e.named("the encoder's caches"))?;
    let shards: Vec<String> = jobs.iter().map(|j| j.shard.clone()).collect();
    let paths = jobs
        .iter()
        .map(|j| match &j.input {
            DatasetInput::File(path, _) => Some(path.clone()),
            DatasetInput::Reader(_) => None,
        })
        .collect();
    let work = DatasetWork {
        encoder,
        options,
        documents: DocumentOptions {
            specials,
            text_field: options.text_field,
            errors: options.errors,
            chunk_size: piece_size(options.chunk_size, threads),
        },
        progress,
        paths,
        separator,
        table,
    };
    let inputs: Vec<_> = jobs.into_iter().map(|j| Some(j.input)).collect();
    if whole_inputs(&inputs, &shards, threads) {
        let (stop, open_waiting) = (StopFrom::new(), AtomicUsize::new(0));
        let work = WholeInputs {
            pieces: work,
            folder,
            shards: &shards,
            eot: eot_bytes.as_deref(),
            stop: &stop,
            open_waiting: &open_waiting,
            open_limit,
        };
        let mut committer = Committer {
            options,
            stop: &stop,
            open_waiting: &open_waiting,
            progress,
            on_shard,
            committed: 0,
            summary: DatasetSummary::default(),
        };
        let inputs = WholeReading {
            inputs,
            next_job: 0,
        };
        run_ordered(&work, inputs, threads, 2 * threads, &mut committer)?;
        debug_assert_eq!(
            open_waiting.load(Ordering::Relaxed),
            0,
            "every shard kept open was committed"
        );
        return Ok(committer.summary);
    }
    let mut writer = Writer {
        options,
        progress,
        folder,
        shards: &shards,
        eot: eot_bytes.as_deref(),
        on_shard,
        current: None,
        summary: DatasetSummary::default(),
    };
    let reading = Reading {
        inputs,
        next_job: 0,
        current: None,
    };
    run_ordered(&work, reading, threads, 2 * threads, &mut writer)?;
    Ok(writer.summary)
}

/// Whether each worker should encode whole inputs, each into its own shard ([`WholeInputs`]), rather
/// than all workers the pieces of one input after another: when every input is a file with a shard
/// of its own, and none is larger than an eighth of a worker's share of all (so there are at least
/// eight inputs a worker). A worker then reads, encodes and writes its shard without waiting for the
/// others: no reader to take turns with, no writer thread to hand the ids to and compete with for
/// the cores. The workers still encoding the last inputs keep the others waiting for at most an
/// eighth of the run; with fewer or more uneven inputs, pieces are shared instead.
fn whole_inputs(inputs: &[Option<DatasetInput<'_>>], shards: &[String], threads: usize) -> bool {
    if threads < 2 {
        return false;
    }
    let mut sizes = Vec::with_capacity(inputs.len());
    for input in inputs {
        match input {
            Some(DatasetInput::File(path, _)) => match std::fs::metadata(path) {
                Ok(meta) => sizes.push(meta.len()),
                // Opening it will fail, in order, with the error the user should see.
                Err(_) => sizes.push(0),
            },
            _ => return false,
        }
    }
    let distinct = shards.windows(2).all(|w| w[0] != w[1]);
    let total: u64 = sizes.iter().sum();
    let largest = sizes.iter().copied().max().unwrap_or(0);
    distinct && total > 0 && largest.saturating_mul(8 * threads as u64) <= total
}

/// The calling thread's side: writes the pieces in sequence into their shards.
struct Writer<'o, 'a, 'f> {
    options: &'o DatasetOptions<'a>,
    progress: &'o dyn Progress,
    folder: &'f Path,
    shards: &'f [String],
    eot: Option<&'f [u8]>,
    on_shard: &'f mut dyn FnMut(&Shard, ShardInputs) -> Result<()>,
    /// The shard being written, and what its inputs held so far; dropped unfinished on an error,
    /// which removes its files.
    current: Option<(ShardWriter, ShardInputs)>,
    summary: DatasetSummary,
}

impl OrderedSink<Encoded> for Writer<'_, '_, '_> {
    fn write(&mut self, piece: Encoded) -> Result<Vec<u8>> {
        let options = self.options;
        let name = &self.shards[piece.job];
        let (shard, inputs) = match &mut self.current {
            Some(current) => current,
            None => self.current.insert((
                ShardWriter::create(self.folder, name, options.format, options.dtype)?,
                ShardInputs::default(),
            )),
        };
        shard.write(&piece.bytes, &piece.ends)?;
        inputs.skipped += piece.skipped;
        inputs.text_bytes += piece.text_bytes;
        let summary = &mut self.summary;
        summary.documents += piece.ends.len() as u64;
        summary.add_input(piece.input_bytes, piece.skipped, piece.skip_messages);
        if piece.ended {
            let before = shard.documents();
            shard.end_open_document(self.eot)?;
            summary.documents += shard.documents() - before;
            if self.shards.get(piece.job + 1) != Some(name) {
                let (shard, inputs) = self.current.take().expect("written above");
                let shard = shard.finish()?;
                self.summary.tokens += shard.tokens;
                (self.on_shard)(&shard, inputs)?;
            }
        }
        Ok(piece.bytes)
    }

    fn written(&mut self) -> Result<()> {
        let tokens = self.summary.tokens + self.current.as_ref().map_or(0, |c| c.0.tokens());
        self.progress.encoded(
            self.summary.input_bytes,
            self.options.total_bytes,
            self.summary.documents,
            tokens,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;
    use crate::sources::Format;
    use crate::Compression;
    use std::sync::atomic::{AtomicU64, Ordering};

    const EOT: &str = "<|endoftext|>";

    fn encoder() -> Encoder {
        let mut vocab: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        vocab.push((256, b"th".to_vec()));
        vocab.push((257, b"the".to_vec()));
        vocab.push((258, EOT.as_bytes().to_vec()));
        let merges = [
            (b"t".to_vec(), b"h".to_vec()),
            (b"th".to_vec(), b"e".to_vec()),
        ];
        Encoder::new(&vocab, &merges, &[EOT.to_string()]).unwrap()
    }

    fn ids(e: &Encoder, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        e.encode(text, &mut out).unwrap();
        out
    }

    /// The documents of the shard `name`, from its npy files.
    fn documents(folder: &Path, name: &str) -> Vec<Vec<u32>> {
        let data = std::fs::read(folder.join(format!("{name}.npy"))).unwrap();
        let index = std::fs::read(folder.join(format!("{name}.offsets.npy"))).unwrap();
        let ids: Vec<u32> = data[128..]
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as u32)
            .collect();
        let offsets: Vec<usize> = index[128..]
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as usize)
            .collect();
        offsets
            .windows(2)
            .map(|w| ids[w[0]..w[1]].to_vec())
            .collect()
    }

    /// A document a piece, 300 of them, as fast as they are asked for; counts the pieces read.
    struct Fast<'a>(&'a AtomicU64);

    impl DocumentReader for Fast<'_> {
        fn read(&mut self, piece: &mut Piece) -> Result<bool> {
            piece.clear();
            piece.push_document("the other one")?;
            Ok(self.0.fetch_add(1, Ordering::SeqCst) + 1 == 300)
        }
    }

    /// Slow to report each piece written, so that the readers could run far ahead; records how far
    /// they did.
    struct SlowProgress<'a> {
        read: &'a AtomicU64,
        written: AtomicU64,
        most_ahead: AtomicU64,
    }

    impl Progress for SlowProgress<'_> {
        fn report(&self, _: crate::Phase, _: u64, _: u64) -> Result<()> {
            Ok(())
        }

        fn encoded(&self, _: u64, _: u64, _: u64, _: u64) -> Result<()> {
            std::thread::sleep(std::time::Duration::from_millis(1));
            let written = self.written.fetch_add(1, Ordering::SeqCst) + 1;
            let ahead = self.read.load(Ordering::SeqCst) - written;
            self.most_ahead.fetch_max(ahead, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn a_worker_reads_smaller_pieces_only_when_the_workers_are_many() {
        let chunk = crate::DEFAULT_CHUNK_SIZE;
        // Up to four workers read the chunk size asked for.
        for threads in [1, 2, 4] {
            assert_eq!(piece_size(chunk, threads), chunk);
        }
        // More share PIECES_TEXT, down to MIN_PIECE.
        assert_eq!(piece_size(chunk, 8), PIECES_TEXT / 8);
        assert_eq!(piece_size(chunk, 16), MIN_PIECE);
        assert_eq!(piece_size(chunk, 256), MIN_PIECE);
        // A smaller chunk asked for (the tests' pieces of a few bytes) is kept.
        assert_eq!(piece_size(7, 256), 7);
        assert_eq!(piece_size(chunk, 0), chunk);
    }

    #[test]
    fn pieces_in_flight_stay_within_twice_the_threads_however_slow_the_writing() {
        let dir = std::env::temp_dir().join(format!("bytepair-window-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let e = encoder();
        let read = AtomicU64::new(0);
        let progress = SlowProgress {
            read: &read,
            written: AtomicU64::new(0),
            most_ahead: AtomicU64::new(0),
        };
        let jobs = vec![DatasetJob {
            input: DatasetInput::Reader(Box::new(Fast(&read))),
            shard: "s".to_string(),
        }];
        let options = DatasetOptions {
            format: ShardFormat::Bin,
            dtype: Dtype::U16,
            eot: None,
            separator: None,
            text_field: "text",
            errors: Errors::Strict,
            num_threads: Some(3),
            chunk_size: 1 << 10,
            total_bytes: 0,
        };
        let summary =
            encode_dataset(&e, &dir, jobs, &options, &mut |_, _| Ok(()), &progress).unwrap();
        assert_eq!(summary.documents, 300);
        let ahead = progress.most_ahead.load(Ordering::SeqCst);
        // At most the window, 2 * 3 pieces, are read and not yet written.
        assert!(ahead <= 6, "{ahead} pieces read ahead of the writer");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn documents_come_out_whole_and_the_same_whatever_the_threads_and_pieces() {
        let dir = std::env::temp_dir().join(format!("bytepair-dataset-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let stories: Vec<String> = (0..40)
            .map(|i| "the other one thought ".repeat(i % 7) + "then")
            .collect();
        std::fs::write(dir.join("a.txt"), stories.join(EOT)).unwrap();
        let records: String = stories
            .iter()
            .map(|s| format!("{{\"text\": \"{s}\"}}\n"))
            .collect();
        std::fs::write(dir.join("b.jsonl"), records).unwrap();
        let e = encoder();
        let mut outputs = Vec::new();
        for (threads, chunk_size) in [(1, 1 << 20), (3, 50), (4, 7)] {
            let out = dir.join(format!("out-{threads}"));
            std::fs::create_dir_all(&out).unwrap();
            let file = |name: &str, format| {
                let kind = SourceKind {
                    format,
                    compression: Compression::None,
                };
                DatasetInput::File(dir.join(name), kind)
            };
            let jobs = vec![
                DatasetJob {
                    input: file("a.txt", Format::Txt),
                    shard: "a".to_string(),
                },
                DatasetJob {
                    input: file("b.jsonl", Format::JsonLines),
                    shard: "b".to_string(),
                },
            ];
            let options = options(ShardFormat::Npy, threads, chunk_size);
            let mut done = Vec::new();
            let mut on_shard = |shard: &Shard, _: ShardInputs| {
                done.push(shard.name.clone());
                Ok(())
            };
            let summary = encode_dataset(&e, &out, jobs, &options, &mut on_shard, &Silent).unwrap();
            assert_eq!(done, ["a", "b"]);
            assert_eq!(summary.documents, 80);
            let want: Vec<Vec<u32>> = stories
                .iter()
                .map(|s| [ids(&e, s), vec![258]].concat())
                .collect();
            assert_eq!(documents(&out, "a"), want);
            assert_eq!(documents(&out, "b"), want);
            outputs.push(
                ["a.npy", "a.offsets.npy", "b.npy", "b.offsets.npy"]
                    .map(|f| std::fs::read(out.join(f)).unwrap()),
            );
        }
        assert!(outputs.windows(2).all(|w| w[0] == w[1]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `n` inputs in `dir`, alternately a text file of documents separated by the end-of-text token
    /// and JSON lines, each of 30 documents and its own shard; the one at `missing` is not written.
    fn many_inputs(dir: &Path, n: usize, missing: Option<usize>) -> Vec<DatasetJob<'static>> {
        inputs_of(dir, n, 30, missing)
    }

    /// 20 inputs as [`many_inputs`] makes them, of 300 documents each: a worker reading one (300
    /// pieces or more of 7 bytes) would run on for long after a failure if nothing stopped it.
    fn long_inputs(dir: &Path, missing: Option<usize>) -> Vec<DatasetJob<'static>> {
        inputs_of(dir, 20, 300, missing)
    }

    /// `n` inputs of `docs` documents each, as [`many_inputs`] describes.
    fn inputs_of(
        dir: &Path,
        n: usize,
        docs: usize,
        missing: Option<usize>,
    ) -> Vec<DatasetJob<'static>> {
        let docs = |i: usize| -> Vec<String> {
            (0..docs)
                .map(|d| "the other ".repeat((i + d) % 5) + &format!("one {i} {d}"))
                .collect()
        };
        jobs_of(dir, n, docs, missing)
    }

    /// `n` inputs, the documents of input `i` given by `docs(i)`: `in{i}.txt` (documents separated
    /// by the end-of-text token) for even `i`, `in{i}.jsonl` for odd; shard `s{i:02}` each. The input
    /// `missing` is not written.
    fn jobs_of(
        dir: &Path,
        n: usize,
        docs: impl Fn(usize) -> Vec<String>,
        missing: Option<usize>,
    ) -> Vec<DatasetJob<'static>> {
        (0..n)
            .map(|i| {
                let docs = docs(i);
                let (name, format, text) = match i % 2 {
                    0 => (format!("in{i}.txt"), Format::Txt, docs.join(EOT)),
                    _ => (
                        format!("in{i}.jsonl"),
                        Format::JsonLines,
                        docs.iter()
                            .map(|d| format!("{{\"text\": \"{d}\"}}\n"))
                            .collect(),
                    ),
                };
                if missing != Some(i) {
                    std::fs::write(dir.join(&name), text).unwrap();
                }
                let kind = SourceKind {
                    format,
                    compression: Compression::None,
                };
                DatasetJob {
                    input: DatasetInput::File(dir.join(name), kind),
                    shard: format!("s{i:02}"),
                }
            })
            .collect()
    }

    /// Options for documents of text files separated by the end-of-text token, which also ends each.
    fn options(format: ShardFormat, threads: usize, chunk_size: usize) -> DatasetOptions<'static> {
        DatasetOptions {
            format,
            dtype: Dtype::U16,
            eot: Some(258),
            separator: Some(EOT),
            text_field: "text",
            errors: Errors::Strict,
            num_threads: Some(threads),
            chunk_size,
            total_bytes: 0,
        }
    }

    /// Encodes `jobs` into `out` on 2 threads in pieces of 7 bytes, expecting an error: the error, and
    /// the shards put in place before it, in order.
    fn fails(
        jobs: Vec<DatasetJob<'static>>,
        out: &Path,
        progress: &dyn Progress,
    ) -> (Error, Vec<String>) {
        let mut done = Vec::new();
        let mut on_shard = |shard: &Shard, _: ShardInputs| {
            done.push(shard.name.clone());
            Ok(())
        };
        let options = options(ShardFormat::Megatron, 2, 7);
        let err = encode_dataset(&encoder(), out, jobs, &options, &mut on_shard, progress);
        (err.unwrap_err(), done)
    }

    /// The names of the files in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn fresh(dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
    }

    #[test]
    fn whole_inputs_only_for_many_files_of_even_size_each_with_its_own_shard() {
        let dir = std::env::temp_dir().join(format!("bytepair-whole-{}", std::process::id()));
        fresh(&dir);
        let inputs =
            |jobs: Vec<DatasetJob<'static>>| -> (Vec<Option<DatasetInput<'static>>>, Vec<String>) {
                let shards = jobs.iter().map(|j| j.shard.clone()).collect();
                (jobs.into_iter().map(|j| Some(j.input)).collect(), shards)
            };
        let (files, shards) = inputs(many_inputs(&dir, 20, None));
        assert!(whole_inputs(&files, &shards, 2));
        // Fewer than eight inputs a thread (of about the same size), or one thread.
        assert!(!whole_inputs(&files, &shards, 3));
        assert!(!whole_inputs(&files, &shards, 1));
        // Inputs that share a shard.
        let mut shared = shards.clone();
        shared[1] = shared[0].clone();
        assert!(!whole_inputs(&files, &shared, 2));
        // One input larger than an eighth of a worker's share.
        std::fs::write(dir.join("in3.jsonl"), "{\"text\": \"x\"}\n".repeat(2000)).unwrap();
        assert!(!whole_inputs(&files, &shards, 2));
        // An input read elsewhere (a Python iterable).
        let (files, shards) = inputs(many_inputs(&dir, 20, None));
        let read = AtomicU64::new(0);
        let mut with_reader: Vec<Option<DatasetInput<'_>>> = files;
        with_reader[0] = Some(DatasetInput::Reader(Box::new(Fast(&read))));
        assert!(!whole_inputs(&with_reader, &shards, 2));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn shards_of_whole_inputs_are_those_of_pieces_shared_by_the_workers() {
        let dir = std::env::temp_dir().join(format!("bytepair-wholeeq-{}", std::process::id()));
        fresh(&dir);
        let e = encoder();
        let mut outputs = Vec::new();
        // 20 inputs: whole on 2 threads, pieces on 1 and on 3; pieces of 7 bytes and of a megabyte.
        for (threads, chunk_size, whole) in [
            (1, 7, false),
            (2, 7, true),
            (2, 1 << 20, true),
            (3, 7, false),
        ] {
            let jobs = many_inputs(&dir, 20, None);
            let shards: Vec<String> = jobs.iter().map(|j| j.shard.clone()).collect();
            let files: Vec<Option<DatasetInput<'_>>> = many_inputs(&dir, 20, None)
                .into_iter()
                .map(|j| Some(j.input))
                .collect();
            assert_eq!(whole_inputs(&files, &shards, threads), whole);
            let out = dir.join(format!("out-{threads}-{chunk_size}"));
            fresh(&out);
            let mut done = Vec::new();
            let mut on_shard = |shard: &Shard, inputs: ShardInputs| {
                done.push((shard.name.clone(), shard.documents, inputs.text_bytes));
                Ok(())
            };
            let options = options(ShardFormat::Megatron, threads, chunk_size);
            let summary = encode_dataset(&e, &out, jobs, &options, &mut on_shard, &Silent).unwrap();
            assert_eq!(summary.documents, 20 * 30);
            assert_eq!(done.iter().map(|d| d.0.clone()).collect::<Vec<_>>(), shards);
            assert!(done.iter().all(|d| d.1 == 30 && d.2 > 0));
            let files: Vec<Vec<u8>> = names(&out)
                .iter()
                .map(|f| std::fs::read(out.join(f)).unwrap())
                .collect();
            assert_eq!(names(&out).len(), 40);
            outputs.push((names(&out), files, summary, done));
        }
        assert!(outputs.windows(2).all(|w| w[0] == w[1]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_worker_writes_its_shard_through_and_the_shard_is_the_same_as_written_whole() {
        let dir = std::env::temp_dir().join(format!("bytepair-through-{}", std::process::id()));
        fresh(&dir);
        let e = encoder();
        // 20 inputs (enough for whole inputs on 2 threads) of about 500 KB: short documents around
        // one whose ids span more than two writes through, the long one at either end of the input.
        let docs = |i: usize| -> Vec<String> {
            let long = "the other ".repeat(50_000 + 100 * i);
            let short = (0..40).map(|d| "the ".repeat(d % 7) + &format!("one {i} {d}"));
            match i % 2 {
                0 => short.chain([long]).collect(),
                _ => [long].into_iter().chain(short).collect(),
            }
        };
        let make_jobs = || jobs_of(&dir, 20, docs, None);
        for format in [ShardFormat::Npy, ShardFormat::Megatron, ShardFormat::Bin] {
            let mut outputs = Vec::new();
            // Whole inputs on 2 threads, written through by the workers; pieces of 64 KB on 1 thread,
            // each written whole by the calling thread.
            for (threads, chunk_size) in [(2, crate::DEFAULT_CHUNK_SIZE), (1, 64 << 10)] {
                let jobs = make_jobs();
                let files: Vec<Option<DatasetInput<'_>>> =
                    make_jobs().into_iter().map(|j| Some(j.input)).collect();
                let shards: Vec<String> = jobs.iter().map(|j| j.shard.clone()).collect();
                assert_eq!(whole_inputs(&files, &shards, threads), threads == 2);
                let out = dir.join(format!("out-{format:?}-{threads}"));
                fresh(&out);
                let options = options(format, threads, chunk_size);
                let summary =
                    encode_dataset(&e, &out, jobs, &options, &mut |_, _| Ok(()), &Silent).unwrap();
                assert_eq!(summary.documents, 20 * 41);
                let files: Vec<Vec<u8>> = names(&out)
                    .iter()
                    .map(|f| std::fs::read(out.join(f)).unwrap())
                    .collect();
                outputs.push((names(&out), files, summary.tokens));
                if format == ShardFormat::Npy {
                    for i in 0..20 {
                        let want: Vec<Vec<u32>> = docs(i)
                            .iter()
                            .map(|d| [ids(&e, d), vec![258]].concat())
                            .collect();
                        assert_eq!(documents(&out, &format!("s{i:02}")), want, "input {i}");
                    }
                }
            }
            // A shard's ids (2 bytes each) are more than two writes through.
            assert!(outputs[0].2 * 2 > 20 * 2 * WRITE_THROUGH as u64);
            assert!(outputs[0] == outputs[1], "{format:?}: the shards differ");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn whole_inputs_shards_are_the_same_flushed_by_their_worker_or_by_the_calling_thread() {
        let dir = std::env::temp_dir().join(format!("bytepair-flushes-{}", std::process::id()));
        fresh(&dir);
        let e = encoder();
        let mut outputs = Vec::new();
        // None kept open (every worker flushes its own), one, and all of them (the calling thread
        // flushes every shard).
        for open_limit in [0, 1, usize::MAX] {
            let jobs = many_inputs(&dir, 20, None);
            let out = dir.join(format!("out-{open_limit}"));
            fresh(&out);
            let mut done = Vec::new();
            let mut on_shard = |shard: &Shard, _: ShardInputs| {
                done.push(shard.clone());
                Ok(())
            };
            let options = options(ShardFormat::Megatron, 2, 7);
            let summary =
                encode_shards(&e, &out, jobs, &options, &mut on_shard, &Silent, open_limit)
                    .unwrap();
            assert_eq!(summary.documents, 20 * 30);
            assert_eq!(done.len(), 20);
            let files: Vec<Vec<u8>> = names(&out)
                .iter()
                .map(|f| std::fs::read(out.join(f)).unwrap())
                .collect();
            assert_eq!(
                names(&out).len(),
                40,
                "no temporary file left: {:?}",
                names(&out)
            );
            outputs.push((names(&out), files, summary, done));
        }
        assert!(outputs.windows(2).all(|w| w[0] == w[1]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_input_among_whole_inputs_fails_in_order_keeping_the_shards_before_it() {
        let dir = std::env::temp_dir().join(format!("bytepair-wholemiss-{}", std::process::id()));
        fresh(&dir);
        let jobs = many_inputs(&dir, 20, Some(5));
        let files: Vec<Option<DatasetInput<'_>>> = many_inputs(&dir, 20, Some(5))
            .into_iter()
            .map(|j| Some(j.input))
            .collect();
        let shards: Vec<String> = jobs.iter().map(|j| j.shard.clone()).collect();
        assert!(whole_inputs(&files, &shards, 2));
        let out = dir.join("out");
        fresh(&out);
        let (err, done) = fails(jobs, &out, &Silent);
        assert!(err.to_string().contains("in5.jsonl"), "{err}");
        assert_eq!(done, ["s00", "s01", "s02", "s03", "s04"]);
        // The shards before it in place, and nothing else: the shards after it, encoded or not, left
        // no file behind.
        let want: Vec<String> = (0..5)
            .flat_map(|i| [format!("s{i:02}.bin"), format!("s{i:02}.idx")])
            .collect();
        assert_eq!(names(&out), want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Asks to stop once `after` pieces were read.
    struct StopAfter {
        after: u64,
        asked: AtomicU64,
    }

    impl Progress for StopAfter {
        fn report(&self, _: crate::Phase, _: u64, _: u64) -> Result<()> {
            Ok(())
        }

        fn cancelled(&self) -> bool {
            self.asked.fetch_add(1, Ordering::SeqCst) >= self.after
        }
    }

    #[test]
    fn a_stop_reaches_the_workers_of_whole_inputs_between_pieces_and_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("bytepair-wholestop-{}", std::process::id()));
        fresh(&dir);
        let jobs = many_inputs(&dir, 20, None);
        let out = dir.join("out");
        fresh(&out);
        let progress = StopAfter {
            after: 20,
            asked: AtomicU64::new(0),
        };
        // Pieces of 7 bytes: hundreds of them an input, so the stop comes within the first inputs.
        let (err, done) = fails(jobs, &out, &progress);
        assert!(matches!(err, Error::Interrupted), "{err}");
        assert!(done.is_empty(), "{done:?}");
        assert!(names(&out).is_empty(), "{:?}", names(&out));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Counts the pieces the workers read (they ask whether to stop before each), slowly.
    struct CountPieces(AtomicU64);

    impl Progress for CountPieces {
        fn report(&self, _: crate::Phase, _: u64, _: u64) -> Result<()> {
            Ok(())
        }

        fn cancelled(&self) -> bool {
            self.count();
            false
        }
    }

    impl CountPieces {
        /// Counts a piece, after a wait; returns how many were counted before.
        fn count(&self) -> u64 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            self.0.fetch_add(1, Ordering::SeqCst)
        }
    }

    #[test]
    fn a_failed_input_stops_the_workers_on_later_inputs_at_their_next_piece() {
        let dir = std::env::temp_dir().join(format!("bytepair-wholefail-{}", std::process::id()));
        fresh(&dir);
        // The first input is missing; the other worker, on the second (300 pieces), stops within a
        // piece or two rather than encode the rest of it for a shard never put in place. (Pieces take
        // 2 ms each: the bound leaves the failing worker 60 ms to be scheduled on a busy machine.)
        let jobs = long_inputs(&dir, Some(0));
        let files: Vec<Option<DatasetInput<'_>>> = long_inputs(&dir, Some(0))
            .into_iter()
            .map(|j| Some(j.input))
            .collect();
        let shards: Vec<String> = jobs.iter().map(|j| j.shard.clone()).collect();
        assert!(
            whole_inputs(&files, &shards, 2),
            "else no worker asks to stop"
        );
        let out = dir.join("out");
        fresh(&out);
        let progress = CountPieces(AtomicU64::new(0));
        let (err, done) = fails(jobs, &out, &progress);
        assert!(err.to_string().contains("in0.txt"), "{err}");
        assert!(done.is_empty());
        let read = progress.0.load(Ordering::SeqCst);
        assert!(read < 30, "{read} pieces read after the first input failed");
        assert!(names(&out).is_empty(), "{:?}", names(&out));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Counts the pieces the workers read, slowly ([`CountPieces`]); at the first report of a shard
    /// put in place, notes how many pieces were read by then, and fails it (as Ctrl-C does) or, when
    /// `panics`, panics on the calling thread.
    struct AtFirstShard {
        pieces: CountPieces,
        at_report: AtomicU64,
        panics: bool,
    }

    impl AtFirstShard {
        fn new(panics: bool) -> AtFirstShard {
            AtFirstShard {
                pieces: CountPieces(AtomicU64::new(0)),
                at_report: AtomicU64::new(0),
                panics,
            }
        }

        /// Pieces read since the first report.
        fn read_after(&self) -> u64 {
            self.pieces.0.load(Ordering::SeqCst) - self.at_report.load(Ordering::SeqCst)
        }
    }

    impl Progress for AtFirstShard {
        fn report(&self, _: crate::Phase, _: u64, _: u64) -> Result<()> {
            self.at_report
                .store(self.pieces.0.load(Ordering::SeqCst), Ordering::SeqCst);
            if self.panics {
                // Without the panic hook, as `PanicAt` below.
                std::panic::resume_unwind(Box::new("a report's panic, on purpose"));
            }
            Err(Error::Interrupted)
        }

        fn cancelled(&self) -> bool {
            self.pieces.cancelled()
        }
    }

    #[test]
    fn a_report_that_fails_stops_the_workers_of_whole_inputs_at_their_next_piece() {
        let dir = std::env::temp_dir().join(format!("bytepair-wholereport-{}", std::process::id()));
        fresh(&dir);
        let jobs = long_inputs(&dir, None);
        let out = dir.join("out");
        fresh(&out);
        let progress = AtFirstShard::new(false);
        let (err, done) = fails(jobs, &out, &progress);
        assert!(matches!(err, Error::Interrupted), "{err}");
        assert_eq!(done, ["s00"]);
        assert_eq!(names(&out), ["s00.bin", "s00.idx"]);
        // An input is 300 pieces (JSON lines, a record a piece) or about 1,300 (text, pieces of 7
        // bytes): the workers, both within an input when the report failed, read a piece or two more
        // each, not the rest of their inputs.
        let after = progress.read_after();
        assert!(after < 30, "{after} pieces read after the report failed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_panic_on_the_calling_thread_stops_the_workers_of_whole_inputs_at_their_next_piece() {
        let dir =
            std::env::temp_dir().join(format!("bytepair-wholecallpanic-{}", std::process::id()));
        fresh(&dir);
        let jobs = long_inputs(&dir, None);
        let out = dir.join("out");
        fresh(&out);
        let progress = AtFirstShard::new(true);
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fails(jobs, &out, &progress);
        }));
        let message = panicked.unwrap_err();
        assert_eq!(
            message.downcast_ref::<&str>(),
            Some(&"a report's panic, on purpose")
        );
        // The workers, both within an input (300 pieces or about 1,300) when the first shard's
        // report panicked, read a piece or two more each, not the rest of their inputs.
        let after = progress.read_after();
        assert!(after < 30, "{after} pieces read after the panic");
        // The first shard is in place (the report comes after its commit); no temporary file is left.
        assert_eq!(names(&out), ["s00.bin", "s00.idx"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Counts the pieces the workers read, slowly ([`CountPieces`]), and panics on the `at`-th
    /// (counted from 0).
    struct PanicAt {
        pieces: CountPieces,
        at: u64,
    }

    impl Progress for PanicAt {
        fn report(&self, _: crate::Phase, _: u64, _: u64) -> Result<()> {
            Ok(())
        }

        fn cancelled(&self) -> bool {
            if self.pieces.count() == self.at {
                // A panic that skips the panic hook, which would first print a backtrace (with
                // RUST_BACKTRACE set, symbolizing it took longer than the other worker's next 40
                // pieces) before the unwinding that stops the others.
                std::panic::resume_unwind(Box::new("a worker's panic, on purpose"));
            }
            false
        }
    }

    #[test]
    fn a_worker_that_panics_on_a_whole_input_stops_the_others_at_their_next_piece() {
        let dir = std::env::temp_dir().join(format!("bytepair-wholepanic-{}", std::process::id()));
        fresh(&dir);
        let jobs = long_inputs(&dir, None);
        let out = dir.join("out");
        fresh(&out);
        let progress = PanicAt {
            pieces: CountPieces(AtomicU64::new(0)),
            at: 5,
        };
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            fails(jobs, &out, &progress);
        }));
        let message = panicked.unwrap_err();
        assert_eq!(
            message.downcast_ref::<&str>(),
            Some(&"a worker's panic, on purpose")
        );
        // The other worker, within its input (300 pieces or about 1,300), read a piece or two more,
        // not the rest of its input, whether its input came before or after.
        let after = progress.pieces.0.load(Ordering::SeqCst) - (progress.at + 1);
        assert!(after < 30, "{after} pieces read after the panic");
        assert!(names(&out).is_empty(), "{:?}", names(&out));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
