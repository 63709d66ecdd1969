//! [`BytesMap`]: a hash map from byte strings to small values, with short keys stored inline.
//!
//! Encoding's hot loop looks pre-tokens up by their bytes, in the vocabulary and in its caches. With a
//! general map of boxed keys each lookup is a probe, a pointer chase to the key and a `memcmp` call, a
//! large share of encoding's work. Nearly all
//! pre-tokens and tokens are at most 16 bytes, so this map stores such keys
//! inline as two zero-padded 8-byte words and a length ([`InlineKey`]). A lookup is two loads of the
//! key, a multiply and a linear probe comparing two words and a length, in one slot array. Longer keys
//! (and the empty key) go to an ordinary map.
//!
//! Beside the slots, an array of 2-byte tags (bits of each key's hash; 0 for an empty slot) answers
//! most lookups of absent keys without touching the slots: GPT-2's vocabulary table is 3 MB of slots
//! but 256 KB of tags, which stay in L2. Encoding asks the vocabulary about every piece it has not seen
//! recently, and for the pieces that are not one token the answer is "absent"; with the tags, such a
//! piece waits on one large table (the cache of merged pieces) instead of two.
//!
//! Every allocation of the map is fallible ([`AllocError`]): the map grows with the input (the cache of
//! merged pieces), and an allocation that fails must become an error, not abort the process.
//!
//! Invariants: a key is stored once, inline when it has 1 to [`INLINE`] bytes and in the ordinary map
//! otherwise; a slot is empty exactly when its tag is 0.

use std::collections::HashMap;

use crate::error::{try_vec, AllocError};
use crate::prefetch::prefetch;

/// The standard hash map with a fast hasher, for the crate's maps of short keys (ids, pairs of ids).
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The longest key stored inline.
pub const INLINE: usize = 16;

#[derive(Clone, Copy, Debug, Default)]
struct Slot<V> {
    lo: u64,
    hi: u64,
    len: u32,
    value: V,
}

/// Byte strings to `V`. Iteration order is unspecified.
#[derive(Clone, Debug)]
pub struct BytesMap<V> {
    slots: Vec<Slot<V>>,
    /// `tags[i]` is the [`InlineKey::tag`] of the key in `slots[i]`, or 0 when the slot is empty (what
    /// an empty slot holds otherwise is never read).
    tags: Vec<u16>,
    mask: usize,
    inline_len: usize,
    long: FastMap<Box<[u8]>, V>,
}

/// A key of 1 to [`INLINE`] bytes as the map stores it: its bytes as two little-endian words, zero-padded
/// (bytes 0..8 in `lo`, 8..16 in `hi`), its length, and its hash. A key is computed once and serves
/// every lookup of the same bytes, here and in the encoder's cache of recent pieces.
#[derive(Clone, Copy, Debug)]
pub struct InlineKey {
    pub lo: u64,
    pub hi: u64,
    pub len: u32,
    pub hash: u64,
}

/// `MASK[n]` keeps the low `n` bytes of a word.
const MASK: [u64; 9] = {
    let mut m = [0u64; 9];
    let mut n = 1;
    while n < 9 {
        m[n] = u64::MAX >> (64 - 8 * n);
        n += 1;
    }
    m
};

impl InlineKey {
    /// Whether `self` and `other` are the keys of the same bytes.
    #[inline(always)]
    pub fn same_bytes(&self, other: &InlineKey) -> bool {
        self.lo == other.lo && self.hi == other.hi && self.len == other.len
    }

    fn from_words(lo: u64, hi: u64, len: usize) -> InlineKey {
        // A folded multiply (as in foldhash): the 128-bit product mixes every input bit into both halves.
        let x = (lo ^ 0x243F_6A88_85A3_08D3) as u128
            * (hi ^ (len as u64) << 56 ^ 0x1319_8A2E_0370_7344) as u128;
        InlineKey {
            lo,
            hi,
            len: len as u32,
            hash: (x as u64) ^ (x >> 64) as u64,
        }
    }

    /// The key of `bytes`, which must be 1 to [`INLINE`] bytes long. Loads whole words where it can
    /// (a copy into a padded buffer would be a `memcpy` call per key, in counting's inner loop).
    #[inline]
    pub fn new(bytes: &[u8]) -> InlineKey {
        let n = bytes.len();
        debug_assert!((1..=INLINE).contains(&n));
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let half = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as u64;
        let (lo, hi) = if n >= 8 {
            // Bytes 8.. are the top n - 8 bytes of the last word.
            (
                word(0),
                if n > 8 {
                    word(n - 8) >> (8 * (16 - n))
                } else {
                    0
                },
            )
        } else if n >= 4 {
            // Bytes 4.. are the top n - 4 bytes of the last half-word.
            (half(0) | (half(n - 4) >> (8 * (8 - n))) << 32, 0)
        } else {
            let b = |i: usize| (bytes[i] as u64) << (8 * i);
            (b(0) | b(n / 2) | b(n - 1), 0)
        };
        InlineKey::from_words(lo, hi, n)
    }

    /// The key of the `len` bytes (1 to 8) held in the low bytes of `word`, whose other bytes are 0:
    /// equal to `InlineKey::new` of those bytes, without reading them again.
    #[inline(always)]
    pub fn of_word(word: u64, len: usize) -> InlineKey {
        debug_assert!((1..=8).contains(&len) && word & !MASK[len] == 0);
        InlineKey::from_words(word, 0, len)
    }

    /// The key of `text[start..start + len]` (`len` from 1 to [`INLINE`]), equal to
    /// `InlineKey::new(&text[start..start + len])`. Where 16 bytes of `text` follow `start` it is two
    /// loads and two masks, with no branch on the length: the encoder computes one for nearly every
    /// pre-token, and pre-token lengths are too irregular for a branch on them to be predicted.
    ///
    /// # Safety
    ///
    /// `start + len` must be at most `text.len()`, so that `start + 16` cannot overflow: the check
    /// `text.get(start..start + 16)` makes of it costs instructions on each of the encoder's pieces.
    #[inline(always)]
    pub unsafe fn at(text: &[u8], start: usize, len: usize) -> InlineKey {
        debug_assert!((1..=INLINE).contains(&len) && start + len <= text.len());
        if start + INLINE <= text.len() {
            // SAFETY: the 16 bytes from `start` are in `text`.
            let [lo, hi] = unsafe {
                let at = text.as_ptr().add(start).cast::<u64>();
                [at.read_unaligned(), at.add(1).read_unaligned()]
            };
            InlineKey::from_words(
                u64::from_le(lo) & MASK[len.min(8)],
                u64::from_le(hi) & MASK[len.saturating_sub(8)],
                len,
            )
        } else {
            InlineKey::new(&text[start..start + len])
        }
    }

    /// The top bits of the hash (the slot comes from the bottom ones), never 0.
    #[inline(always)]
    fn tag(&self) -> u16 {
        (self.hash >> 48) as u16 | 1
    }
}

/// The longest piece a [`small_key`] holds: its bytes fill a word but for the top byte, its length.
pub(crate) const SMALL_KEY: usize = 7;

/// The key of the piece `text[start..start + len]` (`len` from 1 to [`SMALL_KEY`]): its bytes in the
/// low bytes of a word, its length in the top byte, so never 0. One load where 8 bytes of `text`
/// follow `start` (all but the last few pieces of a text).
///
/// # Safety
///
/// `start + len` must be at most `text.len()`, so that `start + 8` cannot overflow: the check
/// `text.get(start..start + 8)` makes of it took 9 instructions a piece, where this takes 3.
#[inline(always)]
pub(crate) unsafe fn small_key(text: &[u8], start: usize, len: usize) -> u64 {
    debug_assert!((1..=SMALL_KEY).contains(&len) && start + len <= text.len());
    let word = if start + 8 <= text.len() {
        // SAFETY: the 8 bytes from `start` are in `text`.
        unsafe { text.as_ptr().add(start).cast::<u64>().read_unaligned() }.to_le()
    } else {
        let mut word = [0u8; 8];
        word[..len].copy_from_slice(&text[start..start + len]);
        u64::from_le_bytes(word)
    };
    word & (u64::MAX >> (64 - 8 * len)) | (len as u64) << 56
}

/// The fewest slots a map has.
const MIN_SLOTS: usize = 16;

impl<V: Copy + Default> BytesMap<V> {
    /// A map with room for `n` keys of at most [`INLINE`] bytes before it grows.
    pub fn with_capacity(n: usize) -> Result<Self, AllocError> {
        // At most 5/8 full, so probes stay short.
        let capacity = (n.saturating_mul(8) / 5 + 1)
            .checked_next_power_of_two()
            .ok_or(AllocError::of::<Slot<V>>(n))?
            .max(MIN_SLOTS);
        Ok(BytesMap {
            slots: try_vec(Slot::default(), capacity)?,
            tags: try_vec(0, capacity)?,
            mask: capacity - 1,
            inline_len: 0,
            long: FastMap::default(),
        })
    }

    /// The slot holding `key`, or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, key: &InlineKey) -> usize {
        let tag = key.tag();
        let mut i = key.hash as usize & self.mask;
        loop {
            let t = self.tags[i];
            if t == 0 {
                return i;
            }
            if t == tag {
                let s = &self.slots[i];
                if s.len == key.len && s.lo == key.lo && s.hi == key.hi {
                    return i;
                }
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Starts loading the tag and the slot where a lookup of `key` begins, so that a lookup made after
    /// another one that waits on memory does not wait again.
    #[inline(always)]
    pub fn prefetch(&self, key: &InlineKey) {
        let i = key.hash as usize & self.mask;
        prefetch(self.tags.as_ptr().wrapping_add(i));
        prefetch(self.slots.as_ptr().wrapping_add(i));
    }

    /// The value of `key`, if present. Always inlined: the encoder looks up segments of CJK words with
    /// it, once per segment, where a call costs as much as the lookup.
    #[inline(always)]
    pub fn get(&self, key: &[u8]) -> Option<V> {
        let n = key.len();
        if n > INLINE || n == 0 {
            return self.long.get(key).copied();
        }
        self.get_inline(&InlineKey::new(key))
    }

    /// The value of the key `key` stands for, if present.
    #[inline]
    pub fn get_inline(&self, key: &InlineKey) -> Option<V> {
        let i = self.find(key);
        (self.tags[i] != 0).then(|| self.slots[i].value)
    }

    /// The value of `key`, inserted as `V::default()` first if absent; fails, leaving the map as it
    /// was, when the map cannot grow.
    #[inline]
    pub fn entry(&mut self, key: &[u8]) -> Result<&mut V, AllocError> {
        let n = key.len();
        if n > INLINE || n == 0 {
            if !self.long.contains_key(key) {
                self.long
                    .try_reserve(1)
                    .map_err(|_| AllocError::of::<(Box<[u8]>, V)>(self.long.len() + 1))?;
                let mut owned = Vec::new();
                owned
                    .try_reserve_exact(n)
                    .map_err(|_| AllocError::of::<u8>(n))?;
                owned.extend_from_slice(key);
                self.long.insert(owned.into_boxed_slice(), V::default());
            }
            return Ok(self.long.get_mut(key).expect("inserted above"));
        }
        self.entry_inline(&InlineKey::new(key))
    }

    /// [`Self::entry`] for the key `key` stands for.
    #[inline]
    pub fn entry_inline(&mut self, key: &InlineKey) -> Result<&mut V, AllocError> {
        let mut i = self.find(key);
        if self.tags[i] == 0 {
            if (self.inline_len + 1) * 8 > self.slots.len() * 5 {
                self.grow()?;
                i = self.find(key);
            }
            self.tags[i] = key.tag();
            self.slots[i] = Slot {
                lo: key.lo,
                hi: key.hi,
                len: key.len,
                value: V::default(),
            };
            self.inline_len += 1;
        }
        Ok(&mut self.slots[i].value)
    }

    /// Doubles the slots; fails, leaving the map as it was, when they cannot be allocated.
    #[cold]
    fn grow(&mut self) -> Result<(), AllocError> {
        let n = self.slots.len() * 2;
        let (slots, tags) = (try_vec(Slot::default(), n)?, try_vec(0, n)?);
        let old_slots = std::mem::replace(&mut self.slots, slots);
        let old_tags = std::mem::replace(&mut self.tags, tags);
        self.mask = n - 1;
        for (s, _) in old_slots.into_iter().zip(old_tags).filter(|&(_, t)| t != 0) {
            let key = InlineKey::from_words(s.lo, s.hi, s.len as usize);
            let i = self.find(&key);
            self.tags[i] = key.tag();
            self.slots[i] = s;
        }
        Ok(())
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.inline_len + self.long.len()
    }

    /// Removes every key, keeping the allocation.
    pub fn clear(&mut self) {
        self.tags.fill(0);
        self.inline_len = 0;
        self.long.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_exactly_what_was_inserted() {
        let keys: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| {
                let len = (i as usize * 7) % 24;
                (0..len).map(|k| (i as usize * 31 + k * 17) as u8).collect()
            })
            .collect();
        let mut map: BytesMap<u64> = BytesMap::with_capacity(0).unwrap();
        let mut reference: HashMap<Vec<u8>, u64> = HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            *map.entry(k).unwrap() += i as u64;
            *reference.entry(k.clone()).or_default() += i as u64;
        }
        assert_eq!(map.len(), reference.len());
        for (k, &v) in &reference {
            assert_eq!(map.get(k), Some(v));
            // Same length with one byte changed, and one byte shorter: present only if inserted.
            if !k.is_empty() {
                let mut other = k.clone();
                other[k.len() / 2] ^= 0x80;
                assert_eq!(map.get(&other), reference.get(&other).copied());
                assert_eq!(
                    map.get(&k[..k.len() - 1]),
                    reference.get(&k[..k.len() - 1]).copied()
                );
            }
        }
        map.clear();
        assert!(map.len() == 0 && map.get(&keys[5]).is_none());
    }

    #[test]
    fn keys_read_in_place_equal_keys_of_slices() {
        let text: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(97) | 1).collect();
        for start in 0..text.len() {
            for len in 1..=INLINE.min(text.len() - start) {
                let slice = &text[start..start + len];
                // SAFETY: the piece is in `text`.
                let a = unsafe { InlineKey::at(&text, start, len) };
                let b = InlineKey::new(slice);
                assert_eq!(
                    (a.lo, a.hi, a.len, a.hash),
                    (b.lo, b.hi, b.len, b.hash),
                    "{start} {len}"
                );
                // The bytes, zero-padded, as two little-endian words (what CountMap's slots hold).
                let mut padded = [0u8; INLINE];
                padded[..len].copy_from_slice(slice);
                let word = |i: usize| u64::from_le_bytes(padded[i..i + 8].try_into().unwrap());
                assert_eq!((a.lo, a.hi), (word(0), word(8)));
            }
        }
    }

    #[test]
    fn short_keys_sharing_bytes_stay_distinct() {
        let keys: [&[u8]; 10] = [
            b"",
            b"a",
            b"aa",
            b"aaa",
            b"ab",
            b"aba",
            b"abcd",
            b"abcde",
            b"abcdefgh",
            b"abcdefghi",
        ];
        let mut map: BytesMap<u32> = BytesMap::with_capacity(0).unwrap();
        for (i, k) in keys.iter().enumerate() {
            *map.entry(k).unwrap() = i as u32;
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(map.get(k), Some(i as u32), "{k:?}");
        }
        for absent in [b"b".as_slice(), b"abcdefg", b"aab", b"abcdefghij"] {
            assert_eq!(map.get(absent), None);
        }
    }
}
