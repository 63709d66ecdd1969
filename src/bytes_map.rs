//! [`BytesMap`]: a hash map from byte strings to small values, with short keys stored inline.
//!
//! Both hot loops of the crate look pre-tokens up by their bytes: counting during training, and the
//! vocabulary and cache lookups of encoding. With a general map of boxed keys each lookup is a probe,
//! a pointer chase to the key and a `memcmp` call; profiling put that at about a quarter of encoding's
//! instructions. Nearly all pre-tokens and tokens are at most 16 bytes, so this map stores such keys
//! inline as two overlapping 8-byte (or 4-byte) words — the form foldhash itself hashes short strings
//! from: for a given length, the two words determine the bytes. A lookup is two loads of the key, a
//! multiply and a linear probe comparing two words and a length, in one slot array. Longer keys (and
//! the empty key) go to an ordinary map.

use std::collections::HashMap;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The longest key stored inline.
const INLINE: usize = 16;

#[derive(Clone, Copy, Debug, Default)]
struct Slot<V> {
    lo: u64,
    hi: u64,
    /// 0 marks an empty slot (the empty key lives in `long`).
    len: u32,
    value: V,
}

/// Byte strings to `V`. Iteration order is unspecified.
#[derive(Clone, Debug)]
pub struct BytesMap<V> {
    slots: Vec<Slot<V>>,
    mask: usize,
    inline_len: usize,
    long: FastMap<Box<[u8]>, V>,
}

/// The inline words of a key of 1 to 16 bytes: its first and last 8 bytes when it has 8 or more, else
/// its first and last 4, else its bytes.
#[inline(always)]
fn words(b: &[u8]) -> (u64, u64) {
    let n = b.len();
    if n >= 8 {
        (
            u64::from_le_bytes(b[..8].try_into().unwrap()),
            u64::from_le_bytes(b[n - 8..].try_into().unwrap()),
        )
    } else if n >= 4 {
        (
            u32::from_le_bytes(b[..4].try_into().unwrap()) as u64,
            u32::from_le_bytes(b[n - 4..].try_into().unwrap()) as u64,
        )
    } else {
        (b[0] as u64 | (b[n / 2] as u64) << 8, b[n - 1] as u64)
    }
}

/// The key back from its words (inverse of [`words`] for the given length).
fn unwords(lo: u64, hi: u64, n: usize) -> [u8; INLINE] {
    let mut b = [0u8; INLINE];
    if n >= 8 {
        b[..8].copy_from_slice(&lo.to_le_bytes());
        b[n - 8..n].copy_from_slice(&hi.to_le_bytes());
    } else if n >= 4 {
        b[..4].copy_from_slice(&(lo as u32).to_le_bytes());
        b[n - 4..n].copy_from_slice(&(hi as u32).to_le_bytes());
    } else {
        b[0] = lo as u8;
        b[n / 2] = (lo >> 8) as u8;
        b[n - 1] = hi as u8;
    }
    b
}

#[inline(always)]
fn slot_hash(lo: u64, hi: u64, len: usize) -> usize {
    // A folded multiply (as in foldhash): the 128-bit product mixes every input bit into both halves.
    let x = (lo ^ 0x243F_6A88_85A3_08D3) as u128
        * (hi ^ (len as u64) << 56 ^ 0x1319_8A2E_0370_7344) as u128;
    ((x as u64) ^ (x >> 64) as u64) as usize
}

impl<V: Copy + Default> Default for BytesMap<V> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<V: Copy + Default> BytesMap<V> {
    pub fn with_capacity(n: usize) -> Self {
        // At most 5/8 full, so probes stay short.
        let capacity = (n * 8 / 5 + 1).next_power_of_two().max(16);
        BytesMap {
            slots: vec![Slot::default(); capacity],
            mask: capacity - 1,
            inline_len: 0,
            long: FastMap::default(),
        }
    }

    /// The slot holding `key` (inline-sized, non-empty), or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, lo: u64, hi: u64, n: usize) -> usize {
        let mut i = slot_hash(lo, hi, n) & self.mask;
        loop {
            let s = &self.slots[i];
            if s.len == 0 || (s.len as usize == n && s.lo == lo && s.hi == hi) {
                return i;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value of `key`, if present.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<V> {
        let n = key.len();
        if n > INLINE || n == 0 {
            return self.long.get(key).copied();
        }
        let (lo, hi) = words(key);
        let s = &self.slots[self.find(lo, hi, n)];
        (s.len != 0).then_some(s.value)
    }

    /// The value of `key`, inserted as `V::default()` first if absent.
    #[inline]
    pub fn entry(&mut self, key: &[u8]) -> &mut V {
        let n = key.len();
        if n > INLINE || n == 0 {
            if !self.long.contains_key(key) {
                self.long.insert(key.into(), V::default());
            }
            return self.long.get_mut(key).expect("inserted above");
        }
        let (lo, hi) = words(key);
        let mut i = self.find(lo, hi, n);
        if self.slots[i].len == 0 {
            if (self.inline_len + 1) * 8 > self.slots.len() * 5 {
                self.grow();
                i = self.find(lo, hi, n);
            }
            self.slots[i] = Slot {
                lo,
                hi,
                len: n as u32,
                value: V::default(),
            };
            self.inline_len += 1;
        }
        &mut self.slots[i].value
    }

    fn grow(&mut self) {
        let doubled = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        self.mask = self.slots.len() - 1;
        for s in old.into_iter().filter(|s| s.len != 0) {
            let i = self.find(s.lo, s.hi, s.len as usize);
            self.slots[i] = s;
        }
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.inline_len + self.long.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every key, keeping the allocation.
    pub fn clear(&mut self) {
        self.slots.fill(Slot::default());
        self.inline_len = 0;
        self.long.clear();
    }

    /// Calls `f(key, value)` for every key, in no particular order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], V)) {
        for s in self.slots.iter().filter(|s| s.len != 0) {
            let n = s.len as usize;
            f(&unwords(s.lo, s.hi, n)[..n], s.value);
        }
        for (k, &v) in &self.long {
            f(k, v);
        }
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
        let mut map: BytesMap<u64> = BytesMap::default();
        let mut reference: HashMap<Vec<u8>, u64> = HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            *map.entry(k) += i as u64;
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
        let mut seen = HashMap::new();
        map.for_each(|k, v| {
            seen.insert(k.to_vec(), v);
        });
        assert_eq!(seen, reference);
        map.clear();
        assert!(map.is_empty() && map.get(&keys[5]).is_none());
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
        let mut map: BytesMap<u32> = BytesMap::default();
        for (i, k) in keys.iter().enumerate() {
            *map.entry(k) = i as u32;
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(map.get(k), Some(i as u32), "{k:?}");
        }
        for absent in [b"b".as_slice(), b"abcdefg", b"aab", b"abcdefghij"] {
            assert_eq!(map.get(absent), None);
        }
    }
}
