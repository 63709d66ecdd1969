//! [`CountMap`]: the counts of pre-tokens of three bytes or more, compact, in shards; and [`Front`],
//! the table of hot pre-tokens that counting puts in front of it and of the array of short ones.
//!
//! Counting a large corpus holds every distinct pre-token once per thread until the threads' counts are
//! merged, so the bytes a key costs bound the corpus one machine can count, and the cache misses a
//! lookup costs bound counting's speed. A slot of the hash table is 16 bytes: the count, and either the
//! key itself (up to [`INLINE`] bytes: most occurrences, so most lookups touch one slot and nothing
//! else) or 31 bits of the key's hash and the offset of its bytes in its shard's arena. Tables grow by
//! half, so they are 1/2 to 3/4 full.
//!
//! The keys are split among [`SHARDS`] shards by the top bits of their hash. Merging two maps goes shard
//! by shard, each shard of the map merged in freed before the next grows, so a merge needs a shard's
//! worth of memory more than the two maps, not a third map; the words of training are made shard by
//! shard the same way ([`CountMap::drain`]).
//!
//! Every allocation is fallible ([`AllocError`]).
//!
//! Invariants: a key is in the shard its hash names, once; a slot's key word is 0 exactly when the slot
//! is empty; a long key's bytes are in its shard's arena (a varint length, then the bytes) once.

use std::hash::BuildHasher;

use super::memory;
use crate::bytes_map::{InlineKey, SMALL_KEY};
use crate::error::{try_reserve, try_vec, AllocError};
use crate::prefetch::prefetch;

/// How many shards a map has: enough that a shard's transient copies are small beside the map.
pub(super) const SHARDS: usize = 64;

/// The longest key stored in its slot.
const INLINE: usize = SMALL_KEY;

/// Marks a slot's key word as a long key's: `LONG | hash31 << 32 | offset`. An inline key's word is
/// its bytes (little-endian) with its length in the top byte, 1 to [`INLINE`], so the two never meet.
const LONG: u64 = 1 << 63;

/// 31 bits of a key's hash: a long key keeps them in its slot, so that growing the table does not read
/// the arena, and its position in the table comes from them.
#[inline(always)]
fn hash31(h: u64) -> u64 {
    (h as u32 >> 1) as u64
}

/// Which shard holds keys of hash `h`: its top bits, which the slot does not use.
#[inline(always)]
fn shard_of(h: u64) -> usize {
    (h >> (64 - SHARDS.trailing_zeros())) as usize
}

/// A key as the map finds it: its slot word when inline, its hash either way.
#[derive(Clone, Copy)]
struct Key {
    /// The slot word of an inline key; 0 for a long one.
    word: u64,
    hash: u64,
}

impl Key {
    #[inline(always)]
    fn new(bytes: &[u8]) -> Key {
        let n = bytes.len();
        if (1..=INLINE).contains(&n) {
            Key::of_inline(InlineKey::new(bytes).lo | (n as u64) << 56)
        } else {
            let hash = foldhash::fast::FixedState::with_seed(0xA409_3822_299F_31D0).hash_one(bytes);
            Key { word: 0, hash }
        }
    }

    /// The key whose slot word is `word`, that of a key of up to [`INLINE`] bytes (its bytes and its
    /// length in the top byte: the piece's [`small_key`](crate::bytes_map::small_key)).
    #[inline(always)]
    fn of_inline(word: u64) -> Key {
        // A folded multiply, as in foldhash: both halves of the product depend on every bit.
        let x = (word ^ 0x243F_6A88_85A3_08D3) as u128 * 0x1319_8A2E_0370_7344_u128;
        Key {
            word,
            hash: (x as u64) ^ (x >> 64) as u64,
        }
    }
}

/// A slot: `key` (see [`LONG`]) and the count.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    key: u64,
    count: u64,
}

/// One shard: a linear-probing table and the arena of its long keys.
#[derive(Clone, Debug, Default)]
struct Shard {
    slots: Vec<Slot>,
    arena: Vec<u8>,
    len: usize,
}

/// The smallest table a shard has once it holds a key.
const MIN_SLOTS: usize = 64;

/// The long key at `offset` of `arena`.
#[inline(always)]
fn long_key(arena: &[u8], offset: usize) -> &[u8] {
    let (mut len, mut shift, mut at) = (0usize, 0, offset);
    loop {
        let b = arena[at];
        at += 1;
        len |= ((b & 0x7F) as usize) << shift;
        if b < 0x80 {
            return &arena[at..at + len];
        }
        shift += 7;
    }
}

/// A step that visits each of `n` places once, stepping from 0 modulo `n`: about 0.618 `n` (far from
/// 0 and from `n / 2`, so that neighbours in the visit order are far apart), and coprime with `n`.
pub(crate) fn coprime_step(n: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut step = ((n as u64 * 0x9E37_79B9) >> 32) as usize;
    while n > 1 && gcd(step, n) != 1 {
        step += 1;
    }
    step.max(1) % n.max(1)
}

/// The slot where the probe for `hash31` starts in a table of `n` slots: the top bits of the product.
#[inline(always)]
fn home(hash31: u64, n: usize) -> usize {
    ((hash31 * n as u64) >> 31) as usize
}

impl Shard {
    /// The slot holding `key` (`bytes`), or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, key: Key, bytes: &[u8]) -> usize {
        let n = self.slots.len();
        let mut i = home(hash31(key.hash), n);
        let long = LONG | hash31(key.hash) << 32;
        loop {
            #[cfg(test)]
            tests::PROBES.with(|p| p.set(p.get() + 1));
            let s = self.slots[i].key;
            if s == 0 {
                return i;
            }
            if key.word != 0 {
                if s == key.word {
                    return i;
                }
            } else if s >> 32 == long >> 32 && long_key(&self.arena, s as u32 as usize) == bytes {
                return i;
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// Adds `count` to the count of `key` (`bytes`), inserting it first if absent.
    #[inline]
    fn add(&mut self, key: Key, bytes: &[u8], count: u64) -> Result<(), AllocError> {
        if self.slots.is_empty() {
            self.slots = try_vec(Slot::default(), MIN_SLOTS)?;
        }
        let mut i = self.find(key, bytes);
        if self.slots[i].key == 0 {
            if (self.len + 1) * 4 > self.slots.len() * 3 {
                self.grow()?;
                i = self.find(key, bytes);
            }
            self.slots[i].key = match key.word {
                0 => LONG | hash31(key.hash) << 32 | self.push_long(bytes)?,
                word => word,
            };
            self.len += 1;
        }
        self.slots[i].count += count;
        Ok(())
    }

    /// Appends `bytes` to the arena; returns its offset.
    fn push_long(&mut self, bytes: &[u8]) -> Result<u64, AllocError> {
        let offset = self.arena.len();
        let size = 5 + bytes.len();
        // Offsets are 32 bits: a shard's arena stays under 4 GiB.
        if offset + size > u32::MAX as usize {
            return Err(AllocError::of::<u8>(offset + size));
        }
        if self.arena.capacity() - offset < size {
            // Growth by half, as the table grows: the arena is a large part of the map.
            let more = (offset / 2).max(size).max(1024);
            self.arena
                .try_reserve_exact(more)
                .or_else(|_| self.arena.try_reserve_exact(size))
                .map_err(|_| AllocError::of::<u8>(offset + size))?;
        }
        let mut len = bytes.len();
        while len >= 0x80 {
            self.arena.push(len as u8 | 0x80);
            len >>= 7;
        }
        self.arena.push(len as u8);
        self.arena.extend_from_slice(bytes);
        Ok(offset as u64)
    }

    /// Grows the table by half; fails, leaving the shard as it was, when it cannot be allocated.
    #[cold]
    fn grow(&mut self) -> Result<(), AllocError> {
        let n = self.slots.len() + self.slots.len() / 2;
        let mut slots = try_vec(Slot::default(), n)?;
        for s in self.slots.iter().filter(|s| s.key != 0) {
            let h31 = match s.key & LONG {
                0 => hash31(Key::of_inline(s.key).hash),
                _ => s.key >> 32 & 0x7FFF_FFFF,
            };
            let mut i = home(h31, n);
            while slots[i].key != 0 {
                i = if i + 1 == n { 0 } else { i + 1 };
            }
            slots[i] = *s;
        }
        self.slots = slots;
        Ok(())
    }

    /// The count of `key` (`bytes`), if present.
    fn get(&self, key: Key, bytes: &[u8]) -> Option<u64> {
        if self.slots.is_empty() {
            return None;
        }
        let s = self.slots[self.find(key, bytes)];
        (s.key != 0).then_some(s.count)
    }

    /// The bytes of the key in `slot`.
    #[inline]
    fn key_of(&self, slot: &Slot) -> KeyBytes<'_> {
        match slot.key & LONG {
            0 => KeyBytes::Inline(slot.key.to_le_bytes(), (slot.key >> 56) as usize),
            _ => KeyBytes::Long(long_key(&self.arena, slot.key as u32 as usize)),
        }
    }

    /// Calls `f(key, count)` for every key.
    fn for_each(&self, mut f: impl FnMut(&[u8], u64)) {
        for s in self.slots.iter().filter(|s| s.key != 0) {
            f(self.key_of(s).bytes(), s.count);
        }
    }

    /// Adds every count of `other` to `self`; fails, with some of `other` added, when `self` cannot
    /// grow.
    ///
    /// Not in `other`'s slot order: a slot's position grows with its key's hash in every table, so keys
    /// taken in slot order land in `self` in slot order too, all in the part of `self` that the hashes
    /// seen so far cover. When `other` holds more keys than `self` has room for there, that part fills
    /// up into one run that every later key probes to its end, and merging takes time quadratic in
    /// the keys (a table grows by its total load, which trails the load of that part). So the slots are
    /// taken a block at a time, the blocks in a scrambled order, and a run is at most a block long.
    fn add_all(&mut self, other: &Shard) -> Result<(), AllocError> {
        if self.len == 0 {
            return self.clone_from_shard(other);
        }
        const BLOCK: usize = 16;
        let blocks = other.slots.len().div_ceil(BLOCK);
        let step = coprime_step(blocks);
        let mut block = 0;
        for _ in 0..blocks {
            let start = block * BLOCK;
            for s in other.slots[start..(start + BLOCK).min(other.slots.len())]
                .iter()
                .filter(|s| s.key != 0)
            {
                let bytes = other.key_of(s);
                let bytes = bytes.bytes();
                let key = match s.key & LONG {
                    0 => Key::of_inline(s.key),
                    _ => Key::new(bytes),
                };
                self.add(key, bytes, s.count)?;
            }
            block += step;
            if block >= blocks {
                block -= blocks;
            }
        }
        Ok(())
    }

    /// Makes the empty `self` a copy of `other`; fails, leaving `self` empty, when memory runs out.
    fn clone_from_shard(&mut self, other: &Shard) -> Result<(), AllocError> {
        let mut slots = Vec::new();
        try_reserve(&mut slots, other.slots.len())?;
        slots.extend_from_slice(&other.slots);
        let mut arena = Vec::new();
        try_reserve(&mut arena, other.arena.len())?;
        arena.extend_from_slice(&other.arena);
        *self = Shard {
            slots,
            arena,
            len: other.len,
        };
        Ok(())
    }

    /// The indices of the full slots, in the byte order of their keys.
    fn sorted(&self) -> Result<Vec<u32>, AllocError> {
        // Sorted by the first 8 bytes (big-endian, so that numbers order as bytes do) and, among keys
        // that share them, by all their bytes: most comparisons read no key.
        let mut by_prefix: Vec<(u64, u32)> = Vec::new();
        try_reserve(&mut by_prefix, self.len)?;
        by_prefix.extend(
            self.slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.key != 0)
                .map(|(i, s)| {
                    let mut prefix = [0u8; 8];
                    let key = self.key_of(s);
                    let n = key.bytes().len().min(8);
                    prefix[..n].copy_from_slice(&key.bytes()[..n]);
                    (u64::from_be_bytes(prefix), i as u32)
                }),
        );
        let key = |i: u32| self.key_of(&self.slots[i as usize]);
        by_prefix.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| key(a.1).bytes().cmp(key(b.1).bytes()))
        });
        let mut order = Vec::new();
        try_reserve(&mut order, by_prefix.len())?;
        order.extend(by_prefix.iter().map(|&(_, i)| i));
        Ok(order)
    }
}

/// How shard `a`'s next key compares with shard `b`'s (both have one).
fn smaller(next: &[Option<(KeyBytes, u64)>], a: usize, b: usize) -> std::cmp::Ordering {
    let key = |s: usize| next[s].as_ref().map(|(k, _)| k.bytes());
    key(a).cmp(&key(b))
}

/// A key's bytes: a copy of an inline key's word and its length, or a long key in its arena.
enum KeyBytes<'a> {
    Inline([u8; 8], usize),
    Long(&'a [u8]),
}

impl KeyBytes<'_> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            KeyBytes::Inline(word, len) => &word[..*len],
            KeyBytes::Long(bytes) => bytes,
        }
    }
}

/// Byte strings (of any length) to counts.
#[derive(Clone, Debug)]
pub(super) struct CountMap {
    shards: Vec<Shard>,
}

impl Default for CountMap {
    fn default() -> Self {
        CountMap {
            shards: vec![Shard::default(); SHARDS],
        }
    }
}

/// A key whose slot is on its way into the cache ([`CountMap::prefetch_long`],
/// [`CountMap::count_in_front`]), and the count to add to it.
#[derive(Clone, Copy)]
pub(super) struct Prefetched<'k> {
    key: Key,
    bytes: &'k [u8],
    count: u64,
}

impl Prefetched<'_> {
    /// A placeholder, never counted.
    pub(super) const NONE: Prefetched<'static> = Prefetched {
        key: Key { word: 0, hash: 0 },
        bytes: &[],
        count: 0,
    };
}

/// How many keys the [`Front`] table holds: 1 MB of slots. Larger measured faster up to here (counting
/// 100 MB of C code on one core: 4,096 slots 294–304 MB/s, 16,384 352–358, 65,536 427–440; 131,072 made
/// training no faster), though it leaves the core's L2 cache: a hit waits longer, but each key it keeps
/// out of the map saves a lookup in a table of millions of keys.
pub(super) const FRONT_SLOTS: usize = 1 << 16;

/// The counts of the hot pre-tokens of up to [`SMALL_KEY`] bytes of one text (or of a thread's
/// records), kept out of the map and the array of short pieces while it is counted.
///
/// A pre-token of a large corpus costs a lookup in a table of millions of keys: a cache miss and, with
/// 4 KB pages, a walk of the page tables. Most occurrences are of a few thousand pre-tokens (Zipf's
/// law), so a direct-mapped table in front of the map counts them in cache, and the map sees each of
/// them once per text ([`CountMap::flush_front`]). A key seen once so far gives its slot up to the next
/// key that lands there (its count goes to the map or the array), so the table fills with keys that
/// repeat. Pieces of one and two bytes go through it too, though their own array would count them
/// without it: one path for every piece of up to [`SMALL_KEY`] bytes spares the branches among their
/// lengths, which nothing predicts (about one mispredicted branch a piece on C code before,
/// cachegrind). Empty between texts, so nothing but counting ever sees it; records are the exception
/// (`count_record` in `count.rs`), flushed once their thread is done. 1.25 MB (the slots and the list of
/// those in use), allocated when a text is first counted: counts only merged or loaded never allocate
/// it, and a copy of counts whose table is empty does not copy it.
#[derive(Debug, Default)]
pub(super) struct Front {
    /// [`FRONT_SLOTS`] slots once allocated ([`Self::ready`]), none before.
    slots: Vec<Slot>,
    /// The slots in use.
    used: Vec<u32>,
}

impl Clone for Front {
    /// An empty table is not copied (it holds nothing, and [`Front::ready`] makes one when needed).
    fn clone(&self) -> Front {
        match self.used.is_empty() {
            true => Front::default(),
            false => Front {
                slots: self.slots.clone(),
                used: self.used.clone(),
            },
        }
    }
}

impl Front {
    /// Allocates the table if it is not yet; fails, leaving it unallocated, when it cannot be.
    pub(super) fn ready(&mut self) -> Result<(), AllocError> {
        if self.slots.is_empty() {
            let mut used = Vec::new();
            try_reserve(&mut used, FRONT_SLOTS)?;
            self.slots = try_vec(Slot::default(), FRONT_SLOTS)?;
            self.used = used;
        }
        Ok(())
    }
}

/// The slot of the piece whose [`small_key`](crate::bytes_map::small_key) is `key` in the counts' array
/// of pieces of one and two bytes (`short` in `count.rs`: `[b]` at `b`, `[b0, b1]` at
/// `256 + (b0 << 8 | b1)`), if it is one or two bytes long.
#[inline(always)]
pub(super) fn short_slot_of(key: u64) -> Option<usize> {
    let (b0, b1) = ((key & 0xFF) as usize, (key >> 8 & 0xFF) as usize);
    match key >> 56 {
        1 => Some(b0),
        2 => Some(256 + (b0 << 8 | b1)),
        _ => None,
    }
}

/// The slot of `key` in the [`Front`] table: bits of its hash that neither the shard (the top ones)
/// nor the home slot (the low 32) use.
#[inline(always)]
fn front_slot(key: &Key) -> usize {
    (key.hash >> 40) as usize % FRONT_SLOTS
}

/// The slot in the [`Front`] table of the piece whose [`small_key`](crate::bytes_map::small_key) is
/// `word` (for the tests, which make pieces share one).
#[cfg(test)]
pub(super) fn front_slot_of(word: u64) -> usize {
    front_slot(&Key::of_inline(word))
}

/// Where the count of a key goes that the [`Front`] table did not take.
pub(super) enum FrontMiss {
    /// To this slot of the array of pieces of one and two bytes.
    Short(usize),
    /// To the map.
    Map(Prefetched<'static>),
}

impl CountMap {
    /// Starts loading the slot where the search for `key` begins, for [`Self::add_prefetched`] a few
    /// keys later.
    #[inline(always)]
    fn prefetch_key<'k>(&self, key: Key, bytes: &'k [u8], count: u64) -> Prefetched<'k> {
        let shard = &self.shards[shard_of(key.hash)];
        let home = home(hash31(key.hash), shard.slots.len());
        prefetch(shard.slots.as_ptr().wrapping_add(home));
        Prefetched { key, bytes, count }
    }

    /// For a long key that [`Self::prefetch_key`] started loading the home slot of a few keys ago:
    /// starts loading its bytes in the arena, when the home slot holds a key of the same hash (the
    /// lookup compares them).
    #[inline]
    pub(super) fn prefetch_bytes(&self, key: &Prefetched<'_>) {
        if key.key.word != 0 {
            return;
        }
        let shard = &self.shards[shard_of(key.key.hash)];
        let Some(slot) = shard
            .slots
            .get(home(hash31(key.key.hash), shard.slots.len()))
        else {
            return;
        };
        if slot.key >> 32 == (LONG | hash31(key.key.hash) << 32) >> 32 {
            prefetch(shard.arena.as_ptr().wrapping_add(slot.key as u32 as usize));
        }
    }

    /// Counts one occurrence of the piece whose [`small_key`](crate::bytes_map::small_key) is `word`
    /// in `front` when it can; otherwise says where its count, or the count of the key it took the slot
    /// of, goes. `front` must be [`Front::ready`].
    #[inline(always)]
    pub(super) fn count_in_front(&self, front: &mut Front, word: u64) -> Option<FrontMiss> {
        let key = Key::of_inline(word);
        let i = front_slot(&key);
        let slot = &mut front.slots[i];
        if slot.key == word {
            slot.count += 1;
            return None;
        }
        self.front_miss(front, i, key)
    }

    /// [`Self::count_in_front`] for a key that its slot does not hold. Out of line: the hits, most
    /// pieces, run a shorter loop.
    #[inline(never)]
    fn front_miss(&self, front: &mut Front, i: usize, key: Key) -> Option<FrontMiss> {
        let slot = &mut front.slots[i];
        if slot.key == 0 {
            *slot = Slot {
                key: key.word,
                count: 1,
            };
            front.used.push(i as u32);
            return None;
        }
        let counted = if slot.count == 1 {
            let evicted = std::mem::replace(
                slot,
                Slot {
                    key: key.word,
                    count: 1,
                },
            );
            Key::of_inline(evicted.key)
        } else {
            key
        };
        Some(match short_slot_of(counted.word) {
            Some(at) => FrontMiss::Short(at),
            None => FrontMiss::Map(self.prefetch_key(counted, &[], 1)),
        })
    }

    /// Starts loading the slot of a piece of more than [`SMALL_KEY`] bytes, for
    /// [`Self::add_prefetched`] a few pieces later.
    #[inline]
    pub(super) fn prefetch_long<'k>(&self, piece: &'k [u8]) -> Prefetched<'k> {
        self.prefetch_key(Key::new(piece), piece, 1)
    }

    /// Adds the counts of `front` to the map, and those of pieces of one and two bytes to `short`, and
    /// empties it, even when adding fails (out of memory, with some of them added).
    pub(super) fn flush_front(
        &mut self,
        front: &mut Front,
        short: &mut [u64],
    ) -> Result<(), AllocError> {
        let mut result = Ok(());
        for &i in &front.used {
            let slot = std::mem::take(&mut front.slots[i as usize]);
            if let Some(at) = short_slot_of(slot.key) {
                short[at] += slot.count;
            } else if result.is_ok() {
                result = self.add_key(Key::of_inline(slot.key), &[], slot.count);
            }
        }
        front.used.clear();
        result
    }

    /// [`Self::add`] for what [`Self::prefetch_long`] or [`Self::count_in_front`] made.
    #[inline]
    pub(super) fn add_prefetched(&mut self, key: Prefetched<'_>) -> Result<(), AllocError> {
        self.add_key(key.key, key.bytes, key.count)
    }

    #[inline(always)]
    fn add_key(&mut self, key: Key, bytes: &[u8], n: u64) -> Result<(), AllocError> {
        self.shards[shard_of(key.hash)].add(key, bytes, n)
    }

    /// Adds `n` to the count of `key`; fails, counting nothing, when the map cannot grow.
    #[inline]
    pub(super) fn add(&mut self, key: &[u8], n: u64) -> Result<(), AllocError> {
        let k = Key::new(key);
        self.shards[shard_of(k.hash)].add(k, key, n)
    }

    /// The count of `key`, if present.
    pub(super) fn get(&self, key: &[u8]) -> Option<u64> {
        let k = Key::new(key);
        self.shards[shard_of(k.hash)].get(k, key)
    }

    /// The number of keys.
    pub(super) fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len).sum()
    }

    /// Calls `f(key, count)` for every key, in no particular order.
    pub(super) fn for_each(&self, mut f: impl FnMut(&[u8], u64)) {
        for shard in &self.shards {
            shard.for_each(&mut f);
        }
    }

    /// Calls `f(key, count)` for every key, in byte order: for a file of the counts that does not depend
    /// on the hashes. Sorts the keys of each shard (4 bytes a key, and 16 more for the keys of the
    /// shard being sorted), then merges the shards' orders. Fails when memory for the orders runs out.
    pub(super) fn for_each_sorted(&self, mut f: impl FnMut(&[u8], u64)) -> Result<(), AllocError> {
        let mut orders = Vec::new();
        try_reserve(&mut orders, SHARDS)?;
        for shard in &self.shards {
            orders.push(shard.sorted()?);
        }
        // The shards' next keys (and counts), and a binary min-heap of the shards that have one.
        let mut at = [0usize; SHARDS];
        let head = |shard: usize, at: usize| {
            let s = &self.shards[shard];
            let slot = &s.slots[*orders[shard].get(at)? as usize];
            Some((s.key_of(slot), slot.count))
        };
        let mut next: Vec<Option<(KeyBytes, u64)>> = (0..SHARDS).map(|s| head(s, 0)).collect();
        let mut heap: Vec<usize> = (0..SHARDS).filter(|&s| next[s].is_some()).collect();
        heap.sort_unstable_by(|&a, &b| smaller(&next, a, b));
        while let Some(&top) = heap.first() {
            let (bytes, count) = next[top]
                .as_ref()
                .expect("a shard in the heap has a next key");
            f(bytes.bytes(), *count);
            at[top] += 1;
            next[top] = head(top, at[top]);
            if next[top].is_none() {
                let last = heap.pop().expect("the heap holds top");
                if heap.is_empty() {
                    break;
                }
                heap[0] = last;
            }
            // Sift the new head down.
            let mut i = 0;
            loop {
                let (l, r) = (2 * i + 1, 2 * i + 2);
                let mut least = i;
                for child in [l, r] {
                    if child < heap.len() && smaller(&next, heap[child], heap[least]).is_lt() {
                        least = child;
                    }
                }
                if least == i {
                    break;
                }
                heap.swap(i, least);
                i = least;
            }
        }
        Ok(())
    }

    /// Calls `f(key, count)` for every key, freeing each shard once its keys are done.
    pub(super) fn drain(self, mut f: impl FnMut(&[u8], u64)) {
        for shard in self.shards {
            shard.for_each(&mut f);
            drop(shard);
            memory::return_freed_memory();
        }
    }

    /// Adds every count of `other` to `self`, shard by shard, freeing each shard of `other` when it is
    /// merged; fails, with some of `other` added, when `self` cannot grow.
    pub(super) fn merge(&mut self, other: CountMap) -> Result<(), AllocError> {
        for (mine, mut theirs) in self.shards.iter_mut().zip(other.shards) {
            // The larger shard takes the smaller: fewer keys to insert, less to grow.
            if theirs.len > mine.len {
                std::mem::swap(mine, &mut theirs);
            }
            mine.add_all(&theirs)?;
        }
        Ok(())
    }

    /// Adds every count of `other` to `self`, shard by shard; fails, with some of `other` added, when
    /// `self` cannot grow.
    pub(super) fn add_all(&mut self, other: &CountMap) -> Result<(), AllocError> {
        for (mine, theirs) in self.shards.iter_mut().zip(&other.shards) {
            mine.add_all(theirs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::collections::HashMap;

    thread_local! {
        /// The slots `Shard::find` looked at on this thread.
        pub(super) static PROBES: Cell<u64> = const { Cell::new(0) };
    }

    #[test]
    fn adding_a_large_map_to_a_small_one_probes_a_few_slots_a_key() {
        // 64 keys (about one a shard) take 160,000 more: each shard's table grows from its first
        // slots while the keys come in, and must not fill up where the keys land first.
        let (mut small, mut large) = (CountMap::default(), CountMap::default());
        for i in 0..160_064u32 {
            let key = format!("key {i}");
            match i < 64 {
                true => small.add(key.as_bytes(), 1).unwrap(),
                false => large.add(key.as_bytes(), 2).unwrap(),
            }
        }
        let mut merged = small.clone();
        PROBES.with(|p| p.set(0));
        merged.add_all(&large).unwrap();
        let probes = PROBES.with(|p| p.get());
        assert!(probes < 12 * 160_000, "{probes} probes for 160,000 keys");
        assert_eq!(merged.len(), 160_064);
        large.for_each(|k, n| assert_eq!(merged.get(k), Some(n)));
        small.for_each(|k, n| assert_eq!(merged.get(k), Some(n)));
        // And the same through `merge`, which gives the larger shard the smaller one's keys.
        let mut merged = small.clone();
        merged.merge(large.clone()).unwrap();
        assert_eq!(merged.len(), 160_064);
        large.for_each(|k, n| assert_eq!(merged.get(k), Some(n)));
    }

    #[test]
    fn a_map_added_to_an_empty_one_is_copied() {
        let mut map = CountMap::default();
        for k in keys() {
            map.add(&k, 3).unwrap();
        }
        let mut copy = CountMap::default();
        copy.add_all(&map).unwrap();
        copy.add_all(&map).unwrap();
        assert_eq!(copy.len(), map.len());
        map.for_each(|k, n| assert_eq!(copy.get(k), Some(2 * n)));
    }

    fn keys() -> Vec<Vec<u8>> {
        (0..20_000u32)
            .map(|i| {
                // Lengths 0 to 299, so that some keys need a varint of two bytes, and many of 1 to 7
                // bytes with zeros among them (inline keys are zero-padded).
                let len = if i % 2 == 0 {
                    i as usize % 8
                } else {
                    (i as usize * 7) % 300
                };
                (0..len)
                    .map(|k| ((i as usize * 31 + k * 17) % 7) as u8)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn holds_exactly_what_was_added() {
        let mut map = CountMap::default();
        let mut reference: HashMap<Vec<u8>, u64> = HashMap::new();
        for (i, k) in keys().iter().enumerate() {
            map.add(k, i as u64 + 1).unwrap();
            *reference.entry(k.clone()).or_default() += i as u64 + 1;
        }
        assert_eq!(map.len(), reference.len());
        for (k, &v) in &reference {
            assert_eq!(map.get(k), Some(v));
            if !k.is_empty() {
                let mut other = k.clone();
                other[k.len() / 2] ^= 0x80;
                assert_eq!(map.get(&other), reference.get(&other).copied());
                assert_eq!(map.get(&k[1..]), reference.get(&k[1..]).copied());
                let mut longer = k.clone();
                longer.push(0);
                assert_eq!(map.get(&longer), reference.get(&longer).copied());
            }
        }
        let mut seen = HashMap::new();
        map.for_each(|k, v| assert!(seen.insert(k.to_vec(), v).is_none()));
        assert_eq!(seen, reference);
    }

    #[test]
    fn sorted_iteration_is_in_byte_order() {
        let mut map = CountMap::default();
        let mut keys = keys();
        // Keys that order by their length only, across the inline and long forms.
        keys.extend([
            vec![],
            vec![0],
            vec![0; 7],
            vec![0; 8],
            vec![0xFF; 7],
            vec![0xFF; 9],
        ]);
        for (i, k) in keys.iter().enumerate() {
            map.add(k, i as u64).unwrap();
        }
        let mut seen = Vec::new();
        map.for_each_sorted(|k, v| seen.push((k.to_vec(), v)))
            .unwrap();
        let mut expected = Vec::new();
        map.for_each(|k, v| expected.push((k.to_vec(), v)));
        expected.sort();
        assert_eq!(seen, expected);
    }

    #[test]
    fn merging_adds_the_counts_and_drain_yields_them() {
        let keys = keys();
        let (mut a, mut b) = (CountMap::default(), CountMap::default());
        let mut expected: HashMap<Vec<u8>, u64> = HashMap::new();
        for (i, k) in keys.iter().enumerate() {
            // Overlapping parts: keys in both maps, and keys in one.
            if i % 3 != 0 {
                a.add(k, 2).unwrap();
                *expected.entry(k.clone()).or_default() += 2;
            }
            if i % 2 == 0 {
                b.add(k, 5).unwrap();
                *expected.entry(k.clone()).or_default() += 5;
            }
        }
        a.merge(b).unwrap();
        let mut merged = HashMap::new();
        a.drain(|k, v| assert!(merged.insert(k.to_vec(), v).is_none()));
        assert_eq!(merged, expected);
    }
}
