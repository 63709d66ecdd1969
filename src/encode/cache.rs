//! [`Scratch`]: the encoder's per-thread buffers and caches, and [`ScratchPool`], which keeps them
//! between calls.
//!
//! Encoding a text fills caches (recent pieces, merged pieces, pair answers) that make the rest of the
//! text fast. A tokenizer is usually called once per document, thousands of times, and a fresh scratch
//! per call started every document cold: every word was looked up in the large vocabulary table again
//! and every multi-token word merged again. The pool hands each call a scratch an earlier call filled:
//! encoding prose one 1 KB document per call went from 34 to 52 MB/s, and `encode_batch` of the same
//! documents from 29 to 64 MB/s (one core).

use std::sync::{Mutex, MutexGuard, TryLockError};

use crate::bytes_map::BytesMap;
use crate::encode::merge::LongMerge;
use crate::encode::recent::RecentPieces;
use crate::encode::table::RecentPairs;
use crate::encode::LONG_PIECE;
use crate::error::{try_push, try_reserve, AllocError};

/// How many multi-token pieces a scratch's cache holds, and how many ids in all, before it starts over.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CacheCap {
    pub(crate) pieces: usize,
    pub(crate) ids: usize,
}

impl CacheCap {
    /// For `encode` and `encode_file`. 20 MB of prose has ~66K distinct pieces that are not one token
    /// (CJK-heavy text ~107K): at 16K entries the cache kept starting over, and 128K took encoding from
    /// 2.42G to 2.23G instructions on prose and 1.16G to 0.95G on CJK-heavy text (callgrind); 80K made
    /// CJK-heavy text 27% slower. About 13 MB when full (only pieces shorter than `LONG_PIECE` are
    /// cached, so however long-tailed the text).
    pub(crate) const CALL: CacheCap = CacheCap {
        pieces: 1 << 17,
        ids: 1 << 20,
    };

    /// For streams (`encode_prefix`), whose growth in memory must stay small: with [`Self::CALL`] a
    /// stream of prose grew RSS by 22 MB. About 1.5 MB when full.
    pub(crate) const STREAM: CacheCap = CacheCap {
        pieces: 1 << 14,
        ids: 1 << 17,
    };
}

/// State reused across the pieces of one call, and between calls: buffers of the merge loops, the
/// recent pieces, the pair answers, and a bounded cache of multi-token pieces (their ids end to end in
/// `cached_ids`), since words that are not one token recur. Used by one thread at a time.
pub(crate) struct Scratch {
    pub(crate) symbols: Vec<u32>,
    pub(crate) ranks: Vec<(u32, u32)>,
    pub(crate) pairs: RecentPairs,
    pub(crate) recent: RecentPieces,
    pub(crate) cache: BytesMap<(u32, u32)>,
    pub(crate) cached_ids: Vec<u32>,
    pub(crate) long: LongMerge,
    /// Bounds `cache` and `cached_ids`.
    pub(crate) cap: CacheCap,
    /// Bytes of text encoded with this scratch, which its small tables are sized by.
    seen: usize,
}

impl Scratch {
    /// Sized for texts of about `text_len` bytes, its cache bounded by `cap`; fails when its tables
    /// cannot be allocated (up to 600 KB).
    pub(crate) fn for_text(text_len: usize, cap: CacheCap) -> Result<Scratch, AllocError> {
        let (mut symbols, mut ranks) = (Vec::new(), Vec::new());
        // The short merge loop's buffers at their largest, so that merging never allocates.
        try_reserve(&mut symbols, LONG_PIECE)?;
        try_reserve(&mut ranks, LONG_PIECE)?;
        Ok(Scratch {
            symbols,
            ranks,
            pairs: RecentPairs::for_text(text_len)?,
            recent: RecentPieces::for_text(text_len)?,
            cache: BytesMap::default(),
            cached_ids: Vec::new(),
            long: LongMerge::default(),
            cap,
            seen: text_len,
        })
    }

    /// Grows the direct-mapped tables for `text_len` more bytes of text: they are sized by all the
    /// text this scratch has encoded, so that a short text does not pay to clear large tables while a
    /// long one, or many short ones, get full-sized tables. A table that cannot be allocated keeps its
    /// size: they are caches, and only speed depends on their size.
    pub(crate) fn fit(&mut self, text_len: usize) {
        self.seen = self.seen.saturating_add(text_len);
        if RecentPieces::entries_for(self.seen) > self.recent.entries() {
            if let Ok(recent) = RecentPieces::for_text(self.seen) {
                self.recent = recent;
            }
        }
        if RecentPairs::entries_for(self.seen) > self.pairs.entries() {
            if let Ok(pairs) = RecentPairs::for_text(self.seen) {
                self.pairs = pairs;
            }
        }
    }

    /// Appends the cached ids at `(start, len)` of `cached_ids`.
    #[inline]
    pub(crate) fn push_cached(&self, (start, len): (u32, u32), out: &mut Vec<u32>) {
        out.extend_from_slice(&self.cached_ids[start as usize..(start + len) as usize]);
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
            scratch.pairs.entries(),
            RecentPairs::entries_for(usize::MAX)
        );
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
}
