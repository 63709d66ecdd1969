//! [`RecentPieces`]: a small direct-mapped cache from short pre-tokens to their ids.
//!
//! Encoding looks every pre-token up in the vocabulary (and the pre-tokens that are not one token in a
//! cache of merged pieces). Those maps are large — GPT-2's vocabulary table is 3 MB — and words come in
//! a Zipf distribution, so the lookups of a text are spread over the whole table and most of them wait
//! for memory: profiling put about 40% of the encoder's time on the load of the first probed slot. A
//! table of 16384 recently seen pieces, the size of L2, answers most lookups (the few thousand most
//! common words are most of any text); a miss costs one more load before the large maps. Measured
//! against 4096 and 65536 entries, 16384 was fastest on prose and CJK-heavy text and equal on code.
//!
//! Direct-mapped: a piece has one slot, chosen by its hash, and a new piece evicts the old one. No
//! probing, no eviction bookkeeping; collisions only cost hit rate.

use crate::bytes_map::InlineKey;
use crate::error::{try_vec, AllocError};

/// The most ids an entry holds; pieces of more tokens are left to the larger caches.
pub const MAX_IDS: usize = 3;

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
pub struct RecentPieces {
    entries: Vec<Entry>,
    mask: usize,
}

impl RecentPieces {
    /// Enough entries for a text of `text_len` bytes, at most 16384 (512 KB) and at least 64, so that
    /// a short text does not pay to clear a large table.
    pub fn for_text(text_len: usize) -> Result<RecentPieces, AllocError> {
        let n = Self::entries_for(text_len);
        Ok(RecentPieces {
            entries: try_vec(Entry::default(), n)?,
            mask: n - 1,
        })
    }

    /// The number of entries [`Self::for_text`] gives a text of `text_len` bytes.
    pub fn entries_for(text_len: usize) -> usize {
        (text_len / 8).next_power_of_two().clamp(64, 16384)
    }

    /// The number of entries.
    pub fn entries(&self) -> usize {
        self.entries.len()
    }

    /// The ids of the piece `key` stands for, if it is here.
    #[inline(always)]
    pub fn get(&self, key: &InlineKey) -> Option<&[u32]> {
        let e = &self.entries[key.hash as usize & self.mask];
        (e.lo == key.lo && e.hi == key.hi && e.meta & 0xFF == key.len)
            .then(|| &e.ids[..(e.meta >> 8) as usize])
    }

    /// Records that the piece `key` stands for encodes to `ids`, if they fit an entry.
    #[inline(always)]
    pub fn insert(&mut self, key: &InlineKey, ids: &[u32]) {
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
