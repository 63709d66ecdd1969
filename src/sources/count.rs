//! Counting the pre-tokens of sources into [`CorpusCounts`]: files ([`count_sources`]) and texts
//! already in memory ([`count_texts`]), on all cores.
//!
//! The threads share out the files. An uncompressed `.txt` file is read in chunks that any thread
//! takes, as [`crate::count_files`] does, and a Parquet file in row groups, so one large file keeps
//! every thread busy. A compressed file or a JSON lines file is decompressed and parsed by the one
//! thread that takes it, which is what lets decompression run on all cores at once: a corpus ships as
//! many shards.
//!
//! Results do not depend on the number of threads or on the order of the files, and neither does the
//! error returned: in strict mode, an error stops only the work on files after it (and what follows it
//! in its own file), so the files before it run to their end, and the first error in source order is
//! the one returned. Errors with no place in the sources (out of memory, Ctrl-C) stop everything.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::decompress::{self, Probe};
use super::jsonl::{JsonLines, Record};
use super::kind::{Format, SourceKind};
use super::parquet::ParquetText;
use crate::chunks::{Chunk, ChunkReader};
use crate::error::{try_reserve, AllocError, Error, RecordAt, Result};
use crate::input::open_input;
use crate::progress::{Phase, Progress};
use crate::special::SpecialTokens;
use crate::threads::run_on_threads;
use crate::train::{count_record, count_text, PreTokenCounts};

/// What to do with a bad record (bad JSON, no text field, a text that is not a string or not UTF-8)
/// or a corrupt compressed stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errors {
    /// Fail, with the error of the first bad record in source order.
    Strict,
    /// Skip the record and count it ([`CorpusCounts::skipped`]); a corrupt or truncated compressed
    /// stream skips the rest of its file and counts once. Invalid UTF-8 in a `.txt` file is an error
    /// all the same: a text file has no records, and any part of it cut out around the bad bytes would
    /// join the text on either side into pre-tokens that are not in the file.
    Skip,
}

/// How many messages of skipped records a count keeps ([`CorpusCounts::skipped_errors`]).
pub const MAX_KEPT_ERRORS: usize = 10;

/// The pre-token counts of a corpus, with what was counted: documents, records skipped, and the
/// special tokens the text was split at, which must be the same for counts to be merged or trained on.
#[derive(Clone, Debug)]
pub struct CorpusCounts {
    pretokens: PreTokenCounts,
    documents: u64,
    skipped: u64,
    skipped_errors: Vec<String>,
    /// None for counts that counted nothing yet, which merge with any.
    special_tokens: Option<Vec<String>>,
}

impl PartialEq for CorpusCounts {
    /// The same pre-tokens, totals and special tokens (in any order); the messages of skipped records
    /// are not compared.
    fn eq(&self, other: &Self) -> bool {
        self.pretokens == other.pretokens
            && (self.documents, self.skipped) == (other.documents, other.skipped)
            && same_tokens(self.special_tokens(), other.special_tokens())
    }
}

/// Whether two sets of special tokens are the same, whatever their order.
fn same_tokens(a: Option<&[String]>, b: Option<&[String]>) -> bool {
    fn sorted(t: Option<&[String]>) -> Vec<&String> {
        let mut t: Vec<&String> = t.unwrap_or_default().iter().collect();
        t.sort();
        t
    }
    a.is_some() == b.is_some() && sorted(a) == sorted(b)
}

/// The special tokens as a message shows them.
fn show(tokens: Option<&[String]>) -> String {
    format!("{:?}", tokens.unwrap_or_default())
}

impl CorpusCounts {
    /// Empty counts, of no special tokens yet: they take those of the first counts merged in.
    pub fn new() -> Result<CorpusCounts> {
        Ok(CorpusCounts {
            pretokens: PreTokenCounts::new()?,
            documents: 0,
            skipped: 0,
            skipped_errors: Vec::new(),
            special_tokens: None,
        })
    }

    /// Counts made of their parts (the counts file).
    pub(crate) fn from_parts(
        pretokens: PreTokenCounts,
        documents: u64,
        skipped: u64,
        special_tokens: Vec<String>,
    ) -> CorpusCounts {
        CorpusCounts {
            pretokens,
            documents,
            skipped,
            skipped_errors: Vec::new(),
            special_tokens: Some(special_tokens),
        }
    }

    /// The count of each distinct pre-token, with the bytes of text and the special-token occurrences.
    pub fn pretokens(&self) -> &PreTokenCounts {
        &self.pretokens
    }

    /// The counts of the pre-tokens, to add to in place (the totals are added apart, as
    /// [`Self::update`] adds them).
    pub(crate) fn pretokens_mut(&mut self) -> &mut PreTokenCounts {
        &mut self.pretokens
    }

    /// The counts of the pre-tokens, taken: for training that frees them as it goes.
    pub fn into_pretokens(self) -> PreTokenCounts {
        self.pretokens
    }

    /// Drops the pre-tokens counted fewer than `min_count` times ([`PreTokenCounts::retain_at_least`]).
    pub fn retain_at_least(&mut self, min_count: u64) -> Result<()> {
        self.pretokens.retain_at_least(min_count)
    }

    /// The documents counted: the records of JSON lines and Parquet files and of texts counted
    /// together ([`count_texts`]), and one for each `.txt` file (its special tokens split it further).
    pub fn documents(&self) -> u64 {
        self.documents
    }

    /// The bad records skipped ([`Errors::Skip`]); a corrupt compressed stream, whose file's rest was
    /// skipped, counts once.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The messages of the first [`MAX_KEPT_ERRORS`] records skipped, in source order (then in the order
    /// counts were merged). Not saved in a counts file.
    pub fn skipped_errors(&self) -> &[String] {
        &self.skipped_errors
    }

    /// The special tokens the text was split at, in the order given; None when nothing was counted.
    pub fn special_tokens(&self) -> Option<&[String]> {
        self.special_tokens.as_deref()
    }

    /// The pre-tokens counted (the sum of the counts); special tokens are not pre-tokens.
    pub fn total(&self) -> u64 {
        let mut total = 0u64;
        self.pretokens
            .for_each(|_, n| total = total.saturating_add(n));
        total
    }

    /// Checks that counts split at `tokens` can be merged into these.
    fn check_tokens(&self, tokens: Option<&[String]>) -> Result<()> {
        match (self.special_tokens(), tokens) {
            (Some(mine), Some(theirs)) if !same_tokens(Some(mine), Some(theirs)) => {
                Err(Error::InvalidCounts(format!(
                    "cannot merge counts made with different special tokens: {} and {}",
                    show(Some(mine)),
                    show(Some(theirs))
                )))
            }
            _ => Ok(()),
        }
    }

    /// Adds `other` to these counts; fails, changing nothing, when their special tokens differ or a
    /// total would pass 2^64 - 1, and when memory runs out (with part of `other` added).
    pub fn update(&mut self, other: &CorpusCounts) -> Result<()> {
        self.check_tokens(other.special_tokens())?;
        let documents = self
            .documents
            .checked_add(other.documents)
            .ok_or_else(overflow)?;
        let skipped = self
            .skipped
            .checked_add(other.skipped)
            .ok_or_else(overflow)?;
        self.add_pretokens(&other.pretokens)?;
        self.documents = documents;
        self.skipped = skipped;
        let room = MAX_KEPT_ERRORS.saturating_sub(self.skipped_errors.len());
        self.skipped_errors
            .extend(other.skipped_errors.iter().take(room).cloned());
        if self.special_tokens.is_none() {
            self.special_tokens = other.special_tokens.clone();
        }
        Ok(())
    }

    /// Adds the pre-token counts `theirs`, with their bytes and special-token occurrences, to these
    /// counts' own; fails, changing nothing, when a total would pass 2^64 - 1, and when memory runs
    /// out (with part of `theirs` added).
    fn add_pretokens(&mut self, theirs: &PreTokenCounts) -> Result<()> {
        // Every occurrence of a pre-token is at least a byte of text, so no count is more than the
        // bytes, and no sum of counts can overflow when the sum of the bytes does not (a counts file
        // is checked for this when read).
        let mine = &self.pretokens;
        mine.bytes()
            .checked_add(theirs.bytes())
            .ok_or_else(overflow)?;
        mine.special_occurrences()
            .checked_add(theirs.special_occurrences())
            .ok_or_else(overflow)?;
        self.pretokens
            .add_counts(theirs)
            .map_err(|e| e.named("the counts of pre-tokens"))?;
        self.pretokens
            .add_totals(theirs.bytes(), theirs.special_occurrences());
        Ok(())
    }

    /// Whether these counts hold no pre-token, byte of text or special-token occurrence yet.
    fn no_pretokens(&self) -> bool {
        self.pretokens.is_empty()
            && self.pretokens.bytes() == 0
            && self.pretokens.special_occurrences() == 0
    }

    /// Adds `other` to these counts as [`Self::update`] does, but takes its tables when these counts
    /// hold nothing yet, rather than copying them: a count of files made anew, then added to the
    /// counts of a call, would otherwise be held twice at the end of counting.
    pub fn update_owned(&mut self, other: CorpusCounts) -> Result<()> {
        if !(self.no_pretokens() && (self.documents, self.skipped) == (0, 0)) {
            return self.update(&other);
        }
        self.check_tokens(other.special_tokens())?;
        // The special tokens as first given, when they were.
        let special_tokens = self.special_tokens.take().or(other.special_tokens);
        *self = CorpusCounts {
            special_tokens,
            ..other
        };
        Ok(())
    }

    /// Counts one more record skipped, whose error is `message` (the messages of a transfer form).
    pub fn add_skipped(&mut self, message: String) {
        self.skipped = self.skipped.saturating_add(1);
        if self.skipped_errors.len() < MAX_KEPT_ERRORS {
            self.skipped_errors.push(message);
        }
    }

    /// Adds the pre-tokens that [`count_texts`] counted into `kept` to these counts, which must
    /// have been made with the same special tokens (they are those the counts `count_texts` returned
    /// were made with, and these counts were added to).
    /// The first set is taken whole when these counts hold no pre-token yet (as they do after
    /// `count_texts`, which counts none into the counts it returns), rather than copied.
    pub fn add_kept(&mut self, kept: Vec<PreTokenCounts>) -> Result<()> {
        for pretokens in kept {
            if self.no_pretokens() {
                self.pretokens = pretokens;
            } else {
                self.add_pretokens(&pretokens)?;
            }
        }
        Ok(())
    }

    /// The `n` most frequent pre-tokens with their counts, most frequent first, ties in byte order.
    pub fn most_common(&self, n: usize) -> Result<Vec<(Vec<u8>, u64)>> {
        let oom = |e: AllocError| e.named("the most common pre-tokens");
        let n = n.min(self.pretokens.len());
        let mut failed = Ok(());
        // The best `n` so far, the worst of them on top: a lower count, or a greater byte string.
        let mut best: BinaryHeap<(Reverse<u64>, Vec<u8>)> = BinaryHeap::new();
        best.try_reserve(n)
            .map_err(|_| oom(AllocError::of::<(u64, Vec<u8>)>(n)))?;
        self.pretokens.for_each(|piece, count| {
            if n == 0 || failed.is_err() {
                return;
            }
            if best.len() == n {
                let Some((Reverse(worst), worst_piece)) = best.peek() else {
                    return;
                };
                if (count, Reverse(piece)) <= (*worst, Reverse(worst_piece.as_slice())) {
                    return;
                }
                best.pop();
            }
            let mut owned = Vec::new();
            failed = try_reserve(&mut owned, piece.len());
            if failed.is_err() {
                return;
            }
            owned.extend_from_slice(piece);
            best.push((Reverse(count), owned));
        });
        failed.map_err(oom)?;
        let mut best: Vec<(Vec<u8>, u64)> = best
            .into_vec()
            .into_iter()
            .map(|(Reverse(count), piece)| (piece, count))
            .collect();
        best.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(best)
    }

    /// Checks that these counts can be trained on with `specials`: the special tokens they were split
    /// at, in any order (counts that counted nothing take any).
    pub fn check_training_tokens(&self, specials: &SpecialTokens) -> Result<()> {
        match self.special_tokens() {
            Some(mine) if !same_tokens(Some(mine), Some(specials.tokens())) => {
                Err(Error::InvalidCounts(format!(
                    "these counts were made with the special tokens {}, not {}: train with the \
                     special tokens the text was split at",
                    show(Some(mine)),
                    show(Some(specials.tokens()))
                )))
            }
            _ => Ok(()),
        }
    }
}

/// How to count sources.
#[derive(Clone, Copy, Debug)]
pub struct SourceOptions<'a> {
    /// The special tokens that split documents.
    pub specials: &'a SpecialTokens,
    /// The field of JSON lines records that holds the text.
    pub text_field: &'a str,
    /// Whether a bad record fails the count or is skipped.
    pub errors: Errors,
    /// The size of the pieces text files are read in (see [`crate::DEFAULT_CHUNK_SIZE`]).
    pub chunk_size: usize,
    /// How many threads count (see [`crate::thread_count`]).
    pub threads: usize,
}

/// The error of counts whose sum would not fit their 64 bits.
fn overflow() -> Error {
    Error::InvalidCounts("a count would pass 2^64 - 1".to_string())
}

/// A place in the sources: a file (or text) and a line or offset in it. Errors are ordered by it.
type Position = (usize, u64);

/// The place of errors that have none in the sources (out of memory, a stop): they stop everything.
const NOWHERE: Position = (usize::MAX, u64::MAX);

/// The messages of the first [`MAX_KEPT_ERRORS`] records skipped, by position, and how many were.
#[derive(Default)]
struct Skipped {
    count: u64,
    first: Vec<(Position, String)>,
}

/// What stops the work and what is reported: shared by the threads of one count.
struct Outcome {
    errors: Errors,
    /// Work on the sources from this index on stops: the index of the first error's source.
    stop_before: AtomicUsize,
    /// An error with no place in the sources stopped everything.
    stop_all: AtomicBool,
    first_error: Mutex<Option<(Position, Error)>>,
    skipped: Mutex<Skipped>,
}

impl Outcome {
    fn new(errors: Errors) -> Outcome {
        Outcome {
            errors,
            stop_before: AtomicUsize::new(usize::MAX),
            stop_all: AtomicBool::new(false),
            first_error: Mutex::new(None),
            skipped: Mutex::new(Skipped::default()),
        }
    }

    /// Whether work on source `index` goes on.
    fn running(&self, index: usize) -> bool {
        index < self.stop_before.load(Ordering::Relaxed)
    }

    /// Whether work at `at` goes on: a source being read in parts by several threads (a Parquet
    /// file's row groups) stops only after its first error, so that the parts before it, on other
    /// threads, run to their end and find any error that comes first.
    fn goes_on(&self, at: Position) -> bool {
        if self.running(at.0) {
            return true;
        }
        let first = self
            .first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        !self.stop_all.load(Ordering::Relaxed)
            && first.as_ref().is_some_and(|(place, _)| at < *place)
    }

    /// Records the error `e` at `at`, and stops the work on the sources after it.
    fn fail(&self, at: Position, e: Error) {
        if at == NOWHERE {
            self.stop_all.store(true, Ordering::Relaxed);
        }
        let stop = if at == NOWHERE { 0 } else { at.0 };
        self.stop_before.fetch_min(stop, Ordering::Relaxed);
        let mut first = self
            .first_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if first.as_ref().is_none_or(|(place, _)| at < *place) {
            *first = Some((at, e));
        }
    }

    /// A bad record at `at`: skipped and counted, or the error that fails the count.
    fn bad_record(&self, at: Position, e: Error) -> std::result::Result<(), (Position, Error)> {
        if self.errors == Errors::Strict {
            return Err((at, e));
        }
        let mut skipped = self.skipped.lock().unwrap_or_else(PoisonError::into_inner);
        skipped.count += 1;
        let first = &mut skipped.first;
        if first.len() < MAX_KEPT_ERRORS || first.last().is_some_and(|(last, _)| at < *last) {
            let i = first.partition_point(|(place, _)| *place < at);
            first.insert(i, (at, e.to_string()));
            first.truncate(MAX_KEPT_ERRORS);
        }
        Ok(())
    }

    /// The counts of the threads merged, with the skipped records, or the first error.
    fn finish(
        self,
        threads: Vec<Option<Counted>>,
        specials: &SpecialTokens,
        documents: u64,
    ) -> Result<CorpusCounts> {
        let mut merged: Option<Counted> = None;
        for mut counted in threads.into_iter().flatten() {
            // The records' counts are whole once the table in front of the map is emptied.
            if let Err(e) = counted.counts.flush() {
                self.fail(NOWHERE, e);
                continue;
            }
            merged = match merged {
                None => Some(counted),
                Some(a) => match a.counts.merge(counted.counts) {
                    Ok(counts) => Some(Counted {
                        counts,
                        documents: a.documents + counted.documents,
                    }),
                    Err(e) => {
                        self.fail(NOWHERE, e);
                        None
                    }
                },
            };
        }
        if let Some((_, e)) = self
            .first_error
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(e);
        }
        let merged = match merged {
            Some(merged) => merged,
            None => Counted::new()?,
        };
        let skipped = self
            .skipped
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(CorpusCounts {
            pretokens: merged.counts,
            documents: merged.documents + documents,
            skipped: skipped.count,
            skipped_errors: skipped.first.into_iter().map(|(_, m)| m).collect(),
            special_tokens: Some(specials.tokens().to_vec()),
        })
    }
}

/// What one thread counted.
struct Counted {
    counts: PreTokenCounts,
    documents: u64,
}

impl Counted {
    fn new() -> Result<Counted> {
        Ok(Counted {
            counts: PreTokenCounts::new()?,
            documents: 0,
        })
    }
}

/// A thread's counts, made with its first piece of work (512 KB, which may not be there to allocate).
fn counts_of(counted: &mut Option<Counted>) -> Result<&mut Counted> {
    if counted.is_none() {
        *counted = Some(Counted::new()?);
    }
    Ok(counted.as_mut().expect("made above"))
}

/// The work a thread takes: a chunk of an uncompressed text file, a row group of a Parquet file, or a
/// whole file.
enum Work {
    Chunk(usize, Chunk),
    RowGroup(usize, Arc<ParquetText>, usize),
    File(usize),
}

/// The file being read in parts: an uncompressed text file in chunks, or a Parquet file in row groups
/// (the next one, and the end of those to count).
enum Parts<'s> {
    Chunks(ChunkReader<'s, File>),
    RowGroups(Arc<ParquetText>, Range<usize>),
}

/// The file being read in parts, and the index of the next file to take.
struct Queue<'s> {
    current: Option<(usize, Parts<'s>)>,
    next: usize,
}

/// Parquet rows are counted in batches of about this many bytes of text: each thread holds one, and
/// starting a batch costs little against counting it.
const PARQUET_BATCH_BYTES: usize = 4 << 20;

/// Input bytes read between two progress reports of a file read whole.
const REPORT_EVERY: u64 = 1 << 20;

/// One count of files.
struct FileCount<'a, P> {
    files: &'a [(P, SourceKind)],
    options: &'a SourceOptions<'a>,
    progress: &'a dyn Progress,
    outcome: &'a Outcome,
    queue: Mutex<Queue<'a>>,
    /// The row groups counted of each Parquet file (all of them when None).
    row_groups: Option<Range<usize>>,
    /// The bytes of the files, and those read so far (compressed, as they are on disk).
    total: u64,
    done: AtomicU64,
}

impl<P: AsRef<Path> + Sync> FileCount<'_, P> {
    fn path(&self, index: usize) -> &Path {
        self.files[index].0.as_ref()
    }

    /// Counts `bytes` more of input read, and reports it.
    fn advance(&self, bytes: u64) {
        let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
        // A pipe's size is 0 until read: the total grows with what was read.
        if let Err(e) = self
            .progress
            .report(Phase::Count, done, self.total.max(done))
        {
            self.outcome.fail(NOWHERE, e);
        }
    }

    /// The next piece of work, in source order; None when none is left or the work stopped.
    fn next_work(&self) -> Option<Work> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some((index, parts)) = &mut queue.current {
                let index = *index;
                if !self.outcome.running(index) {
                    return None;
                }
                match parts {
                    Parts::Chunks(reader) => match reader.next() {
                        Some(Ok(chunk)) => return Some(Work::Chunk(index, chunk)),
                        Some(Err(e)) => {
                            let e = Error::read(self.path(index), e, self.options.chunk_size);
                            self.outcome.fail((index, u64::MAX), e);
                            return None;
                        }
                        None => queue.current = None,
                    },
                    Parts::RowGroups(text, groups) => match groups.next() {
                        Some(group) => return Some(Work::RowGroup(index, text.clone(), group)),
                        None => queue.current = None,
                    },
                }
                continue;
            }
            let index = queue.next;
            if index >= self.files.len() || !self.outcome.running(index) {
                return None;
            }
            queue.next += 1;
            let kind = self.files[index].1;
            if kind.format == Format::Parquet {
                self.open_parquet(index, &mut queue);
                continue;
            }
            if kind.format != Format::Txt || kind.compression.name().is_some() {
                return Some(Work::File(index));
            }
            match open_input(self.path(index), self.progress) {
                Ok(file) => {
                    let reader =
                        ChunkReader::new(file, self.options.specials, self.options.chunk_size);
                    queue.current = Some((index, Parts::Chunks(reader)));
                }
                Err(e) => self.outcome.fail((index, 0), e),
            }
        }
    }

    /// Opens the Parquet file `index` for its row groups to be taken (those of `self.row_groups`); a
    /// file that is not Parquet is skipped whole in skip mode, counting once.
    fn open_parquet(&self, index: usize, queue: &mut Queue<'_>) {
        let text = match ParquetText::open(self.path(index), self.options.text_field) {
            Ok(text) => text,
            Err(e @ Error::BadParquet { .. }) => {
                let size = std::fs::metadata(self.path(index)).map_or(0, |m| m.len());
                match self.outcome.bad_record((index, 0), e) {
                    Ok(()) => self.advance(size),
                    Err((at, e)) => self.outcome.fail(at, e),
                }
                return;
            }
            Err(e) => return self.outcome.fail((index, 0), e),
        };
        let all = 0..text.row_groups();
        let groups = match &self.row_groups {
            Some(range) => range.start.min(all.end)..range.end.min(all.end),
            None => all,
        };
        queue.current = Some((index, Parts::RowGroups(Arc::new(text), groups)));
    }

    /// Counts row group `group` of the Parquet file `index`.
    fn count_row_group(
        &self,
        index: usize,
        text: &Arc<ParquetText>,
        group: usize,
        counted: &mut Counted,
    ) {
        if let Err((at, e)) = self.try_count_row_group(index, text, group, counted) {
            self.outcome.fail(at, e);
        }
        self.advance(text.share(group));
    }

    fn try_count_row_group(
        &self,
        index: usize,
        text: &Arc<ParquetText>,
        group: usize,
        counted: &mut Counted,
    ) -> std::result::Result<(), (Position, Error)> {
        let mut row = text.first_row(group);
        // Damaged data ends the row group: skipped and counted, or the count's error.
        let damaged = |e: Error, row: u64| match e {
            Error::BadParquet { .. } => self.outcome.bad_record((index, row), e),
            e => Err(((index, row), e)),
        };
        let mut batches = match text.batches(group, PARQUET_BATCH_BYTES) {
            Ok(batches) => batches,
            Err(e) => return damaged(e, row),
        };
        while self.outcome.goes_on((index, row)) {
            let batch = match batches.next_batch() {
                Ok(Some(batch)) => batch,
                Ok(None) => break,
                Err(e) => return damaged(e, row),
            };
            for i in 0..batch.len() {
                match batch.text(i) {
                    Ok(record) => {
                        count_record(record, self.options.specials, &mut counted.counts)
                            .map_err(|e| (NOWHERE, e))?;
                        counted.documents += 1;
                    }
                    Err(e) => self.outcome.bad_record((index, batch.row(i)), e)?,
                }
            }
            row = batch.row(batch.len());
        }
        Ok(())
    }

    /// Counts a chunk of the uncompressed text file `index`.
    fn count_chunk(&self, index: usize, chunk: &Chunk, counted: &mut Counted) {
        let text = match simdutf8::compat::from_utf8(&chunk.bytes) {
            Ok(text) => text,
            Err(e) => {
                let offset = chunk.offset + e.valid_up_to() as u64;
                let path = self.path(index).to_path_buf();
                return self
                    .outcome
                    .fail((index, offset), Error::InvalidUtf8 { path, offset });
            }
        };
        if let Err(e) = count_text(text, self.options.specials, &mut counted.counts) {
            return self.outcome.fail(NOWHERE, e);
        }
        self.advance(chunk.bytes.len() as u64);
    }

    /// Counts the file `index` alone: a compressed text file or a JSON lines file.
    fn count_file(&self, index: usize, counted: &mut Counted) {
        if let Err((at, e)) = self.try_count_file(index, counted) {
            self.outcome.fail(at, e);
        }
    }

    fn try_count_file(
        &self,
        index: usize,
        counted: &mut Counted,
    ) -> std::result::Result<(), (Position, Error)> {
        let (path, kind) = (self.path(index), self.files[index].1);
        let file = open_input(path, self.progress).map_err(|e| ((index, 0), e))?;
        let (reader, probe) = decompress::open(file, kind.compression);
        let mut reported = 0;
        let mut report = |probe: &Probe, force: bool| {
            let read = probe.file_bytes();
            if force || read - reported >= REPORT_EVERY {
                self.advance(read - reported);
                reported = read;
            }
        };
        let options = self.options;
        // A corrupt stream ends the file: skipped and counted, or the count's error.
        let stream_error = |e: std::io::Error, probe: &Probe, at: u64| {
            let e = probe.error(path, e, options.chunk_size);
            match e {
                Error::CorruptStream { .. } => self.outcome.bad_record((index, u64::MAX), e),
                e => Err(((index, at), e)),
            }
        };
        match kind.format {
            Format::Txt => {
                let mut chunks = ChunkReader::new(reader, options.specials, options.chunk_size);
                while self.outcome.running(index) {
                    let chunk = match chunks.next() {
                        None => break,
                        Some(Ok(chunk)) => chunk,
                        Some(Err(e)) => {
                            stream_error(e, &probe, u64::MAX)?;
                            break;
                        }
                    };
                    let text = simdutf8::compat::from_utf8(&chunk.bytes).map_err(|e| {
                        let offset = chunk.offset + e.valid_up_to() as u64;
                        let path = path.to_path_buf();
                        ((index, offset), Error::InvalidUtf8 { path, offset })
                    })?;
                    count_text(text, options.specials, &mut counted.counts)
                        .map_err(|e| (NOWHERE, e))?;
                    chunks.recycle(chunk.bytes);
                    report(&probe, false);
                }
            }
            Format::JsonLines => {
                let mut records = JsonLines::new(reader, options.text_field);
                while self.outcome.running(index) {
                    match records.next_record() {
                        Ok(Record::Text(text)) => {
                            count_record(text, options.specials, &mut counted.counts)
                                .map_err(|e| (NOWHERE, e))?;
                            counted.documents += 1;
                        }
                        Ok(Record::Bad(why)) => {
                            let line = records.line();
                            let at = RecordAt::Line(path.to_path_buf(), line);
                            self.outcome
                                .bad_record((index, line), Error::BadRecord { at, why })?;
                        }
                        Ok(Record::End) => break,
                        Err(e) if e.kind() == std::io::ErrorKind::OutOfMemory => {
                            let e =
                                AllocError::of::<u8>(records.wanted()).named("a line of the input");
                            return Err((NOWHERE, e));
                        }
                        Err(e) => {
                            stream_error(e, &probe, records.line() + 1)?;
                            break;
                        }
                    }
                    report(&probe, false);
                }
            }
            Format::Parquet => unreachable!("read in row groups"),
        }
        report(&probe, true);
        Ok(())
    }
}

/// Counts the pre-tokens of `files`, each with its kind (see [`SourceKind::of`]), on
/// `options.threads` threads (fewer when not all can start), the calling thread among them.
///
/// Every record and every file is its own document: the counts are exactly those of one text with
/// the documents joined by a special token, without that token's occurrences and bytes. They do not
/// depend on the number of threads, the chunk size or the order of the files.
///
/// Fails before counting on a file that cannot be looked up; then on the first error in source order:
/// a file that cannot be read, invalid UTF-8 in a `.txt` file, a Parquet file without the string
/// column `options.text_field`, and in strict mode ([`Errors::Strict`]) a bad record, a corrupt
/// compressed stream or damaged Parquet data (which [`Errors::Skip`] skips and counts); or when memory
/// runs out or `progress` asks to stop.
pub fn count_sources<P: AsRef<Path> + Sync>(
    files: &[(P, SourceKind)],
    options: &SourceOptions<'_>,
    progress: &dyn Progress,
) -> Result<CorpusCounts> {
    count_files_of(files, None, options, progress)
}

/// Counts the row groups `row_groups` (indices from 0; those past the file's end are none) of the
/// Parquet file `path`, as [`count_sources`] counts the whole file: the counts of ranges that cover a
/// file add up to the file's, so that the parts of a large file can be counted apart.
pub fn count_parquet_row_groups(
    path: &Path,
    row_groups: Range<usize>,
    options: &SourceOptions<'_>,
    progress: &dyn Progress,
) -> Result<CorpusCounts> {
    let kind = SourceKind {
        format: Format::Parquet,
        compression: super::kind::Compression::None,
    };
    count_files_of(&[(path, kind)], Some(row_groups), options, progress)
}

/// [`count_sources`], counting only `row_groups` of each Parquet file when given.
fn count_files_of<P: AsRef<Path> + Sync>(
    files: &[(P, SourceKind)],
    row_groups: Option<Range<usize>>,
    options: &SourceOptions<'_>,
    progress: &dyn Progress,
) -> Result<CorpusCounts> {
    let mut total = 0;
    let mut text_files = 0;
    for (path, kind) in files {
        let path = path.as_ref();
        text_files += u64::from(kind.format == Format::Txt);
        total += std::fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .len();
    }
    let outcome = Outcome::new(options.errors);
    let count = FileCount {
        files,
        options,
        progress,
        outcome: &outcome,
        queue: Mutex::new(Queue {
            current: None,
            next: 0,
        }),
        row_groups,
        total,
        done: AtomicU64::new(0),
    };
    let threads = run_on_threads(options.threads, || {
        let mut counted = None;
        while let Some(work) = count.next_work() {
            let counted = match counts_of(&mut counted) {
                Ok(counted) => counted,
                Err(e) => {
                    outcome.fail(NOWHERE, e);
                    break;
                }
            };
            match work {
                Work::Chunk(index, chunk) => count.count_chunk(index, &chunk, counted),
                Work::RowGroup(index, text, group) => {
                    count.count_row_group(index, &text, group, counted)
                }
                Work::File(index) => count.count_file(index, counted),
            }
        }
        counted
    });
    outcome.finish(threads, options.specials, text_files)
}

/// Counts `n` texts, each its own document, on `options.threads` threads: `text(i)` is the `i`-th
/// text, or the error of a bad record (which names where it is). The messages and errors of bad
/// records are in the order of `i`, whatever the threads do.
///
/// The pre-tokens are counted into `kept`, not into the counts returned, which hold the documents and
/// the records skipped: each thread takes a set of counts from `kept` (a new one when none is left)
/// and puts it back when done. A caller that counts a stream of batches keeps the same `kept` for
/// all and adds it up once at the end ([`CorpusCounts::add_kept`]), since adding each batch's counts
/// to a total would go through most of the batch's distinct pre-tokens a second time.
///
/// Fails on the first bad record in strict mode ([`Errors::Strict`]), and when memory runs out.
pub fn count_texts<'t>(
    n: usize,
    text: impl Fn(usize) -> Result<&'t str> + Sync,
    options: &SourceOptions<'_>,
    kept: &mut Vec<PreTokenCounts>,
) -> Result<CorpusCounts> {
    let outcome = Outcome::new(options.errors);
    let next = AtomicUsize::new(0);
    let pool = Mutex::new(std::mem::take(kept));
    let take = || pool.lock().unwrap_or_else(PoisonError::into_inner).pop();
    let threads = run_on_threads(options.threads.clamp(1, n.max(1)), || {
        let mut counted: Option<Counted> = None;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n || !outcome.running(i) {
                break;
            }
            if counted.is_none() {
                counted = take().map(|counts| Counted {
                    counts,
                    documents: 0,
                });
            }
            let counts = match counts_of(&mut counted) {
                Ok(counts) => counts,
                Err(e) => {
                    outcome.fail(NOWHERE, e);
                    break;
                }
            };
            match text(i) {
                Ok(text) => match count_record(text, options.specials, &mut counts.counts) {
                    Ok(()) => counts.documents += 1,
                    Err(e) => outcome.fail(NOWHERE, e),
                },
                Err(e) => {
                    if let Err((at, e)) = outcome.bad_record((i, 0), e) {
                        outcome.fail(at, e);
                    }
                }
            }
        }
        // The records' counts are whole once the table in front of the map is emptied.
        let mut counted = counted?;
        if let Err(e) = counted.counts.flush() {
            outcome.fail(NOWHERE, e);
        }
        let documents = counted.documents;
        pool.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(counted.counts);
        Some(documents)
    });
    *kept = pool.into_inner().unwrap_or_else(PoisonError::into_inner);
    let documents = threads.into_iter().flatten().sum();
    outcome.finish(Vec::new(), options.specials, documents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;
    use std::io::Write;
    use std::path::PathBuf;

    /// A folder of its own for each test, removed when the test ends (also when it fails).
    struct Folder(PathBuf);

    impl std::ops::Deref for Folder {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn folder(name: &str) -> Folder {
        let dir =
            std::env::temp_dir().join(format!("bytepair-sources-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Folder(dir)
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> (PathBuf, SourceKind) {
        let path = dir.join(name);
        let bytes = match SourceKind::of(&path).unwrap().compression {
            super::super::kind::Compression::None => bytes.to_vec(),
            super::super::kind::Compression::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                e.write_all(bytes).unwrap();
                e.finish().unwrap()
            }
            super::super::kind::Compression::Zstd => zstd::encode_all(bytes, 1).unwrap(),
            super::super::kind::Compression::Xz => {
                let mut e = liblzma::write::XzEncoder::new(Vec::new(), 1);
                e.write_all(bytes).unwrap();
                e.finish().unwrap()
            }
        };
        std::fs::write(&path, bytes).unwrap();
        let kind = SourceKind::of(&path).unwrap();
        (path, kind)
    }

    fn jsonl(texts: &[&str]) -> String {
        texts
            .iter()
            .map(|t| {
                format!(
                    "{{\"id\": 7, \"text\": {}}}\n",
                    serde_json::to_string(t).unwrap()
                )
            })
            .collect()
    }

    fn options<'a>(
        specials: &'a SpecialTokens,
        errors: Errors,
        threads: usize,
    ) -> SourceOptions<'a> {
        SourceOptions {
            specials,
            text_field: "text",
            errors,
            chunk_size: 16,
            threads,
        }
    }

    /// The counts of `documents` joined by the special token, without its bytes and occurrences.
    fn joined(documents: &[&str], specials: &SpecialTokens) -> PreTokenCounts {
        let mut counts = PreTokenCounts::new().unwrap();
        for d in documents {
            count_text(d, specials, &mut counts).unwrap();
        }
        counts
    }

    const DOCS: [&str; 5] = [
        "The cat sat.\n\nOn the mat<|eot|> and  then",
        "  \u{3000}日本 x\u{e9}t\u{e9}  ",
        "one two<|eot|>",
        "",
        "  trailing space   \n",
    ];

    #[test]
    fn every_kind_counts_as_its_documents_joined() {
        let dir = folder("kinds");
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        let files = [
            write(&dir, "a.txt", DOCS[0].as_bytes()),
            write(&dir, "b.jsonl", jsonl(&DOCS[1..3]).as_bytes()),
            write(&dir, "c.json.gz", jsonl(&DOCS[3..]).as_bytes()),
            write(&dir, "d.txt.zst", DOCS[1].as_bytes()),
            write(&dir, "e.jsonl.xz", jsonl(&DOCS[..2]).as_bytes()),
            write(&dir, "f.txt.gz", b""),
            parquet(
                &dir,
                "g.parquet",
                &[Some(DOCS[2]), Some(DOCS[3]), Some(DOCS[4])],
                2,
            ),
        ];
        let documents = [
            DOCS.as_slice(),
            &[DOCS[1], DOCS[0], DOCS[1], ""],
            &DOCS[2..],
        ]
        .concat();
        let expected = joined(&documents, &specials);
        for threads in [1, 2, 5] {
            let mut files = files.to_vec();
            for rotation in 0..files.len() {
                files.rotate_left(rotation);
                let got = count_sources(
                    &files,
                    &options(&specials, Errors::Strict, threads),
                    &Silent,
                )
                .unwrap();
                assert_eq!(
                    got.pretokens, expected,
                    "{threads} threads, rotation {rotation}"
                );
                // 3 text files, and 2 + 2 + 2 records and 3 rows.
                assert_eq!(got.documents(), 12);
                assert_eq!(
                    got.special_tokens(),
                    Some(["<|eot|>".to_string()].as_slice())
                );
            }
        }
    }

    #[test]
    fn the_first_error_in_source_order_is_returned_whatever_the_threads() {
        let dir = folder("first-error");
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let good = jsonl(&["fine text"; 200]);
        let files = [
            write(&dir, "0.jsonl.zst", good.as_bytes()),
            write(
                &dir,
                "1.jsonl",
                format!("{good}{{\"text\": 1}}\n{{}}\n").as_bytes(),
            ),
            write(&dir, "2.txt", b"ok \xff bad"),
            write(&dir, "3.jsonl.gz", b"{\"txt\": \"x\"}\n"),
        ];
        for threads in [1, 2, 4] {
            let e = count_sources(
                &files,
                &options(&specials, Errors::Strict, threads),
                &Silent,
            )
            .unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "{}:201: field \"text\" is a number, not a string",
                    files[1].0.display()
                )
            );
            let e = count_sources(
                &files[2..],
                &options(&specials, Errors::Strict, threads),
                &Silent,
            )
            .unwrap_err();
            assert!(matches!(e, Error::InvalidUtf8 { offset: 3, .. }), "{e}");
        }
    }

    fn parquet(
        dir: &Path,
        name: &str,
        rows: &[Option<&str>],
        group_rows: usize,
    ) -> (PathBuf, SourceKind) {
        let path = dir.join(name);
        crate::sources::parquet::tests::write_parquet(&path, rows, group_rows);
        let kind = SourceKind::of(&path).unwrap();
        (path, kind)
    }

    #[test]
    fn a_parquet_file_s_first_bad_row_is_the_error_whatever_thread_reads_its_row_group() {
        let dir = folder("parquet-rows");
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let long = "many words in a row ".repeat(500);
        let mut rows = vec![Some(long.as_str()); 400];
        rows[5] = None;
        rows[395] = None;
        let file = [parquet(&dir, "rows.parquet", &rows, 40)];
        let null = |row: usize| format!("{}: row {row}: the text is null", file[0].0.display());
        for threads in [1, 2, 4] {
            for _ in 0..3 {
                let strict = options(&specials, Errors::Strict, threads);
                let e = count_sources(&file, &strict, &Silent).unwrap_err();
                assert_eq!(e.to_string(), null(5), "{threads} threads");
            }
            let skip = options(&specials, Errors::Skip, threads);
            let got = count_sources(&file, &skip, &Silent).unwrap();
            assert_eq!((got.documents(), got.skipped()), (398, 2));
            assert_eq!(got.skipped_errors(), [null(5), null(395)]);
            let good: Vec<&str> = rows.iter().flatten().copied().collect();
            assert_eq!(got.pretokens, joined(&good, &specials));
            // Ranges of row groups add up to the file; a range past its end counts nothing.
            let mut parts = CorpusCounts::new().unwrap();
            for range in [0..3, 3..4, 4..10, 10..12] {
                let part = count_parquet_row_groups(&file[0].0, range, &skip, &Silent).unwrap();
                parts.update(&part).unwrap();
            }
            assert_eq!(parts, got);
        }
    }

    #[test]
    fn skip_mode_counts_bad_records_and_keeps_the_first_messages() {
        let dir = folder("skip");
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let mut lines = String::new();
        for i in 0..30 {
            lines += &format!("{{\"text\": \"doc {i}\"}}\n{{\"text\": {i}}}\n");
        }
        let mut truncated = zstd::encode_all(jsonl(&["kept"; 1]).as_bytes(), 1).unwrap();
        // Text that does not compress to nothing, cut short.
        let noise: String = (0..100_000u32)
            .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
            .collect();
        truncated.extend(&zstd::encode_all(noise.as_bytes(), 1).unwrap()[..200]);
        let truncated_path = dir.join("t.jsonl.zst");
        std::fs::write(&truncated_path, &truncated).unwrap();
        let files = [
            write(&dir, "a.jsonl", lines.as_bytes()),
            (
                truncated_path.clone(),
                SourceKind::of(&truncated_path).unwrap(),
            ),
        ];
        for threads in [1, 3] {
            let got =
                count_sources(&files, &options(&specials, Errors::Skip, threads), &Silent).unwrap();
            assert_eq!(got.skipped(), 31);
            assert_eq!(got.documents(), 31);
            let messages = got.skipped_errors();
            assert_eq!(messages.len(), MAX_KEPT_ERRORS);
            assert_eq!(
                messages[0],
                format!(
                    "{}:2: field \"text\" is a number, not a string",
                    files[0].0.display()
                )
            );
            assert!(messages[9].starts_with(&format!("{}:20:", files[0].0.display())));
            let docs: Vec<String> = (0..30).map(|i| format!("doc {i}")).collect();
            let mut docs: Vec<&str> = docs.iter().map(String::as_str).collect();
            docs.push("kept");
            assert_eq!(got.pretokens, joined(&docs, &specials));
            let e = count_sources(
                &files[1..],
                &options(&specials, Errors::Strict, threads),
                &Silent,
            )
            .unwrap_err();
            assert!(e.to_string().starts_with(&format!(
                "{}: corrupt or truncated zstd stream",
                truncated_path.display()
            )));
        }
    }

    #[test]
    fn texts_count_as_documents_and_bad_ones_are_named_in_order() {
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        let texts: Vec<Option<&str>> = (0..100)
            .map(|i| (i % 7 != 3).then_some(DOCS[i % DOCS.len()]))
            .collect();
        let text = |i: usize| match texts[i] {
            Some(t) => Ok(t),
            None => Err(Error::BadRecord {
                at: RecordAt::Item(i as u64),
                why: "null".to_string(),
            }),
        };
        let good: Vec<&str> = texts.iter().flatten().copied().collect();
        for threads in [1, 2, 8] {
            let got = count_all(100, text, &options(&specials, Errors::Skip, threads)).unwrap();
            assert_eq!(got.pretokens, joined(&good, &specials));
            assert_eq!((got.documents(), got.skipped()), (good.len() as u64, 14));
            assert_eq!(got.skipped_errors()[..2], ["item 3: null", "item 10: null"]);
            let e = count_all(100, text, &options(&specials, Errors::Strict, threads)).unwrap_err();
            assert_eq!(e.to_string(), "item 3: null");
        }
    }

    /// [`count_texts`] with its pre-tokens added to the counts it returns.
    fn count_all<'t>(
        n: usize,
        text: impl Fn(usize) -> Result<&'t str> + Sync,
        options: &SourceOptions<'_>,
    ) -> Result<CorpusCounts> {
        let mut kept = Vec::new();
        let mut counts = count_texts(n, text, options, &mut kept)?;
        counts.add_kept(kept)?;
        Ok(counts)
    }

    #[test]
    fn batches_counted_into_the_same_kept_counts_add_up_to_the_whole() {
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        let texts: Vec<&str> = (0..60).map(|i| DOCS[i % DOCS.len()]).collect();
        let whole =
            count_all(60, |i| Ok(texts[i]), &options(&specials, Errors::Strict, 1)).unwrap();
        for threads in [1, 2, 3] {
            let options = options(&specials, Errors::Strict, threads);
            let (mut total, mut kept) = (CorpusCounts::new().unwrap(), Vec::new());
            for batch in texts.chunks(7) {
                let counted = count_texts(batch.len(), |i| Ok(batch[i]), &options, &mut kept);
                let counted = counted.unwrap();
                // The pre-tokens are in `kept`, one set of counts a thread at most, until added.
                assert_eq!(
                    (counted.pretokens.len(), counted.documents()),
                    (0, batch.len() as u64)
                );
                assert!(!kept.is_empty() && kept.len() <= threads);
                total.update(&counted).unwrap();
            }
            total.add_kept(kept).unwrap();
            assert_eq!(total, whole);
            assert_eq!(total.pretokens.bytes(), whole.pretokens.bytes());
        }
    }

    fn counts_of_text(text: &str, specials: &[&str]) -> CorpusCounts {
        let specials = SpecialTokens::new(specials).unwrap();
        count_all(1, |_| Ok(text), &options(&specials, Errors::Strict, 1)).unwrap()
    }

    #[test]
    fn owned_updates_take_the_tables_of_counts_added_to_empty_ones_and_add_up_as_updates_do() {
        let (a, b) = (
            counts_of_text("a b a a", &["<s>", "<t>"]),
            counts_of_text("b c a<s>", &["<t>", "<s>"]),
        );
        let mut sum = CorpusCounts::new().unwrap();
        sum.update_owned(a.clone()).unwrap();
        assert_eq!(sum, a);
        sum.update_owned(b.clone()).unwrap();
        let mut expected = a.clone();
        expected.update(&b).unwrap();
        assert_eq!(sum, expected);
        // Empty counts that were given special tokens keep them as given, and refuse others.
        let given_tokens = |specials: &[&str]| {
            let specials = SpecialTokens::new(specials).unwrap();
            count_all(0, |_| Ok(""), &options(&specials, Errors::Strict, 1)).unwrap()
        };
        let mut given = given_tokens(&["<t>", "<s>"]);
        assert_eq!((given.documents(), given.pretokens.len()), (0, 0));
        given.update_owned(a.clone()).unwrap();
        assert_eq!(given, a);
        assert_eq!(given.special_tokens().unwrap(), ["<t>", "<s>"]);
        assert!(given_tokens(&["<u>"]).update_owned(a).is_err());
    }

    #[test]
    fn updates_add_and_check_the_special_tokens() {
        let (a, b) = (
            counts_of_text("a b a a", &["<s>"]),
            counts_of_text("b c a<s>", &["<s>"]),
        );
        let mut sum = CorpusCounts::new().unwrap();
        assert_eq!(sum.special_tokens(), None);
        sum.update(&a).unwrap();
        sum.update(&b).unwrap();
        assert_eq!(sum.special_tokens(), Some(["<s>".to_string()].as_slice()));
        let mut other_order = b.clone();
        other_order.update(&a).unwrap();
        assert_eq!(sum, other_order);
        assert_eq!(
            sum.most_common(3).unwrap(),
            [
                (b" a".to_vec(), 3),
                (b" b".to_vec(), 1),
                (b" c".to_vec(), 1)
            ]
        );
        assert_eq!(sum.most_common(99).unwrap().len(), 5);
        assert_eq!(sum.total(), 7);
        assert_eq!(
            (
                sum.documents(),
                sum.pretokens().bytes(),
                sum.pretokens().special_occurrences()
            ),
            (2, 15, 1)
        );
        let e = sum.clone().update(&counts_of_text("x", &[])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot merge counts made with different special tokens: [\"<s>\"] and []"
        );
    }

    #[test]
    fn counts_that_would_overflow_are_refused_unchanged() {
        let mut big = counts_of_text("a", &[]);
        big.pretokens.add_totals(u64::MAX - 1, 0);
        let before = big.clone();
        let e = big.update(&counts_of_text("a", &[])).unwrap_err();
        assert_eq!(e.to_string(), "a count would pass 2^64 - 1");
        assert_eq!(big, before);
        big.update(&counts_of_text("", &[])).unwrap();
        assert_eq!(big.documents(), 2);
    }
}
