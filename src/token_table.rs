//! [`TokenTable`]: a read-only map from token bytes to ids, built for the encoder's hottest lookup.
//!
//! Every pre-token is first looked up whole in the vocabulary. With a general hash map of boxed keys
//! that costs a probe, a pointer chase to the key and a `memcmp` call; profiling put that at about a
//! quarter of encoding's instructions. Nearly all tokens are at most 16 bytes, so this table stores
//! such keys inline, as two overlapping 8-byte (or 4-byte) loads — the canonical form foldhash itself
//! hashes short strings from: for a given length, the two words determine the bytes. A lookup is two
//! loads of the piece, a multiply, and a linear probe that compares two words and a length. Longer
//! tokens go to an ordinary map.

use std::collections::HashMap;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The longest key stored inline.
const INLINE: usize = 16;

#[derive(Clone, Copy, Default)]
struct Slot {
    lo: u64,
    hi: u64,
    /// 0 marks an empty slot (the empty string is never a token).
    len: u32,
    id: u32,
}

/// Byte strings to ids; built once, then only read (so it is shared by threads without locks).
#[derive(Clone, Debug, Default)]
pub struct TokenTable {
    slots: Vec<Slot>,
    mask: usize,
    long: FastMap<Box<[u8]>, u32>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slot(len {}, id {})", self.len, self.id)
    }
}

/// The inline key of a string of 1 to 16 bytes: the first and last 8 bytes when it has 8 or more,
/// else the first and last 4, else the bytes themselves.
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
        let (a, m, z) = (b[0] as u64, b[n / 2] as u64, b[n - 1] as u64);
        (a | m << 8, z)
    }
}

#[inline(always)]
fn slot_hash(lo: u64, hi: u64, len: usize) -> u64 {
    // A folded multiply (as in foldhash): the full 128-bit product mixes every input bit into the
    // high bits, which pick the slot.
    let x = (lo ^ 0x243F_6A88_85A3_08D3) as u128
        * (hi ^ (len as u64) << 56 ^ 0x1319_8A2E_0370_7344) as u128;
    (x as u64) ^ (x >> 64) as u64
}

impl TokenTable {
    /// Builds the table; later pairs win where bytes repeat (callers reject duplicates first).
    pub fn new<'a>(entries: impl ExactSizeIterator<Item = (&'a [u8], u32)>) -> TokenTable {
        // At most 5/8 full, so probes stay short.
        let capacity = (entries.len() * 8 / 5 + 1).next_power_of_two().max(16);
        let mut table = TokenTable {
            slots: vec![Slot::default(); capacity],
            mask: capacity - 1,
            long: FastMap::default(),
        };
        for (bytes, id) in entries {
            if bytes.is_empty() {
                continue;
            }
            if bytes.len() > INLINE {
                table.long.insert(bytes.into(), id);
                continue;
            }
            let (lo, hi) = words(bytes);
            let mut i = slot_hash(lo, hi, bytes.len()) as usize & table.mask;
            loop {
                let s = &mut table.slots[i];
                if s.len == 0 || (s.len as usize == bytes.len() && s.lo == lo && s.hi == hi) {
                    *s = Slot {
                        lo,
                        hi,
                        len: bytes.len() as u32,
                        id,
                    };
                    break;
                }
                i = (i + 1) & table.mask;
            }
        }
        table
    }

    /// The id of `bytes`, if it is a token.
    #[inline]
    pub fn get(&self, bytes: &[u8]) -> Option<u32> {
        let n = bytes.len();
        if n > INLINE || n == 0 {
            return self.long.get(bytes).copied();
        }
        let (lo, hi) = words(bytes);
        let mut i = slot_hash(lo, hi, n) as usize & self.mask;
        loop {
            let s = &self.slots[i];
            if s.len as usize == n && s.lo == lo && s.hi == hi {
                return Some(s.id);
            }
            if s.len == 0 {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_tokens_it_holds() {
        let tokens: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| {
                let len = 1 + (i as usize * 7) % 24;
                (0..len).map(|k| (i as usize * 31 + k * 17) as u8).collect()
            })
            .collect();
        let mut unique: Vec<&Vec<u8>> = tokens.iter().collect();
        unique.sort();
        unique.dedup();
        let table = TokenTable::new(
            unique
                .iter()
                .enumerate()
                .map(|(i, t)| (t.as_slice(), i as u32)),
        );
        for (i, t) in unique.iter().enumerate() {
            assert_eq!(table.get(t), Some(i as u32));
            // Same length, one byte changed; and one byte shorter: not tokens unless listed.
            let mut other = t.to_vec();
            other[t.len() / 2] ^= 0x80;
            assert_eq!(
                table.get(&other),
                unique.binary_search(&&other).ok().map(|k| k as u32)
            );
            let shorter = &t[..t.len() - 1];
            assert_eq!(
                table.get(shorter),
                unique
                    .binary_search(&&shorter.to_vec())
                    .ok()
                    .map(|k| k as u32)
            );
        }
        assert_eq!(table.get(b""), None);
    }

    #[test]
    fn short_keys_with_shared_bytes_stay_distinct() {
        let keys: [&[u8]; 8] = [
            b"a",
            b"aa",
            b"aaa",
            b"ab",
            b"aba",
            b"abcd",
            b"abcde",
            b"abcdefgh",
        ];
        let table = TokenTable::new(keys.iter().enumerate().map(|(i, k)| (*k, i as u32)));
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(table.get(k), Some(i as u32));
        }
        assert_eq!(table.get(b"b"), None);
        assert_eq!(table.get(b"abcdefg"), None);
        assert_eq!(table.get(b"aab"), None);
    }
}
