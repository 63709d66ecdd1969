//! The encoder's caches, kept per thread and between calls: [`Scratch`] (the buffers and caches of one
//! thread's encoding), [`ScratchPool`] (scratches kept between calls), and the two tables of recently
//! seen pieces, [`SmallPieces`] and [`RecentPieces`].
//!
//! Encoding a text fills caches (recent pieces, merged pieces, the merge table's answers) that make the
//! rest of the text fast. A tokenizer is usually called once per document, thousands of times; a fresh
//! scratch per call would start every document cold, every word looked up in the large vocabulary table
//! again and every multi-token word merged again. The pool hands each call a scratch an earlier call
//! filled.
//!
//! [`RecentPieces`] is a small direct-mapped cache from short pre-tokens to their ids. The vocabulary
//! table and the cache of merged pieces are large (megabytes for GPT-2), and words come in a Zipf
//! distribution, so their lookups are spread over the whole table and most wait for memory. A table of
//! recently seen pieces the size of L2 answers most of them (the few thousand most common words are
//! most of any text); a miss costs one more load before the large maps. Direct-mapped: a piece has one
//! slot, chosen by its hash, and a new piece evicts the old one; collisions only cost hit rate.
//!
//! [`SmallPieces`] is the same for pieces of up to [`SMALL_PIECE`] bytes, most pieces of any text, with
//! a key of one word and room for two ids; it also answers pieces of one and two bytes, which
//! [`RecentPieces`] leaves to the byte tables. Its point is fewer branches: whether a piece is one or
//! two bytes, or longer, is a coin toss to the branch predictor, and one path for all the short ones
//! takes that branch away (the length branch that is left, up to 7 bytes or more, goes one way for
//! most pieces). Both tables write a hit's ids whole and then set the output's length, so that no
//! branch depends on the number of ids either.
//!
//! A second [`RecentPieces`] holds the segments of pieces cut where no token joins two bytes
//! (`Encoder::merge_segments`). CJK sentences are single pieces that rarely recur, while their
//! segments, a few characters each, recur throughout a text: 20 MB of Japanese and Chinese merged about
//! 400,000 segments, only 17,600 of them distinct. Kept apart from the pieces, they take no piece's
//! slot.
//!
//! A call's scratch also counts how often the two tables miss, a window of pieces at a time: when more
//! than one piece in ten misses them, the rest of the call goes through the table of pieces the
//! workers use ([`Batched`]), which holds the long tail that they cannot ([`Scratch::count_window`]).
//!
//! Invariants: a scratch holds ids of one encoder and is only used with it; the caches are bounded
//! ([`CacheCap`], fixed-size tables), so memory does not grow with the text; a cache that cannot grow
//! (out of memory) keeps nothing and only costs time.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use super::batch::{push_first, Batched, PieceTable};
use super::merge::{LongMerge, ShortMerge};
use super::table::{MergeCache, SizedByText};
use crate::bytes_map::{BytesMap, InlineKey, SMALL_KEY};
use crate::error::{try_box, try_push, try_vec, AllocError};

/// How many multi-token pieces a scratch's cache holds, and how many ids in all, before it starts over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheCap {
    pub(super) pieces: usize,
    pub(super) ids: usize,
    /// The most sets of a [`Batched`] table of pieces (64 bytes each); 0 for none.
    pub(super) table_sets: usize,
    /// Whether the table of pieces is only taken up once the recent pieces miss too often
    /// ([`Scratch::count_window`]); otherwise it is used from the start.
    pub(super) table_on_misses: bool,
}

impl CacheCap {
    /// For `encode` and `encode_batch`: room for the distinct multi-token pieces of tens of megabytes
    /// of prose or CJK-heavy text, so that the cache does not keep starting over. About 13 MB when full
    /// (only pieces shorter than `LONG_PIECE` are cached, so however long-tailed the text), and a table
    /// of pieces of up to 131,072 sets (8 MB) for calls whose recent pieces miss.
    pub(crate) const CALL: CacheCap = CacheCap {
        pieces: 1 << 17,
        ids: 1 << 20,
        table_sets: 1 << 17,
        table_on_misses: true,
    };

    /// For streams (`encode_prefix`), whose growth in memory must stay small. About 1.5 MB when full.
    pub(crate) const STREAM: CacheCap = CacheCap {
        pieces: 1 << 14,
        ids: 1 << 17,
        table_sets: 0,
        table_on_misses: false,
    };

    /// For the worker threads of `encode_file` and `encode_dataset`: gigabytes of text, whose distinct
    /// words keep coming (Heaps' law), so that a cache of any size fills and starts over, while the
    /// recent pieces answer the common words anyway. A small cache, in L2, measured faster than
    /// [`Self::CALL`]'s: `s2`'s token shards at 0.97 of gigatoken's speed against 0.90, `encode_file`
    /// on prose 294 against 274 MB/s and on all of code_c 478 against 466 (the same rounds).
    ///
    /// They also look pieces up in a [`Batched`] table of up to 524,288 sets (32 MB, 1,048,576 pieces),
    /// which holds the long tail of web text that the small cache and the recent pieces cannot: `s2`'s
    /// token shards at 1.30 of gigatoken's speed against 1.05 without it (the same rounds).
    pub(crate) const WORKER: CacheCap = CacheCap {
        pieces: 1 << 14,
        ids: 1 << 17,
        table_sets: 1 << 19,
        table_on_misses: false,
    };
}

/// State reused across the pieces of one call, and between calls: buffers of the merge loops, the
/// recent pieces, the merge table's recent answers, and a bounded cache of multi-token pieces (their
/// ids end to end in `cached_ids`), since words that are not one token recur. Used by one thread at a
/// time.
pub(crate) struct Scratch {
    pub(super) short: ShortMerge,
    pub(super) long: LongMerge,
    pub(super) merge_cache: MergeCache,
    pub(super) recent: RecentPieces,
    /// Segments of 3 to 16 bytes of pieces cut into segments, seen recently, and their ids.
    pub(super) segments: RecentPieces,
    pub(super) small: SmallPieces,
    /// The workers' table of pieces, looked up in batches; `None` for calls and streams. Taken out
    /// while a text is encoded with it (`Encoder::encode_with`).
    pub(super) batched: Option<Box<Batched>>,
    pub(super) cache: BytesMap<(u32, u32)>,
    pub(super) cached_ids: Vec<u32>,
    /// The ids of a short text, for [`super::Encoder::encode_then`]: reused, so that a call of a few
    /// hundred nanoseconds does not also allocate and free them.
    #[cfg(any(feature = "python", test))]
    pub(super) ids: Vec<u32>,
    /// Bounds `cache` and `cached_ids`.
    pub(super) cap: CacheCap,
    /// Bytes of text encoded with this scratch, which its small tables are sized by.
    seen: usize,
    /// This call's misses of the recent pieces, while the table of pieces is not in use.
    pub(super) misses: MissWindows,
    /// Whether this call encodes with `batched`: always for a worker, and for a call from the end
    /// of the window that decided it ([`Self::count_window`]). Only ever true while `batched` is
    /// `Some` (the encoder would otherwise skip the rest of the text's pieces).
    pub(super) table_in_use: bool,
}

/// The pieces of a call's text counted before the share of them that missed the recent pieces is
/// looked at ([`Scratch::count_window`]): about 300 KB of prose.
pub(super) const WINDOW: usize = 1 << 16;

/// A call takes up the table of pieces when more than one in [`MISSES_FOR_TABLE`] of the pieces of
/// its last two windows missed the recent pieces.
const MISSES_FOR_TABLE: usize = 10;

/// A call's pieces that missed the recent pieces, counted a window of [`WINDOW`] pieces at a time.
pub(super) struct MissWindows {
    /// The pieces left to encode in the current window.
    pub(super) left: usize,
    /// The pieces of the current window that missed, and of the window before.
    pub(super) missed: usize,
    missed_before: usize,
    /// The windows of this call ended so far.
    windows: usize,
}

impl MissWindows {
    /// None counted: the start of a call.
    fn new() -> MissWindows {
        MissWindows {
            left: WINDOW,
            missed: 0,
            missed_before: 0,
            windows: 0,
        }
    }

    /// Ends the current window, and returns true if more than one in [`MISSES_FOR_TABLE`] of the
    /// pieces of this window and the one before missed. The call's first window counts for nothing:
    /// a new scratch's tables are empty then. Two windows rather than one, so that a stretch of new
    /// words in text that mostly hits (a list of names in C source) does not decide the rest of it.
    fn end_window(&mut self) -> bool {
        let missed = std::mem::take(&mut self.missed);
        let two_windows = missed + std::mem::replace(&mut self.missed_before, missed);
        self.windows += 1;
        self.windows >= 3 && two_windows * MISSES_FOR_TABLE > 2 * WINDOW
    }
}

impl Scratch {
    /// Sized for texts of about `text_len` bytes, its cache bounded by `cap`; fails when its tables
    /// cannot be allocated (up to 900 KB, and a worker's table of pieces: [`CacheCap::WORKER`]).
    pub(crate) fn for_text(text_len: usize, cap: CacheCap) -> Result<Scratch, AllocError> {
        let batched = match cap.table_sets {
            0 => None,
            _ if cap.table_on_misses => None,
            most => Some(Batched::new(Batched::sets_for(text_len, most))?),
        };
        Scratch::with_batched(text_len, cap, batched)
    }

    /// [`Self::for_text`] with `batched` as its table of pieces and batch.
    fn with_batched(
        text_len: usize,
        cap: CacheCap,
        batched: Option<Box<Batched>>,
    ) -> Result<Scratch, AllocError> {
        // A worker's table of pieces holds every piece the small pieces would (up to 15 bytes, they
        // up to 7), so a worker never asks them: it gets the least of them.
        let small_len = if batched.is_some() { 0 } else { text_len };
        let table_in_use = batched.is_some() && !cap.table_on_misses;
        Ok(Scratch {
            short: ShortMerge::new()?,
            long: LongMerge::default(),
            merge_cache: MergeCache::for_text(text_len)?,
            recent: RecentPieces::for_text(text_len)?,
            segments: RecentPieces::for_text(text_len)?,
            small: SmallPieces::for_text(small_len)?,
            batched,
            cache: BytesMap::with_capacity(0)?,
            cached_ids: Vec::new(),
            #[cfg(any(feature = "python", test))]
            ids: Vec::new(),
            cap,
            seen: text_len,
            misses: MissWindows::new(),
            table_in_use,
        })
    }

    /// The bytes a worker's tables are sized for: chunks of `chunk` bytes, or all of the input when it
    /// is smaller (`input` bytes; 0 when unknown): tables of a chunk's size (32 MB for 4 MB chunks)
    /// took most of the time of encoding a file of a few kilobytes.
    pub(super) fn worker_text_len(chunk: usize, input: u64) -> usize {
        match input {
            0 => chunk,
            all => chunk.min(usize::try_from(all).unwrap_or(usize::MAX)),
        }
    }

    /// A worker's scratch (`encode_file`, `encode_dataset`), sized by [`Self::worker_text_len`], that
    /// looks pieces up in `shared`, the table its run's workers share, or in a table of its own when
    /// there is none ([`super::Encoder::table_for_workers`]).
    pub(crate) fn for_worker(
        chunk: usize,
        input: u64,
        shared: Option<&Arc<PieceTable>>,
    ) -> Result<Scratch, AllocError> {
        let text_len = Scratch::worker_text_len(chunk, input);
        match shared {
            Some(table) => {
                let batched = Batched::with_table(Arc::clone(table))?;
                Scratch::with_batched(text_len, CacheCap::WORKER, Some(batched))
            }
            None => Scratch::for_text(text_len, CacheCap::WORKER),
        }
    }

    /// Grows the direct-mapped tables for `text_len` more bytes of text: they are sized by all the
    /// text this scratch has encoded, so that a short text does not pay to clear large tables while a
    /// long one, or many short ones, get full-sized tables. A table that cannot be allocated keeps its
    /// size: they are caches, and only speed depends on their size.
    pub(super) fn fit(&mut self, text_len: usize) {
        self.misses = MissWindows::new();
        self.table_in_use = self.batched.is_some() && !self.cap.table_on_misses;
        self.seen = self.seen.saturating_add(text_len);
        self.recent.grow_for(self.seen);
        self.segments.grow_for(self.seen);
        self.small.grow_for(self.seen);
        self.merge_cache.grow_for(self.seen);
    }

    /// Ends a window of [`WINDOW`] pieces encoded without the table of pieces, and returns true if the
    /// rest of the call is to use it ([`Self::table_in_use`]): when the scratch takes it up on misses
    /// ([`CacheCap::table_on_misses`]), the last two windows missed often enough
    /// ([`MissWindows::end_window`]), and the table, sized by the text the scratch has seen, is there
    /// or can be allocated. The table is kept for later calls, which each decide again.
    pub(super) fn count_window(&mut self) -> bool {
        if !self.misses.end_window() || !self.cap.table_on_misses {
            return false;
        }
        let sets = Batched::sets_for(self.seen, self.cap.table_sets);
        if self
            .batched
            .as_ref()
            .is_none_or(|table| table.sets() < sets)
        {
            // A table that cannot be allocated only costs the speed it would have brought.
            self.batched = Batched::new(sets).ok();
        }
        self.table_in_use = self.batched.is_some();
        self.table_in_use
    }

    /// Runs `f` with the long merge loop giving up once `cancel` (if any) is set, and clears the flag
    /// after, so that a later call with this scratch is not stopped by it.
    pub(super) fn cancelled_by<T>(
        &mut self,
        cancel: Option<&Arc<AtomicBool>>,
        f: impl FnOnce(&mut Scratch) -> T,
    ) -> T {
        self.long.cancel = cancel.cloned();
        let result = f(self);
        self.long.cancel = None;
        result
    }

    /// Appends the cached ids at `(start, len)` of `cached_ids`: up to [`CACHED_BLOCK`] of them by
    /// [`push_first`], without a call to `memcpy` (3.6% of `encode`'s time on prose, most merged
    /// words being two to four ids), where that many lie in `cached_ids` from `start`.
    #[inline]
    pub(super) fn push_cached(&self, (start, len): (u32, u32), out: &mut Vec<u32>) {
        let (start, len) = (start as usize, len as usize);
        match self.cached_ids.get(start..start + CACHED_BLOCK) {
            Some(block) if len <= CACHED_BLOCK => {
                let block: &[u32; CACHED_BLOCK] = block.try_into().expect("a whole block");
                push_first(out, block, len);
            }
            _ => out.extend_from_slice(&self.cached_ids[start..start + len]),
        }
    }
}

/// The most ids [`Scratch::push_cached`] copies as one block.
const CACHED_BLOCK: usize = 8;

/// Scratches that earlier calls filled, one for each call that ran at the same time as others (so as
/// many as the most threads that ever encoded at once). Each is bounded by the pool's [`CacheCap`].
#[allow(
    clippy::vec_box,
    reason = "a boxed scratch moves in and out of the pool as a pointer"
)]
pub(crate) struct ScratchPool {
    /// Boxed, so that taking one out and putting it back moves a pointer: moved by value, the few
    /// hundred bytes of a `Scratch` were copied twice a call, 5% of a short text's `encode`.
    idle: Mutex<Vec<Box<Scratch>>>,
    cap: CacheCap,
}

impl ScratchPool {
    /// An empty pool whose scratches have caches bounded by `cap`.
    pub(crate) fn new(cap: CacheCap) -> ScratchPool {
        ScratchPool {
            idle: Mutex::new(Vec::new()),
            cap,
        }
    }

    /// Runs `f` with a scratch from the pool (or a new one) fitted to `text_len` bytes, and returns the
    /// scratch to the pool. A scratch whose call panicked is dropped rather than returned, and so is
    /// one the pool has no room for. Fails, without calling `f`, when a new scratch cannot be allocated.
    ///
    /// The pool is never waited for: when its lock is taken, the call uses a new scratch and drops it
    /// at the end. A child process forked while another thread held the lock inherits it held by a
    /// thread that does not exist there, and waiting for it hung the child forever.
    pub(crate) fn with<T>(
        &self,
        text_len: usize,
        f: impl FnOnce(&mut Scratch) -> T,
    ) -> Result<T, AllocError> {
        let pooled = self.try_lock().and_then(|mut idle| idle.pop());
        let mut scratch = match pooled {
            Some(mut scratch) => {
                scratch.fit(text_len);
                scratch
            }
            None => try_box(Scratch::for_text(text_len, self.cap)?)?,
        };
        let result = f(&mut scratch);
        if let Some(mut idle) = self.try_lock() {
            let _ = try_push(&mut idle, scratch);
        }
        Ok(result)
    }

    /// The idle scratches, unless another thread holds them.
    #[allow(clippy::vec_box, reason = "see `ScratchPool::idle`")]
    fn try_lock(&self) -> Option<MutexGuard<'_, Vec<Box<Scratch>>>> {
        match self.idle.try_lock() {
            Ok(idle) => Some(idle),
            // The vector is only pushed and popped, which cannot leave it inconsistent.
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

impl std::fmt::Debug for ScratchPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.try_lock() {
            Some(idle) => write!(f, "ScratchPool({} idle)", idle.len()),
            None => write!(f, "ScratchPool(busy)"),
        }
    }
}

/// The most ids an entry holds; pieces of more tokens are left to the larger caches.
const MAX_IDS: usize = 3;

/// 32 bytes: two to a cache line.
#[derive(Clone, Copy, Default)]
struct Entry {
    lo: u64,
    hi: u64,
    /// The key's length (0 marks an empty entry) in the low byte, the number of ids above it.
    meta: u32,
    ids: [u32; MAX_IDS],
}

/// Pieces of [`SMALL_PIECE`] + 1 to 16 bytes seen recently (or, in [`Scratch::segments`], segments of
/// 3 to 16 bytes), and their ids.
pub(super) struct RecentPieces {
    entries: Vec<Entry>,
    mask: usize,
}

impl SizedByText for RecentPieces {
    /// Enough entries for a text of `text_len` bytes, at most 8,192 (256 KB) and at least 64.
    fn for_text(text_len: usize) -> Result<RecentPieces, AllocError> {
        let n = Self::entries_for(text_len);
        Ok(RecentPieces {
            entries: try_vec(Entry::default(), n)?,
            mask: n - 1,
        })
    }

    fn entries_for(text_len: usize) -> usize {
        (text_len / 8).next_power_of_two().clamp(64, 8192)
    }

    fn entries(&self) -> usize {
        self.entries.len()
    }
}

impl RecentPieces {
    /// Appends the ids of the piece `key` stands for to `out` and returns true, if it is here (without
    /// a branch on their number: [`push_first`]).
    #[inline(always)]
    pub(super) fn push_to(&self, key: &InlineKey, out: &mut Vec<u32>) -> bool {
        // SAFETY: `mask` is the entries' number (a power of two) minus one.
        let e = unsafe { self.entries.get_unchecked(key.hash as usize & self.mask) };
        if !(e.lo == key.lo && e.hi == key.hi && e.meta & 0xFF == key.len) {
            return false;
        }
        push_first(out, &e.ids, (e.meta >> 8) as usize);
        true
    }

    /// Records that the piece `key` stands for encodes to `ids`, if they fit an entry.
    #[inline(always)]
    pub(super) fn insert(&mut self, key: &InlineKey, ids: &[u32]) {
        if ids.len() > MAX_IDS {
            return;
        }
        let e = &mut self.entries[key.hash as usize & self.mask];
        e.lo = key.lo;
        e.hi = key.hi;
        e.meta = key.len | (ids.len() as u32) << 8;
        // Element by element: a copy of a slice of unknown length is a call to memcpy.
        for (slot, &id) in e.ids.iter_mut().zip(ids) {
            *slot = id;
        }
    }
}

/// The longest piece [`SmallPieces`] holds: its key is one word, the length in the top byte.
pub(super) const SMALL_PIECE: usize = SMALL_KEY;

/// At most this many entries in [`SmallPieces`] (256 KB).
const SMALL_ENTRIES: usize = 16384;

/// The second id of an entry of one id. No token has it: ids stay below the number of tokens plus
/// `MAX_ID_GAP` (`Encoder::new` checks), far below `u32::MAX`.
const NO_ID: u32 = u32::MAX;

/// The [`InlineKey`] of the piece whose [`small_key`](crate::bytes_map::small_key) is `key`: its
/// bytes, the length taken off.
#[inline(always)]
pub(super) fn inline_key_of(key: u64) -> InlineKey {
    InlineKey::of_word(key & (u64::MAX >> 8), (key >> 56) as usize)
}

/// 16 bytes: four to a cache line.
#[derive(Clone, Copy)]
struct SmallEntry {
    /// The piece's [`small_key`](crate::bytes_map::small_key); 0 in an empty entry.
    key: u64,
    /// Its ids, the second [`NO_ID`] when there is one.
    ids: [u32; 2],
}

/// Pieces of up to [`SMALL_PIECE`] bytes seen recently, and their ids when they are one or two.
pub(super) struct SmallPieces {
    entries: Vec<SmallEntry>,
    /// 64 minus log2 of the number of entries: the slot is the top bits of a product.
    shift: u32,
}

impl SizedByText for SmallPieces {
    /// Enough entries for a text of `text_len` bytes, from 64 to [`SMALL_ENTRIES`].
    fn for_text(text_len: usize) -> Result<SmallPieces, AllocError> {
        let n = Self::entries_for(text_len);
        let empty = SmallEntry {
            key: 0,
            ids: [NO_ID; 2],
        };
        Ok(SmallPieces {
            entries: try_vec(empty, n)?,
            shift: 64 - n.trailing_zeros(),
        })
    }

    fn entries_for(text_len: usize) -> usize {
        (text_len / 8).next_power_of_two().clamp(64, SMALL_ENTRIES)
    }

    fn entries(&self) -> usize {
        self.entries.len()
    }
}

impl SmallPieces {
    /// Fibonacci hashing: the top bits of the product depend on every byte of the key.
    #[inline(always)]
    fn slot(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Appends the ids of the piece whose key is `key` to `out` and returns true, if it is here (without
    /// a branch on their number: [`push_first`]).
    #[inline(always)]
    pub(super) fn push_to(&self, key: u64, out: &mut Vec<u32>) -> bool {
        // SAFETY: a slot is the top `64 - shift` bits of a word, below the entries' number,
        // `1 << (64 - shift)`.
        let e = unsafe { self.entries.get_unchecked(self.slot(key)) };
        if e.key != key {
            return false;
        }
        push_first(out, &e.ids, 1 + (e.ids[1] != NO_ID) as usize);
        true
    }

    /// Records that the piece whose key is `key` encodes to `ids`, if they are one or two.
    #[inline(always)]
    pub(super) fn insert(&mut self, key: u64, ids: &[u32]) {
        let ids = match *ids {
            [a] => [a, NO_ID],
            [a, b] => [a, b],
            _ => return,
        };
        let slot = self.slot(key);
        self.entries[slot] = SmallEntry { key, ids };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes_map::small_key;

    /// [`small_key`](crate::bytes_map::small_key), its piece checked to be in `text`.
    fn key_at(text: &[u8], start: usize, len: usize) -> u64 {
        assert!(start + len <= text.len());
        // SAFETY: checked above.
        unsafe { small_key(text, start, len) }
    }

    #[test]
    fn tables_grow_with_all_the_text_seen() {
        let mut scratch = Scratch::for_text(100, CacheCap::CALL).unwrap();
        assert_eq!(scratch.recent.entries(), RecentPieces::entries_for(100));
        assert_eq!(scratch.small.entries(), SmallPieces::entries_for(100));
        // Many short texts add up: after 1 MB in 1 KB calls the tables are full size.
        for _ in 0..1024 {
            scratch.fit(1024);
        }
        assert_eq!(
            scratch.recent.entries(),
            RecentPieces::entries_for(usize::MAX)
        );
        assert_eq!(
            scratch.merge_cache.entries(),
            MergeCache::entries_for(usize::MAX)
        );
        assert_eq!(scratch.small.entries(), SMALL_ENTRIES);
    }

    #[test]
    fn a_worker_gets_the_least_of_the_small_pieces_its_table_holds() {
        const { assert!(SMALL_PIECE <= super::super::batch::TABLE_PIECE) };
        let table = PieceTable::for_workers(32, true).unwrap();
        for shared in [Some(&table), None] {
            let worker = Scratch::for_worker(4 << 20, 0, shared).unwrap();
            assert_eq!(worker.small.entries(), SmallPieces::entries_for(0));
            assert_eq!(worker.recent.entries(), RecentPieces::entries_for(4 << 20));
            let sets = worker.batched.as_ref().unwrap().sets();
            assert_eq!(sets, if shared.is_some() { 32 } else { 1 << 19 });
        }
    }

    #[test]
    fn pool_reuses_one_scratch_per_concurrent_call() {
        let pool = ScratchPool::new(CacheCap::STREAM);
        pool.with(10, |s| s.cached_ids.push(7)).unwrap();
        // The next call gets the scratch the first one filled.
        pool.with(10, |s| assert_eq!(s.cached_ids, [7])).unwrap();
        assert_eq!(pool.try_lock().unwrap().len(), 1);
        // A call made while another holds the scratch gets a new one; both come back.
        pool.with(10, |_| {
            pool.with(10, |inner| assert!(inner.cached_ids.is_empty()))
        })
        .unwrap()
        .unwrap();
        assert_eq!(pool.try_lock().unwrap().len(), 2);
    }

    #[test]
    fn a_held_pool_is_not_waited_for() {
        let pool = ScratchPool::new(CacheCap::STREAM);
        pool.with(10, |s| s.cached_ids.push(7)).unwrap();
        // As in a forked child whose parent had a thread inside the lock: a new scratch, and the pool
        // is left as it was.
        let held = pool.idle.lock().unwrap();
        pool.with(10, |s| assert!(s.cached_ids.is_empty())).unwrap();
        assert_eq!(held.len(), 1);
    }

    /// The ids `recent` appends for `key`, if it holds them, to a vector with room for `room` more.
    fn get(recent: &RecentPieces, key: &InlineKey, room: usize) -> Option<Vec<u32>> {
        let mut out = vec![7, 8];
        out.reserve_exact(room);
        let found = recent.push_to(key, &mut out);
        assert_eq!(out[..2], [7, 8], "the ids already there are kept");
        found.then(|| out[2..].to_vec())
    }

    #[test]
    fn appends_only_the_pieces_ids_with_or_without_room_for_a_whole_entry() {
        let mut recent = RecentPieces::for_text(0).unwrap();
        let key = InlineKey::new(b" hello");
        for ids in [&[5][..], &[5, 6], &[5, 6, 7]] {
            recent.insert(&key, ids);
            for room in [ids.len(), MAX_IDS, 100] {
                assert_eq!(
                    get(&recent, &key, room).as_deref(),
                    Some(ids),
                    "room {room}"
                );
            }
        }
    }

    #[test]
    fn small_keys_read_in_place_equal_keys_of_padded_copies_and_differ_by_length() {
        let text: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(97)).collect();
        for start in 0..text.len() {
            for len in 1..=SMALL_PIECE.min(text.len() - start) {
                let mut padded = [0u8; 8];
                padded[..len].copy_from_slice(&text[start..start + len]);
                let expected = u64::from_le_bytes(padded) | (len as u64) << 56;
                assert_eq!(key_at(&text, start, len), expected, "{start} {len}");
            }
        }
        // The key of the large maps made from it is the key of the piece's bytes.
        for start in 0..text.len() {
            for len in 1..=SMALL_PIECE.min(text.len() - start) {
                let (a, b) = (
                    inline_key_of(key_at(&text, start, len)),
                    InlineKey::new(&text[start..start + len]),
                );
                assert_eq!((a.lo, a.hi, a.len, a.hash), (b.lo, b.hi, b.len, b.hash));
            }
        }
        // A piece and the same piece with a zero byte after it are different pieces.
        assert_ne!(key_at(b"a\0", 0, 1), key_at(b"a\0", 0, 2));
        assert_ne!(key_at(b"\0", 0, 1), 0);
    }

    #[test]
    fn small_pieces_keep_one_or_two_ids_until_evicted() {
        let mut small = SmallPieces::for_text(0).unwrap();
        let get = |small: &SmallPieces, key: u64, room: usize| {
            let mut out = vec![7];
            out.reserve_exact(room);
            let found = small.push_to(key, &mut out);
            assert_eq!(out[0], 7, "the ids already there are kept");
            found.then(|| out[1..].to_vec())
        };
        let (a, b) = (key_at(b" a", 0, 2), key_at(b"\xe4\xb8\xad", 0, 3));
        assert_eq!(get(&small, a, 2), None);
        for ids in [&[5][..], &[5, 6]] {
            small.insert(a, ids);
            for room in [ids.len(), 2, 100] {
                assert_eq!(get(&small, a, room).as_deref(), Some(ids), "room {room}");
            }
        }
        small.insert(b, &[1, 2, 3]);
        assert_eq!(get(&small, b, 10), None, "three ids are not kept");
        small.insert(b, &[4]);
        assert_eq!(get(&small, b, 10), Some(vec![4]));
        if small.slot(a) != small.slot(b) {
            assert_eq!(get(&small, a, 10), Some(vec![5, 6]));
        }
        // An empty entry matches no key: keys are never 0.
        assert_eq!(
            get(&SmallPieces::for_text(0).unwrap(), key_at(b"\0", 0, 1), 2),
            None
        );
    }

    #[test]
    fn returns_what_was_inserted_until_evicted() {
        let mut recent = RecentPieces::for_text(0).unwrap();
        let get = |recent: &RecentPieces, key: &InlineKey| get(recent, key, 0);
        let (a, b) = (
            InlineKey::new(b" the"),
            InlineKey::new(" th\u{435}".as_bytes()),
        );
        assert!(get(&recent, &a).is_none());
        recent.insert(&a, &[262]);
        recent.insert(&b, &[262, 16843, 113]);
        assert_eq!(get(&recent, &b), Some(vec![262, 16843, 113]));
        if a.hash as usize & recent.mask != b.hash as usize & recent.mask {
            assert_eq!(get(&recent, &a), Some(vec![262]));
        }
        recent.insert(&a, &[1, 2, 3, 4]);
        assert_ne!(get(&recent, &a), Some(vec![1, 2, 3, 4]));
        // An empty entry matches no key: lengths are at least 1.
        assert!(get(&recent, &InlineKey::new(b"\0")).is_none());
    }
}
