//! The encoder's caches, kept per thread and between calls: [`Scratch`] (the buffers and caches of one
//! thread's encoding), [`ScratchPool`] (scratches kept between calls), [`RecentPieces`] and
//! [`MergedPieces`].
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
//! [`MergedPieces`] holds pieces that are not one token, with their ids, so that a word is merged once
//! rather than each time it comes. Web text has millions of distinct such words in a Zipf distribution,
//! far more than the cache holds, so what it keeps matters: it keeps two generations, and when the
//! young one is full the old one is dropped and the young one becomes old. A piece found in the old
//! generation is copied into the young one, so a piece that recurs stays however many rare pieces come
//! between, where a cache that started over when full lost the common ones with the rare. Up to three
//! ids are kept in the map's slot itself (a slot is 32 bytes either way), so a hit is one load, not two.
//!
//! Invariants: a scratch holds ids of one encoder and is only used with it; the caches are bounded
//! ([`CacheCap`], fixed-size tables), so memory does not grow with the text; a cache that cannot grow
//! (out of memory) keeps nothing and only costs time.

use std::sync::{Mutex, MutexGuard, TryLockError};

use super::merge::{LongMerge, ShortMerge};
use super::table::MergeCache;
use crate::bytes_map::{BytesMap, InlineKey};
use crate::error::{try_push, try_reserve, try_vec, AllocError};

/// How many multi-token pieces each generation of a scratch's [`MergedPieces`] holds, and how many ids
/// of pieces of more than three tokens, before it becomes the old one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheCap {
    pub(super) pieces: usize,
    pub(super) ids: usize,
}

impl CacheCap {
    /// For `encode`, `encode_file` and `encode_dataset`: room for the distinct multi-token pieces of
    /// tens of megabytes of prose or CJK-heavy text in each generation. 5/8 of a power of two, the most
    /// a map's slots hold before they double: about 17 MB for both generations when full (only pieces
    /// shorter than `LONG_PIECE` are cached, so however long-tailed the text).
    pub(crate) const CALL: CacheCap = CacheCap {
        pieces: 5 << 15,
        ids: 1 << 18,
    };

    /// For streams (`encode_prefix`), whose growth in memory must stay small. About 1 MB when full.
    pub(crate) const STREAM: CacheCap = CacheCap {
        pieces: 5 << 11,
        ids: 1 << 14,
    };
}

/// State reused across the pieces of one call, and between calls: buffers of the merge loops, the
/// recent pieces, the merge table's recent answers, and a bounded cache of multi-token pieces, since
/// words that are not one token recur. Used by one thread at a time.
pub(crate) struct Scratch {
    pub(super) short: ShortMerge,
    pub(super) long: LongMerge,
    pub(super) merge_cache: MergeCache,
    pub(super) recent: RecentPieces,
    pub(super) merged: MergedPieces,
    /// Bytes of text encoded with this scratch, which its small tables are sized by.
    seen: usize,
}

impl Scratch {
    /// Sized for texts of about `text_len` bytes, its cache bounded by `cap`; fails when its tables
    /// cannot be allocated (up to 600 KB).
    pub(crate) fn for_text(text_len: usize, cap: CacheCap) -> Result<Scratch, AllocError> {
        Ok(Scratch {
            short: ShortMerge::new()?,
            long: LongMerge::default(),
            merge_cache: MergeCache::for_text(text_len)?,
            recent: RecentPieces::for_text(text_len)?,
            merged: MergedPieces::new(cap),
            seen: text_len,
        })
    }

    /// Grows the direct-mapped tables for `text_len` more bytes of text: they are sized by all the
    /// text this scratch has encoded, so that a short text does not pay to clear large tables while a
    /// long one, or many short ones, get full-sized tables. A table that cannot be allocated keeps its
    /// size: they are caches, and only speed depends on their size.
    fn fit(&mut self, text_len: usize) {
        self.seen = self.seen.saturating_add(text_len);
        if RecentPieces::entries_for(self.seen) > self.recent.entries() {
            if let Ok(recent) = RecentPieces::for_text(self.seen) {
                self.recent = recent;
            }
        }
        if MergeCache::entries_for(self.seen) > self.merge_cache.entries() {
            if let Ok(merge_cache) = MergeCache::for_text(self.seen) {
                self.merge_cache = merge_cache;
            }
        }
    }
}

/// Scratches that earlier calls filled, one for each call that ran at the same time as others (so as
/// many as the most threads that ever encoded at once). Each is bounded by the pool's [`CacheCap`].
pub(crate) struct ScratchPool {
    idle: Mutex<Vec<Scratch>>,
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
            None => Scratch::for_text(text_len, self.cap)?,
        };
        let result = f(&mut scratch);
        if let Some(mut idle) = self.try_lock() {
            let _ = try_push(&mut idle, scratch);
        }
        Ok(result)
    }

    /// The idle scratches, unless another thread holds them.
    fn try_lock(&self) -> Option<MutexGuard<'_, Vec<Scratch>>> {
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

/// Marks an unused id of [`Ids`], and ids kept in [`Generation::spilled`] (no id is `u32::MAX`: ids
/// are at most `MAX_ID_GAP` past the number of tokens).
const NO_ID: u32 = u32::MAX;

/// A piece's ids as a map's value: up to three ids, the unused ones [`NO_ID`]; or `[NO_ID, start,
/// len]`, the ids at `start..start + len` of the generation's spilled ids.
#[derive(Clone, Copy)]
struct Ids([u32; 3]);

impl Default for Ids {
    fn default() -> Ids {
        Ids([NO_ID; 3])
    }
}

/// One generation of [`MergedPieces`].
#[derive(Default)]
struct Generation {
    map: BytesMap<Ids>,
    /// The ids of pieces of more than three tokens, end to end.
    spilled: Vec<u32>,
}

impl Generation {
    /// Appends the ids of `ids` to `out`.
    #[inline]
    fn push(&self, ids: Ids, out: &mut Vec<u32>) {
        match ids.0 {
            [NO_ID, start, len] => {
                out.extend_from_slice(&self.spilled[start as usize..(start + len) as usize])
            }
            [a, b, c] => {
                out.push(a);
                if b != NO_ID {
                    out.push(b);
                    if c != NO_ID {
                        out.push(c);
                    }
                }
            }
        }
    }

    fn clear(&mut self) {
        self.map.clear();
        self.spilled.clear();
    }
}

/// A piece as [`MergedPieces`] is asked about it: its bytes, and its key when it is at most
/// [`crate::bytes_map::INLINE`] bytes long.
#[derive(Clone, Copy)]
pub(super) struct PieceKey<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) inline: Option<&'a InlineKey>,
}

impl PieceKey<'_> {
    #[inline]
    fn get(&self, map: &BytesMap<Ids>) -> Option<Ids> {
        match self.inline {
            Some(key) => map.get_inline(key),
            None => map.get(self.bytes),
        }
    }
}

/// Pieces that are not one token, and their ids, in two generations (see the module docs), each
/// bounded by a [`CacheCap`].
pub(crate) struct MergedPieces {
    young: Generation,
    old: Generation,
    cap: CacheCap,
}

impl MergedPieces {
    fn new(cap: CacheCap) -> MergedPieces {
        MergedPieces {
            young: Generation::default(),
            old: Generation::default(),
            cap,
        }
    }

    /// Appends the ids of `piece` to `out` and returns true if it is here; a piece found in the old
    /// generation is kept in the young one too.
    #[inline(always)]
    pub(super) fn get(&mut self, piece: PieceKey<'_>, out: &mut Vec<u32>) -> bool {
        if let Some(ids) = piece.get(&self.young.map) {
            self.young.push(ids, out);
            return true;
        }
        let Some(ids) = piece.get(&self.old.map) else {
            return false;
        };
        let before = out.len();
        self.old.push(ids, out);
        self.insert(piece, &out[before..]);
        true
    }

    /// Keeps `ids` as the ids of `piece`, in the young generation, which first becomes the old one
    /// when it is full. A generation that cannot grow (out of memory) keeps nothing: it only saves
    /// time.
    pub(super) fn insert(&mut self, piece: PieceKey<'_>, ids: &[u32]) {
        let spills = ids.len() > 3;
        let young = &self.young;
        if young.map.len() >= self.cap.pieces
            || (spills && young.spilled.len() + ids.len() > self.cap.ids)
        {
            std::mem::swap(&mut self.young, &mut self.old);
            self.young.clear();
        }
        let young = &mut self.young;
        let value = if spills {
            let start = young.spilled.len();
            if try_reserve(&mut young.spilled, ids.len()).is_err() {
                return;
            }
            young.spilled.extend_from_slice(ids);
            Ids([NO_ID, start as u32, ids.len() as u32])
        } else {
            let mut value = Ids::default();
            value.0[..ids.len()].copy_from_slice(ids);
            value
        };
        let entry = match piece.inline {
            Some(key) => young.map.entry_inline(key),
            None => young.map.entry(piece.bytes),
        };
        if let Ok(entry) = entry {
            *entry = value;
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

/// Short pieces seen recently, and their ids.
pub(super) struct RecentPieces {
    entries: Vec<Entry>,
    mask: usize,
}

impl RecentPieces {
    /// Enough entries for a text of `text_len` bytes, at most 16384 (512 KB) and at least 64, so that
    /// a short text does not pay to clear a large table.
    pub(super) fn for_text(text_len: usize) -> Result<RecentPieces, AllocError> {
        let n = Self::entries_for(text_len);
        Ok(RecentPieces {
            entries: try_vec(Entry::default(), n)?,
            mask: n - 1,
        })
    }

    /// The number of entries [`Self::for_text`] gives a text of `text_len` bytes.
    pub(super) fn entries_for(text_len: usize) -> usize {
        (text_len / 8).next_power_of_two().clamp(64, 16384)
    }

    /// The number of entries.
    pub(super) fn entries(&self) -> usize {
        self.entries.len()
    }

    /// The ids of the piece `key` stands for, if it is here.
    #[inline(always)]
    pub(super) fn get(&self, key: &InlineKey) -> Option<&[u32]> {
        let e = &self.entries[key.hash as usize & self.mask];
        (e.lo == key.lo && e.hi == key.hi && e.meta & 0xFF == key.len)
            .then(|| &e.ids[..(e.meta >> 8) as usize])
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_grow_with_all_the_text_seen() {
        let mut scratch = Scratch::for_text(100, CacheCap::CALL).unwrap();
        assert_eq!(scratch.recent.entries(), RecentPieces::entries_for(100));
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
    }

    /// A piece of 20 bytes (longer than an inline key) that scratches are marked with.
    const MARK: PieceKey = PieceKey {
        bytes: b"marks a scratch used",
        inline: None,
    };

    fn marked(scratch: &mut Scratch) -> bool {
        scratch.merged.get(MARK, &mut Vec::new())
    }

    #[test]
    fn pool_reuses_one_scratch_per_concurrent_call() {
        let pool = ScratchPool::new(CacheCap::STREAM);
        pool.with(10, |s| s.merged.insert(MARK, &[7, 8])).unwrap();
        // The next call gets the scratch the first one filled.
        pool.with(10, |s| assert!(marked(s))).unwrap();
        assert_eq!(pool.try_lock().unwrap().len(), 1);
        // A call made while another holds the scratch gets a new one; both come back.
        pool.with(10, |_| pool.with(10, |inner| assert!(!marked(inner))))
            .unwrap()
            .unwrap();
        assert_eq!(pool.try_lock().unwrap().len(), 2);
    }

    #[test]
    fn a_held_pool_is_not_waited_for() {
        let pool = ScratchPool::new(CacheCap::STREAM);
        pool.with(10, |s| s.merged.insert(MARK, &[7, 8])).unwrap();
        // As in a forked child whose parent had a thread inside the lock: a new scratch, and the pool
        // is left as it was.
        let held = pool.idle.lock().unwrap();
        pool.with(10, |s| assert!(!marked(s))).unwrap();
        assert_eq!(held.len(), 1);
    }

    #[test]
    fn merged_pieces_keep_what_recurs_and_drop_what_does_not() {
        let cap = CacheCap {
            pieces: 40,
            ids: 64,
        };
        let mut merged = MergedPieces::new(cap);
        let words: Vec<Vec<u8>> = (0..1000).map(|i| format!("w{i}").into_bytes()).collect();
        let keys: Vec<InlineKey> = words.iter().map(|w| InlineKey::new(w)).collect();
        let key = |i: usize| PieceKey {
            bytes: &words[i],
            inline: (i % 2 == 0).then(|| &keys[i]),
        };
        // Word 0 recurs every 15 words; the others come once each, many generations of them.
        let ids =
            |i: usize| -> Vec<u32> { (0..=(i % 6) as u32).map(|k| 10 * i as u32 + k).collect() };
        merged.insert(key(0), &ids(0));
        for i in 1..1000 {
            merged.insert(key(i), &ids(i));
            if i % 15 == 0 {
                let mut out = vec![1];
                assert!(merged.get(key(0), &mut out), "word 0 lost by word {i}");
                assert_eq!(out[1..], ids(0));
            }
        }
        // The last words, of up to six ids (kept beside the map), come back as they went in.
        for i in 990..1000 {
            let mut out = Vec::new();
            assert!(merged.get(key(i), &mut out));
            assert_eq!(out, ids(i));
        }
        // An early word, seen once, was dropped.
        assert!(!merged.get(key(7), &mut Vec::new()));
        assert!(merged.young.map.len() <= cap.pieces && merged.old.map.len() <= cap.pieces);
        assert!(merged.young.spilled.len() <= cap.ids && merged.old.spilled.len() <= cap.ids);
    }

    #[test]
    fn returns_what_was_inserted_until_evicted() {
        let mut recent = RecentPieces::for_text(0).unwrap();
        let (a, b) = (
            InlineKey::new(b" the"),
            InlineKey::new(" th\u{435}".as_bytes()),
        );
        assert!(recent.get(&a).is_none());
        recent.insert(&a, &[262]);
        recent.insert(&b, &[262, 16843, 113]);
        assert_eq!(recent.get(&b), Some(&[262, 16843, 113][..]));
        if a.hash as usize & recent.mask != b.hash as usize & recent.mask {
            assert_eq!(recent.get(&a), Some(&[262][..]));
        }
        recent.insert(&a, &[1, 2, 3, 4]);
        assert_ne!(recent.get(&a), Some(&[1, 2, 3, 4][..]));
        // An empty entry matches no key: lengths are at least 1.
        assert!(recent.get(&InlineKey::new(b"\0")).is_none());
    }
}
