//! Counting pre-tokens: the first phase of training, and the only one that reads the input.
//!
//! The file is read in chunks cut at safe places ([`crate::chunks`]); each worker thread pulls a chunk,
//! checks that it is UTF-8, splits it at special tokens, pre-tokenizes the rest and counts the pieces into
//! its own map. The maps are merged at the end. Workers never share a map, so counting scales with cores;
//! memory is the chunks in flight (one per worker plus the reader's) and the maps, which grow with the
//! number of distinct pre-tokens, not with the size of the file.
//!
//! Invariants: the counts do not depend on the chunk size or the number of threads; no pre-token spans
//! two files; the error reported for invalid UTF-8 names its first byte in the first file that has it.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use super::count_map::{CountMap, Front, FrontMiss, Prefetched};
use crate::bytes_map::{small_key, SMALL_KEY};
use crate::chunks::{Chunk, ChunkReader};
use crate::error::{try_vec, AllocError, Error, Result};
use crate::input::open_input;
use crate::pretokenize::pretokenize;
use crate::progress::{Phase, Progress};
use crate::special::{Segment, SpecialTokens};
use crate::threads::run_on_threads;

/// How often each distinct pre-token occurs, and how much text was counted: its bytes and the
/// occurrences of special tokens in it (which are not pre-tokens). From these and a vocabulary, the
/// number of tokens the text encodes to follows exactly: each pre-token encoded once, times its count,
/// plus one token per special-token occurrence.
///
/// Pieces of one and two bytes are most of the pieces (of code especially), and they are counted in
/// arrays indexed by their bytes: no hashing and no probing, in 512 KB. Longer pieces go to a compact
/// map, sharded so that counts merge a shard at a time (see `count_map.rs`). While a text is counted,
/// the hot pieces of up to 7 bytes, of one and two bytes too, are counted in a table in front of both
/// (`Front`, 1.25 MB, allocated when the counts first count a text).
#[derive(Clone, Debug)]
pub struct PreTokenCounts {
    /// `short[b]` counts the piece `[b]`; `short[256 + (b0 << 8 | b1)]` the piece `[b0, b1]`.
    short: Vec<u64>,
    long: CountMap,
    /// Empty but while [`count_text`] runs, and between the records [`count_record`] counts until
    /// [`Self::flush`]; not allocated before the first text.
    front: Front,
    bytes: u64,
    special_occurrences: u64,
}

const SHORT_SLOTS: usize = 256 + 65536;

impl Default for PreTokenCounts {
    /// Empty counts; panics where [`Self::new`] fails.
    fn default() -> Self {
        Self::new().expect("512 KB for the counts of short pre-tokens")
    }
}

impl PartialEq for PreTokenCounts {
    fn eq(&self, other: &Self) -> bool {
        let mut same = self.short == other.short
            && self.long.len() == other.long.len()
            && (self.bytes, self.special_occurrences) == (other.bytes, other.special_occurrences);
        self.long
            .for_each(|piece, n| same &= other.long.get(piece) == Some(n));
        same
    }
}

/// The array slot of a piece of one or two bytes.
#[inline]
fn short_slot(piece: &[u8]) -> Option<usize> {
    match *piece {
        [b] => Some(b as usize),
        [b0, b1] => Some(256 + ((b0 as usize) << 8 | b1 as usize)),
        _ => None,
    }
}

/// What the counts of pre-tokens are called in an out-of-memory error.
const COUNTS: &str = "the counts of pre-tokens";

impl PreTokenCounts {
    /// Empty counts, or the error of their allocation.
    pub fn new() -> Result<PreTokenCounts> {
        Ok(PreTokenCounts {
            short: try_vec(0, SHORT_SLOTS).map_err(|e| e.named(COUNTS))?,
            long: CountMap::default(),
            front: Front::default(),
            bytes: 0,
            special_occurrences: 0,
        })
    }

    /// Adds `n` occurrences of `piece`; fails, counting nothing, when the counts cannot grow.
    #[inline]
    pub fn add(&mut self, piece: &[u8], n: u64) -> std::result::Result<(), AllocError> {
        match short_slot(piece) {
            Some(slot) => self.short[slot] += n,
            None => self.long.add(piece, n)?,
        }
        Ok(())
    }

    /// The count of `piece` (0 if it never occurred).
    pub fn get(&self, piece: &[u8]) -> u64 {
        match short_slot(piece) {
            Some(slot) => self.short[slot],
            None => self.long.get(piece).unwrap_or(0),
        }
    }

    /// The number of distinct pre-tokens.
    pub fn len(&self) -> usize {
        self.short.iter().filter(|&&n| n > 0).count() + self.long.len()
    }

    /// Whether no pre-token was counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of text counted, special tokens included.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// How many times special tokens occurred in the text.
    pub fn special_occurrences(&self) -> u64 {
        self.special_occurrences
    }

    /// Adds `bytes` of text and `special_occurrences` to the totals (of counts merged or read back).
    pub(crate) fn add_totals(&mut self, bytes: u64, special_occurrences: u64) {
        self.bytes += bytes;
        self.special_occurrences += special_occurrences;
    }

    /// Calls `f(piece, count)` for each distinct pre-token, in no particular order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], u64)) {
        for (slot, &count) in self.short.iter().enumerate() {
            if count > 0 {
                match slot {
                    0..256 => f(&[slot as u8], count),
                    _ => f(&[((slot - 256) >> 8) as u8, (slot - 256) as u8], count),
                }
            }
        }
        self.long.for_each(f);
    }

    /// Calls `f(piece, count)` for each distinct pre-token, in byte order; fails when memory for the
    /// order runs out (4 bytes a distinct pre-token of three bytes or more).
    pub fn for_each_sorted(&self, mut f: impl FnMut(&[u8], u64)) -> Result<()> {
        // The pieces of one and two bytes in order: [b0] comes before [b0, 0], which comes before
        // every longer piece that starts with it.
        let mut short = (0..256usize).flat_map(|b0| {
            let one = (b0 as u8, None);
            std::iter::once(one).chain((0..256).map(move |b1| (b0 as u8, Some(b1 as u8))))
        });
        let mut pending = short.next();
        let mut emit_shorts_before = |limit: Option<&[u8]>, f: &mut dyn FnMut(&[u8], u64)| {
            while let Some((b0, b1)) = pending {
                let piece: &[u8] = match b1 {
                    None => &[b0],
                    Some(b1) => &[b0, b1],
                };
                if limit.is_some_and(|limit| piece >= limit) {
                    return;
                }
                let count = self.get(piece);
                if count > 0 {
                    f(piece, count);
                }
                pending = short.next();
            }
        };
        self.long
            .for_each_sorted(|piece, count| {
                emit_shorts_before(Some(piece), &mut f);
                f(piece, count);
            })
            .map_err(|e| e.named("the order of the pre-tokens"))?;
        emit_shorts_before(None, &mut f);
        Ok(())
    }

    /// How many of the pre-tokens counted are one byte long: each is one token whatever the vocabulary.
    pub(super) fn single_byte_occurrences(&self) -> u64 {
        self.short[..256].iter().sum()
    }

    /// The distinct pre-tokens of two bytes or more, their bytes in all, and the bytes of the longest:
    /// the size of training's words.
    pub(super) fn words_size(&self) -> (usize, usize, usize) {
        let (mut words, mut bytes, mut longest) = (0, 0, 0);
        self.for_each(|piece, _| {
            if piece.len() >= 2 {
                (words, bytes) = (words + 1, bytes + piece.len());
                longest = longest.max(piece.len());
            }
        });
        (words, bytes, longest)
    }

    /// Calls `f(piece, count)` for each distinct pre-token of two bytes or more, freeing the counts as it
    /// goes.
    pub(super) fn drain_words(self, mut f: impl FnMut(&[u8], u64)) {
        for (slot, &count) in self.short.iter().enumerate().skip(256) {
            if count > 0 {
                f(&[((slot - 256) >> 8) as u8, (slot - 256) as u8], count);
            }
        }
        drop(self.short);
        self.long.drain(|piece, count| {
            if piece.len() >= 2 {
                f(piece, count)
            }
        });
    }

    /// Drops the pre-tokens counted fewer than `min_count` times (the totals stay those of the text),
    /// freeing the long pieces' map as the kept ones move to a new one. Training on what is left is
    /// approximate: the pairs of the dropped pre-tokens are not counted.
    pub fn retain_at_least(&mut self, min_count: u64) -> Result<()> {
        for count in self.short.iter_mut() {
            if *count < min_count {
                *count = 0;
            }
        }
        let mut kept = CountMap::default();
        let mut failed = Ok(());
        std::mem::take(&mut self.long).drain(|piece, count| {
            if count >= min_count && failed.is_ok() {
                failed = kept.add(piece, count);
            }
        });
        failed.map_err(|e| e.named(COUNTS))?;
        self.long = kept;
        Ok(())
    }

    /// Moves the counts that [`count_record`] left in the table in front of the map into the map and
    /// the array of short pieces; fails, with some moved, when the map cannot grow.
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.long
            .flush_front(&mut self.front, &mut self.short)
            .map_err(|e| e.named(COUNTS))
    }

    /// Adds the count of every pre-token of `other` to `self` (not the totals: see
    /// `add_totals`); fails, with some of them added, when the counts cannot grow.
    pub fn add_counts(&mut self, other: &PreTokenCounts) -> std::result::Result<(), AllocError> {
        for (a, b) in self.short.iter_mut().zip(&other.short) {
            *a += b;
        }
        self.long.add_all(&other.long)
    }

    /// Adds all of `other` to `self`.
    pub fn merge(mut self, other: PreTokenCounts) -> Result<PreTokenCounts> {
        for (a, b) in self.short.iter_mut().zip(&other.short) {
            *a += b;
        }
        self.long.merge(other.long).map_err(|e| e.named(COUNTS))?;
        self.bytes += other.bytes;
        self.special_occurrences += other.special_occurrences;
        Ok(self)
    }
}

/// Adds the pre-tokens of `text` to `counts`; special tokens split the text and are counted apart
/// ([`PreTokenCounts::special_occurrences`]). Fails when the counts cannot grow (out of memory), with
/// some of the text counted.
pub fn count_text(text: &str, specials: &SpecialTokens, counts: &mut PreTokenCounts) -> Result<()> {
    let counted = count_record(text, specials, counts);
    let flushed = counts.flush();
    counted.and(flushed)
}

/// Adds the pre-tokens of `text` to `counts` as [`count_text`] does, but leaves the counts of the hot
/// ones in the table in front of the map, where the next text's occurrences of them are counted too:
/// for the many short texts of records (JSON lines, Parquet rows), whose common words would otherwise
/// go to the map once every record. Nothing but counting reads that table: [`PreTokenCounts::flush`]
/// must follow the last text before the counts are used.
pub(crate) fn count_record(
    text: &str,
    specials: &SpecialTokens,
    counts: &mut PreTokenCounts,
) -> Result<()> {
    counts.bytes += text.len() as u64;
    count_pieces(text, specials, counts).map_err(|e| e.named(COUNTS))
}

/// [`count_text`] but for the counts [`Front`] still holds.
fn count_pieces(
    text: &str,
    specials: &SpecialTokens,
    counts: &mut PreTokenCounts,
) -> std::result::Result<(), AllocError> {
    // Pieces of up to `SMALL_KEY` bytes go to the front table first, on one path whatever their length.
    // Those of three bytes or more that it does not count are counted AHEAD pieces after their slot in
    // the map is prefetched: the lookups of a large table miss the cache, and so several misses are in
    // flight at once.
    const AHEAD: usize = 16;
    let mut queue = [Prefetched::NONE; AHEAD];
    let (mut queued, mut head) = (0, 0);
    counts.front.ready()?;
    let bytes = text.as_bytes();
    for segment in specials.split(text) {
        match segment {
            Segment::Text(part) => {
                for piece in pretokenize(part) {
                    let len = piece.len();
                    let next = if len <= SMALL_KEY {
                        // The piece's offset in `text`, so that its key is read in place.
                        let start = piece.as_ptr() as usize - bytes.as_ptr() as usize;
                        debug_assert!(len > 0 && start + len <= bytes.len());
                        // SAFETY: `pretokenize` yields parts of `part`, never empty, and
                        // `specials.split` parts of `text`, so the piece lies within `text`:
                        // `start + len <= text.len()`, as `small_key` requires.
                        let key = unsafe { small_key(bytes, start, len) };
                        match counts.long.count_in_front(&mut counts.front, key) {
                            None => continue,
                            Some(FrontMiss::Short(slot)) => {
                                counts.short[slot] += 1;
                                continue;
                            }
                            Some(FrontMiss::Map(next)) => next,
                        }
                    } else {
                        counts.long.prefetch_long(piece.as_bytes())
                    };
                    if queued == AHEAD {
                        counts.long.add_prefetched(queue[head])?;
                    } else {
                        queued += 1;
                    }
                    queue[head] = next;
                    head = (head + 1) % AHEAD;
                    counts
                        .long
                        .prefetch_bytes(&queue[(head + AHEAD / 2) % AHEAD]);
                }
            }
            Segment::Special(_) => counts.special_occurrences += 1,
        }
    }
    for i in 0..queued {
        counts
            .long
            .add_prefetched(queue[(head + AHEAD - queued + i) % AHEAD])?;
    }
    Ok(())
}

/// Counts the pre-tokens of the file at `path` on `threads` threads (fewer when not all can start), the
/// calling thread among them.
///
/// Fails on the first I/O error, on invalid UTF-8 (naming the offset of the first invalid byte in the
/// file), or when `progress` asks to stop.
pub fn count_file(
    path: &Path,
    specials: &SpecialTokens,
    chunk_size: usize,
    threads: usize,
    progress: &dyn Progress,
) -> Result<PreTokenCounts> {
    count_files(&[path], specials, chunk_size, threads, progress)
}

/// The files being read: the reader of the current one, and the index of the next to open.
struct Files<'s> {
    current: Option<(usize, ChunkReader<'s, File>)>,
    next: usize,
}

/// Counts the pre-tokens of the files at `paths`, each its own document: no pre-token spans two files,
/// exactly as if they were joined by a special token. The threads take chunks from one file after
/// another, so many small files keep every thread busy as one large file does. Progress counts bytes
/// over all the files.
///
/// Fails on the first file that cannot be read (all are looked up before counting starts), on invalid
/// UTF-8 (naming the first invalid byte of the first file that has one), or when `progress` asks to stop.
pub fn count_files<P: AsRef<Path> + Sync>(
    paths: &[P],
    specials: &SpecialTokens,
    chunk_size: usize,
    threads: usize,
    progress: &dyn Progress,
) -> Result<PreTokenCounts> {
    let mut total = 0;
    for path in paths {
        let path = path.as_ref();
        total += std::fs::metadata(path)
            .map_err(|e| Error::io(path, e))?
            .len();
    }
    let files = Mutex::new(Files {
        current: None,
        next: 0,
    });
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    // Chunks are pulled in order (file by file, offset by offset), so when a chunk fails every earlier
    // chunk has been pulled and finishes; keeping the smallest failing position reports the first
    // invalid byte. Errors of no position (I/O, memory, a stop) come last.
    const NOWHERE: (usize, u64) = (usize::MAX, u64::MAX);
    let first_error: Mutex<Option<((usize, u64), Error)>> = Mutex::new(None);
    let fail = |at: (usize, u64), e: Error| {
        stop.store(true, Ordering::Relaxed);
        let mut slot = first_error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_none_or(|(first, _)| at < *first) {
            *slot = Some((at, e));
        }
    };
    let next_chunk = || -> Option<(usize, Chunk)> {
        let mut files = files.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            let Some((index, reader)) = &mut files.current else {
                let index = files.next;
                let path = paths.get(index)?.as_ref();
                files.next += 1;
                match open_input(path, progress) {
                    Ok(file) => {
                        files.current = Some((index, ChunkReader::new(file, specials, chunk_size)))
                    }
                    Err(e) => fail(NOWHERE, e),
                }
                continue;
            };
            let index = *index;
            match reader.next() {
                Some(Ok(chunk)) => return Some((index, chunk)),
                Some(Err(e)) => {
                    fail(NOWHERE, Error::read(paths[index].as_ref(), e, chunk_size));
                    return None;
                }
                None => files.current = None,
            }
        }
    };
    // A thread's counts are made with its first chunk (512 KB, which may not be there to allocate).
    let count_chunk = |counts: Option<PreTokenCounts>, (index, chunk): (usize, Chunk)| {
        let mut counts = match counts.map_or_else(PreTokenCounts::new, Ok) {
            Ok(counts) => counts,
            Err(e) => {
                fail(NOWHERE, e);
                return None;
            }
        };
        let counted = std::str::from_utf8(&chunk.bytes)
            .map_err(|e| {
                let offset = chunk.offset + e.valid_up_to() as u64;
                let error = Error::InvalidUtf8 {
                    path: paths[index].as_ref().to_path_buf(),
                    offset,
                };
                ((index, offset), error)
            })
            .and_then(|text| count_text(text, specials, &mut counts).map_err(|e| (NOWHERE, e)));
        if let Err((at, e)) = counted {
            fail(at, e);
            return Some(counts);
        }
        let n =
            done.fetch_add(chunk.bytes.len() as u64, Ordering::Relaxed) + chunk.bytes.len() as u64;
        // A pipe's size is 0 until read: the total grows with what was read.
        if let Err(e) = progress.report(Phase::Count, n, total.max(n)) {
            fail(NOWHERE, e);
        }
        Some(counts)
    };
    let mut counts: Option<PreTokenCounts> = None;
    for thread in run_on_threads(threads, || {
        std::iter::from_fn(next_chunk).fold(None, count_chunk)
    }) {
        counts = match (counts, thread) {
            (Some(a), Some(b)) => a.merge(b).map_err(|e| fail(NOWHERE, e)).ok(),
            (a, b) => a.or(b),
        };
    }
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, e)) => Err(e),
        None => counts.map_or_else(PreTokenCounts::new, Ok),
    }
}

#[cfg(test)]
mod tests {
    use super::super::count_map::{front_slot_of, short_slot_of, FRONT_SLOTS};
    use super::*;

    #[test]
    fn retaining_keeps_exactly_the_pieces_counted_often_enough() {
        let specials = SpecialTokens::new(&[] as &[&str]).unwrap();
        let mut counts = PreTokenCounts::new().unwrap();
        count_text("a a a bb bb the the the the cat", &specials, &mut counts).unwrap();
        let before = (counts.bytes(), counts.special_occurrences());
        counts.retain_at_least(2).unwrap();
        let mut left = Vec::new();
        counts
            .for_each_sorted(|p, n| left.push((p.to_vec(), n)))
            .unwrap();
        let expected = [(&b" a"[..], 2), (b" bb", 2), (b" the", 4)];
        assert_eq!(left, expected.map(|(p, n)| (p.to_vec(), n)));
        assert_eq!((counts.bytes(), counts.special_occurrences()), before);
    }
    use crate::progress::Silent;
    use std::io::Write;

    fn temp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path =
            std::env::temp_dir().join(format!("bytepair-count-{}-{name}", std::process::id()));
        std::fs::File::create(&path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
        path
    }

    #[test]
    fn file_counts_do_not_depend_on_chunk_size() {
        let text = "the cat<|eot|> the  cat\n\tsat on the mat, the end.\n".repeat(50);
        let path = temp_file("chunks", text.as_bytes());
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        let mut expected = PreTokenCounts::default();
        count_text(&text, &specials, &mut expected).unwrap();
        assert_eq!(expected.get(b" cat"), 100);
        assert_eq!(expected.get(b"\n"), 100);
        assert_eq!(expected.get(b"<|eot|>"), 0);
        for chunk_size in [1, 7, 64, 1 << 20] {
            assert_eq!(
                count_file(&path, &specials, chunk_size, 2, &Silent).unwrap(),
                expected
            );
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn several_files_count_as_documents_joined_by_a_special_token() {
        let (a, b) = ("one two\n  ", "  three\u{e9}t\u{e9} four<|eot|>five");
        let paths = [
            temp_file("doc-a", a.as_bytes()),
            temp_file("doc-b", b.as_bytes()),
        ];
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        let mut expected = PreTokenCounts::default();
        count_text(&format!("{a}<|eot|>{b}"), &specials, &mut expected).unwrap();
        let counts = count_files(&paths, &specials, 3, 2, &Silent).unwrap();
        assert_eq!(counts.special_occurrences(), 1);
        assert_eq!(counts.bytes(), (a.len() + b.len()) as u64);
        // As joined by a special token, but without the joining token's bytes and occurrence.
        expected.bytes -= "<|eot|>".len() as u64;
        expected.special_occurrences -= 1;
        assert_eq!(counts, expected);
        for path in paths {
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn invalid_utf8_names_the_first_file_and_offset_that_has_it() {
        let good = temp_file("good", "fine text here ".repeat(50).as_bytes());
        let mut bytes = b"ok text here ".repeat(100);
        bytes[300] = 0xFF;
        let bad = temp_file("bad", &bytes);
        let later = temp_file("later", b"\xFE later");
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        for chunk_size in [3, 64, 4096] {
            match count_files(&[&good, &bad, &later], &specials, chunk_size, 2, &Silent) {
                Err(Error::InvalidUtf8 { path, offset }) => {
                    assert_eq!((path, offset), (bad.clone(), 300))
                }
                other => panic!("expected InvalidUtf8, got {other:?}"),
            }
        }
        for path in [good, bad, later] {
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn invalid_utf8_names_the_first_bad_offset() {
        let mut bytes = b"ok text here ".repeat(100);
        bytes[700] = 0xFF;
        bytes[1000] = 0xFE;
        let path = temp_file("utf8", &bytes);
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        for chunk_size in [3, 64, 4096] {
            match count_file(&path, &specials, chunk_size, 2, &Silent) {
                Err(Error::InvalidUtf8 { offset, .. }) => assert_eq!(offset, 700),
                other => panic!("expected InvalidUtf8, got {other:?}"),
            }
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn short_slots_of_keys_are_the_slots_of_their_pieces() {
        let pieces = (0..=255u8)
            .map(|b| vec![b])
            .chain((0..=0xFFFFu16).map(|w| w.to_be_bytes().to_vec()))
            .chain([b"abc".to_vec(), b"abcdefg".to_vec()]);
        for piece in pieces {
            // SAFETY: the piece is all of the text.
            let key = unsafe { small_key(&piece, 0, piece.len()) };
            assert_eq!(short_slot_of(key), short_slot(&piece), "{piece:?}");
        }
    }

    #[test]
    fn short_pieces_evicted_blocked_or_flushed_keep_their_counts() {
        // A piece of two bytes and one of five that share a slot of the front table.
        let slot = |p: &[u8]| {
            // SAFETY: the piece is all of the text.
            front_slot_of(unsafe { small_key(p, 0, p.len()) })
        };
        let two = " q";
        let five = (0..26u32.pow(4))
            .map(|i| {
                let letter = |k: u32| (b'a' + (i / 26u32.pow(k) % 26) as u8) as char;
                format!(" {}{}{}{}", letter(0), letter(1), letter(2), letter(3))
            })
            .find(|w| slot(w.as_bytes()) == slot(two.as_bytes()))
            .unwrap();
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        // Evicted by the longer piece; passed on while a repeated piece holds the slot; flushed from
        // the slot twice; evicted, then taking the slot back from the piece that evicted it.
        for (pieces, twos, fives) in [
            (vec![two, &five], 1, 1),
            (vec![&five, &five, two], 1, 2),
            (vec![two, two], 2, 0),
            (vec![two, &five, two], 2, 1),
        ] {
            let text = pieces.concat();
            let mut counts = PreTokenCounts::new().unwrap();
            count_text(&text, &specials, &mut counts).unwrap();
            assert_eq!(counts.get(two.as_bytes()), twos, "{text:?}");
            assert_eq!(counts.get(five.as_bytes()), fives, "{text:?}");
            assert_eq!(counts.len(), 1 + (fives > 0) as usize, "{text:?}");
        }
    }

    #[test]
    fn the_front_table_loses_no_count() {
        // Far more distinct short keys than the front table has slots, so that keys share slots: hot
        // ones (every tenth piece), hot pieces of one and two bytes (which the front table passes on
        // to their array), keys seen once, keys seen every thousand pieces for a while, and long keys;
        // counted in two texts, each of which empties the front table.
        // Numbers as letters, so that each piece is one pre-token: `i` in base 26.
        let letters = |mut i: usize| {
            let mut s = String::new();
            loop {
                s.push((b'a' + (i % 26) as u8) as char);
                i /= 26;
                if i == 0 {
                    return s;
                }
            }
        };
        let piece = |i: usize| match i % 10 {
            0 => format!(" h{}", letters(i % 70)),
            // " x" then "," are two pieces, of two bytes and one.
            1 => format!(
                "{}{}",
                [" x", " y", " z", "\t"][i / 10 % 4],
                [",", ";", "."][i % 3]
            ),
            2..=6 => format!(" {}", letters(i)),
            7 | 8 => format!(" t{}", letters(i / 1000)),
            _ => format!(" long{}", letters(i << 20)),
        };
        let text: String = (0..800_000).map(piece).collect();
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let mut counts = PreTokenCounts::default();
        let half = text.len() / 2;
        let cut = (half..).find(|&i| text.as_bytes()[i] == b' ').unwrap();
        count_text(&text[..cut], &specials, &mut counts).unwrap();
        count_text(&text[cut..], &specials, &mut counts).unwrap();
        let mut expected = std::collections::HashMap::<&[u8], u64>::new();
        for piece in pretokenize(&text) {
            *expected.entry(piece.as_bytes()).or_default() += 1;
        }
        assert_eq!(counts.len(), expected.len());
        for (piece, &n) in &expected {
            assert_eq!(counts.get(piece), n, "{:?}", String::from_utf8_lossy(piece));
        }
        // The hot keys repeat hundreds of times in each text, and the short pieces thousands.
        assert!(expected[&b" ha"[..]] > 800);
        assert!(expected[&b","[..]] > 10_000);
        assert!(expected[&b" x"[..]] > 10_000);
        let short_keys = expected.keys().filter(|p| p.len() <= SMALL_KEY).count();
        assert!(short_keys > 4 * FRONT_SLOTS, "{short_keys}");
    }

    #[test]
    fn missing_file_is_an_io_error() {
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let err =
            count_file(Path::new("/nonexistent/x.txt"), &specials, 64, 1, &Silent).unwrap_err();
        assert!(
            matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound)
        );
    }
}
