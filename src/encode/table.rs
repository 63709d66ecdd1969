//! [`MergeTable`]: which two adjacent tokens merge, into which token and at which rank: all the merge
//! loops ask ([`super::merge`]), and never bytes. A small cache sits in front of it ([`MergeCache`]).
//!
//! The encoder's question "is `left ++ right` a token, and of which rank?" is answered here for every
//! split of every multi-byte token into two tokens, precomputed when the encoder is built. For a
//! vocabulary whose merges are its only way to build tokens (every trained BPE vocabulary), merging by
//! these ranks is the same as applying the merges list in order; a token no merge builds (a vocabulary
//! may hold some) ranks after all merges, in id order, as tiktoken ranks it. The pairs are kept as
//! words of one array when every id fits in 16 bits (`PackedPairs`), else in a hash map.
//!
//! Invariants: ranks are below [`MergeTable::rank_limit`], and [`NO_MERGE`]'s rank is above them all;
//! the byte tables ([`MergeTable::byte_pair`]) agree with [`MergeTable::rank`] on the ids of the bytes.

use crate::bytes_map::FastMap;
use crate::error::{try_reserve, try_vec, AllocError, Error, Result};
use crate::prefetch::prefetch;
use crate::special::SpecialTokens;

/// The (rank, merged id) of a pair that is not a merge: its rank is greater than every real rank.
pub(super) const NO_MERGE: (u32, u32) = (u32::MAX, 0);

/// For each pair of token ids whose concatenation is a multi-byte token: that token's rank and id. The
/// key packs the two ids into a u64 ([`pair_key`]).
type PairRanks = FastMap<u64, (u32, u32)>;

#[inline]
fn pair_key(left: u32, right: u32) -> u64 {
    (left as u64) << 32 | right as u64
}

/// Bits of [`MergeTable`]'s filter of pairs per pair, rounded up to a power of two: at 8, a pair that
/// does not merge finds its bit clear about 9 times in 10.
const FILTER_BITS: usize = 8;

/// A pair's bit in [`MergeTable`]'s filter of pairs: the top bits of a product, by another constant
/// than the pair cache's slots so that the two are not the same bits.
#[inline]
fn filter_bit(key: u64, shift: u32) -> usize {
    (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> shift) as usize
}

/// What the merge loops need of a vocabulary: the id of each byte, and the rank and result of merging
/// any two tokens.
#[derive(Debug)]
pub(super) struct MergeTable {
    byte_ids: [u32; 256],
    /// The (rank, merged id) of every pair that merges.
    ranks: Pairs,
    /// One more than the highest rank in `ranks`.
    rank_limit: usize,
    /// `ranks` for the two single-byte tokens `[b0]`, `[b1]` at `b0 << 8 | b1`: every piece starts as
    /// bytes, so these are most lookups, and a 512 KB array answers them from cache without hashing.
    /// Indexed by bytes (not ids), so it is exact whatever ids the bytes have.
    byte_pairs: Vec<(u32, u32)>,
    /// Bit `b0 << 8 | b1` is set when bytes `b0`, `b1` are adjacent in some token: where they are not,
    /// no merge can join the bytes on either side.
    adjacent_in_token: Vec<u64>,
    /// A filter of the pairs in `ranks`: bit [`filter_bit`] of every pair's key is set. Most pairs the
    /// merge loops ask about do not merge (they are the pieces' final tokens side by side), and the
    /// filter answers 9 in 10 of them from 128 KB (for GPT-2) instead of the megabytes of `ranks`.
    pair_filter: Vec<u64>,
    /// 64 minus log2 of the bits of `pair_filter`.
    filter_shift: u32,
}

impl MergeTable {
    /// The table of the tokens `ids` (bytes to id, special tokens included), whose bytes have the ids
    /// `byte_ids`, for `merges` in order of creation; `narrow_ids` says whether every id of `ids` fits
    /// in 16 bits. Fails when a merge names a token the vocabulary lacks, or when the tables do not fit
    /// in memory.
    pub(super) fn new<M: AsRef<[u8]>>(
        ids: &FastMap<&[u8], u32>,
        byte_ids: [u32; 256],
        merges: &[(M, M)],
        specials: &SpecialTokens,
        narrow_ids: bool,
    ) -> Result<MergeTable> {
        let tables = |e: AllocError| e.named("the tables of the vocabulary");
        let ranks = pair_ranks(ids, merges, specials)?;
        let rank_limit = ranks
            .values()
            .map(|&(rank, _)| rank as usize + 1)
            .max()
            .unwrap_or(0);
        let mut byte_pairs = try_vec(NO_MERGE, 1 << 16).map_err(tables)?;
        for (i, slot) in byte_pairs.iter_mut().enumerate() {
            let (a, b) = (byte_ids[i >> 8], byte_ids[i & 0xFF]);
            *slot = ranks.get(&pair_key(a, b)).copied().unwrap_or(NO_MERGE);
        }
        let mut adjacent_in_token = try_vec(0u64, (1 << 16) / 64).map_err(tables)?;
        for token in ids.keys() {
            for w in token.windows(2) {
                let bit = (w[0] as usize) << 8 | w[1] as usize;
                adjacent_in_token[bit / 64] |= 1 << (bit % 64);
            }
        }
        let bits = (ranks.len() * FILTER_BITS).next_power_of_two().max(64);
        let filter_shift = 64 - bits.trailing_zeros();
        let mut pair_filter = try_vec(0u64, bits / 64).map_err(tables)?;
        for &key in ranks.keys() {
            let bit = filter_bit(key, filter_shift);
            pair_filter[bit / 64] |= 1 << (bit % 64);
        }
        Ok(MergeTable {
            pair_filter,
            filter_shift,
            byte_ids,
            ranks: Pairs::new(ranks, narrow_ids).map_err(tables)?,
            rank_limit,
            byte_pairs,
            adjacent_in_token,
        })
    }

    /// Whether bytes `b0` then `b1` occur together in some token.
    #[inline]
    pub(super) fn adjacent_in_token(&self, b0: u8, b1: u8) -> bool {
        let bit = (b0 as usize) << 8 | b1 as usize;
        self.adjacent_in_token[bit / 64] >> (bit % 64) & 1 != 0
    }

    /// The id of the single byte `b`.
    #[inline]
    pub(super) fn byte_id(&self, b: u8) -> u32 {
        self.byte_ids[b as usize]
    }

    /// The (rank, merged id) of the single-byte tokens `b0` then `b1`, or [`NO_MERGE`].
    #[inline]
    pub(super) fn byte_pair(&self, b0: u8, b1: u8) -> (u32, u32) {
        self.byte_pairs[(b0 as usize) << 8 | b1 as usize]
    }

    /// One more than the highest rank a pair of tokens merges at.
    pub(super) fn rank_limit(&self) -> usize {
        self.rank_limit
    }

    /// The (rank, merged id) of `left` then `right`, if they merge.
    #[inline]
    pub(super) fn rank(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let key = pair_key(left, right);
        if !self.may_merge(key) {
            return None;
        }
        match &self.ranks {
            Pairs::Packed(packed) => packed.get(left, right),
            Pairs::Map(map) => map.get(&key).copied(),
        }
    }

    /// Prefetches the slot where the table of pairs starts looking for `left` then `right` (when the
    /// pairs are packed; the hash map's lookup is not prefetched).
    #[inline]
    pub(super) fn prefetch_pair(&self, left: u32, right: u32) {
        if let Pairs::Packed(packed) = &self.ranks {
            prefetch(
                packed
                    .slots
                    .as_ptr()
                    .wrapping_add(packed.slot(left << 16 | right)),
            );
        }
    }

    /// Whether the pair of `key` passes the filter of pairs: true for every pair that merges, and for
    /// about 1 in 10 of the others.
    #[inline]
    fn may_merge(&self, key: u64) -> bool {
        let bit = filter_bit(key, self.filter_shift);
        self.pair_filter[bit / 64] >> (bit % 64) & 1 != 0
    }
}

/// The pairs that merge, as the merge loops look them up.
#[derive(Debug)]
enum Pairs {
    /// Every id fits in 16 bits (GPT-2's and most vocabularies): one word a pair, see [`PackedPairs`].
    Packed(PackedPairs),
    /// Wider ids: a hash map, whose lookup loads its control bytes and then the pair.
    Map(PairRanks),
}

impl Pairs {
    /// The pairs of `map`, packed when every id of the vocabulary (`ids_fit`) and every rank fits in
    /// 16 bits. All ids, not only those of the pairs: the merge loops also ask about bytes that are in
    /// no pair, and a wide id would lose its high bits in a packed key.
    fn new(map: PairRanks, ids_fit: bool) -> std::result::Result<Pairs, AllocError> {
        // Ranks can pass the ids (a token no merge builds ranks after all merges), so they are checked.
        let narrow = ids_fit
            && map.iter().all(|(&key, &(rank, merged))| {
                key >> 48 == 0 && key as u32 >> 16 == 0 && rank >> 16 == 0 && merged >> 16 == 0
            });
        Ok(match narrow {
            true => Pairs::Packed(PackedPairs::new(&map)?),
            false => Pairs::Map(map),
        })
    }
}

/// Pairs of 16-bit ids in one open-addressing array of words, `merged << 48 | rank << 32 | left << 16
/// | right`, probed linearly from the pair's hash. A lookup that misses the caches waits for one load,
/// where the hash map waits for its control bytes and then for the pair: for GPT-2, 108K pairs in
/// 2 MB, which a first call looks up about 130K times for 20 MB of prose.
///
/// Invariants: no entry is 0 (a merged token is longer than its left one, so it is another id), and 0
/// marks an empty slot; the array is at most half full, so that a probe ends soon.
#[derive(Debug)]
struct PackedPairs {
    slots: Vec<u64>,
    /// 64 minus log2 of the number of slots.
    shift: u32,
}

impl PackedPairs {
    fn new(map: &PairRanks) -> std::result::Result<PackedPairs, AllocError> {
        let n = (map.len() * 2).next_power_of_two().max(2);
        let mut packed = PackedPairs {
            slots: try_vec(0u64, n)?,
            shift: 64 - n.trailing_zeros(),
        };
        for (&key, &(rank, merged)) in map {
            let pair = ((key >> 32) << 16 | key & 0xFFFF) as u32;
            let mut slot = packed.slot(pair);
            while packed.slots[slot] != 0 {
                slot = (slot + 1) & (n - 1);
            }
            packed.slots[slot] = (merged as u64) << 48 | (rank as u64) << 32 | pair as u64;
        }
        Ok(packed)
    }

    /// The first slot to probe for the pair `left << 16 | right`.
    #[inline]
    fn slot(&self, pair: u32) -> usize {
        ((pair as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The (rank, merged id) of `left` then `right`, if they merge.
    #[inline]
    fn get(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        let pair = left << 16 | right;
        let mask = self.slots.len() - 1;
        let mut slot = self.slot(pair);
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                return None;
            }
            if entry as u32 == pair {
                return Some(((entry >> 32) as u32 & 0xFFFF, (entry >> 48) as u32));
            }
            slot = (slot + 1) & mask;
        }
    }
}

/// A direct-mapped table sized by all the text a scratch has encoded (`Scratch::fit`, in the caches'
/// module): a short text does not pay to clear a large table.
pub(super) trait SizedByText: Sized {
    /// The number of entries [`Self::for_text`] gives a text of `text_len` bytes.
    fn entries_for(text_len: usize) -> usize;

    /// A table for a text of `text_len` bytes, or the error of its allocation.
    fn for_text(text_len: usize) -> std::result::Result<Self, AllocError>;

    /// The number of entries.
    fn entries(&self) -> usize;

    /// Replaces the table with a larger, empty one when `seen` bytes of text call for more entries;
    /// keeps it when the larger one cannot be allocated.
    fn grow_for(&mut self, seen: usize) {
        if Self::entries_for(seen) > self.entries() {
            if let Ok(larger) = Self::for_text(seen) {
                *self = larger;
            }
        }
    }
}

/// A direct-mapped cache of the [`MergeTable`]'s answers, in front of it for the merge loops. The
/// table holds every split of every token (megabytes for GPT-2), and merging without the cache spends
/// much of its time waiting on the table's memory; the pairs merging asks about repeat from piece to
/// piece, and 4096 of them fit in 64 KB.
pub(super) struct MergeCache {
    /// (left id << 32 | right id, rank, merged id); an empty entry has a key no pair of ids has.
    entries: Vec<(u64, u32, u32)>,
    /// 64 minus log2 of the number of entries: the hash is the top bits of a product.
    shift: u32,
}

impl SizedByText for MergeCache {
    /// Enough entries for a text of `text_len` bytes, from 64 to 4096 (64 KB): one entry per 16 bytes
    /// of text.
    fn for_text(text_len: usize) -> std::result::Result<MergeCache, AllocError> {
        let n = Self::entries_for(text_len);
        Ok(MergeCache {
            entries: try_vec((u64::MAX, NO_MERGE.0, NO_MERGE.1), n)?,
            shift: 64 - n.trailing_zeros(),
        })
    }

    fn entries_for(text_len: usize) -> usize {
        (text_len / 16).next_power_of_two().clamp(64, 4096)
    }

    fn entries(&self) -> usize {
        self.entries.len()
    }
}

impl MergeCache {
    /// The (rank, merged id) of `left` then `right`, or [`NO_MERGE`].
    #[inline]
    pub(super) fn get(&mut self, table: &MergeTable, left: u32, right: u32) -> (u32, u32) {
        let key = pair_key(left, right);
        let slot = self.slot(key);
        let entry = &mut self.entries[slot];
        if entry.0 != key {
            let (rank, merged) = table.rank(left, right).unwrap_or(NO_MERGE);
            *entry = (key, rank, merged);
        }
        (entry.1, entry.2)
    }

    /// The (rank, merged id) of `left` then `right` if the cache has it, or [`NO_MERGE`] if the
    /// table's filter of pairs rules them out; otherwise prefetches where the table of pairs keeps
    /// them, for [`Self::get`], and returns None.
    ///
    /// The filter is read here rather than prefetched with the pair's slot: in 128 KB (for GPT-2) it
    /// stays in cache, and most pairs the cache misses are a piece's final tokens side by side, which
    /// the filter answers without the wait and the lane's turn that a prefetch costs.
    #[inline]
    pub(super) fn probe(&self, table: &MergeTable, left: u32, right: u32) -> Option<(u32, u32)> {
        let key = pair_key(left, right);
        let entry = &self.entries[self.slot(key)];
        if entry.0 == key {
            return Some((entry.1, entry.2));
        }
        if !table.may_merge(key) {
            return Some(NO_MERGE);
        }
        table.prefetch_pair(left, right);
        None
    }

    /// The entry of the pair `key`: the top bits of its product by a constant (Fibonacci hashing),
    /// which depend on every bit of both ids.
    #[inline]
    fn slot(&self, key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }
}

/// Every way to write each multi-byte token as two tokens, with the token's rank and id.
///
/// A token made by merge `i` has rank `i`. A token that no merge makes (a vocabulary may hold some)
/// ranks after all merges, in id order: tiktoken merges toward every token of its rank table, so these
/// must be reachable too, and that order is tiktoken's whenever ids follow merge order. Special tokens
/// are matched before pre-tokenization and never merged.
fn pair_ranks<M: AsRef<[u8]>>(
    ids: &FastMap<&[u8], u32>,
    merges: &[(M, M)],
    specials: &SpecialTokens,
) -> Result<PairRanks> {
    let lookup = |bytes: &[u8], what: &str, rank: usize| -> Result<u32> {
        ids.get(bytes).copied().ok_or_else(|| {
            Error::InvalidVocab(format!(
                "merge {rank} ({what}) is {:?}, which is not in the vocabulary",
                String::from_utf8_lossy(bytes)
            ))
        })
    };
    let table = |e: AllocError| e.named("the table of merges");
    let mut rank_of: FastMap<u32, u32> = FastMap::default();
    rank_of
        .try_reserve(merges.len())
        .map_err(|_| table(AllocError::of::<(u32, u32)>(merges.len())))?;
    let mut token = Vec::new();
    for (rank, (left, right)) in merges.iter().enumerate() {
        let (left, right) = (left.as_ref(), right.as_ref());
        lookup(left, "left", rank)?;
        lookup(right, "right", rank)?;
        token.clear();
        try_reserve(&mut token, left.len() + right.len()).map_err(table)?;
        token.extend_from_slice(left);
        token.extend_from_slice(right);
        // A token made by two merges keeps its first (lowest) rank.
        rank_of
            .entry(lookup(&token, "result", rank)?)
            .or_insert(rank as u32);
    }
    let mut unmerged: Vec<(u32, &[u8])> = Vec::new();
    try_reserve(&mut unmerged, ids.len()).map_err(table)?;
    unmerged.extend(
        ids.iter()
            .filter(|(t, id)| {
                t.len() > 1
                    && !rank_of.contains_key(id)
                    && !specials.tokens().iter().any(|s| s.as_bytes() == **t)
            })
            .map(|(t, &id)| (id, *t)),
    );
    unmerged.sort_unstable();
    let mut ranked: Vec<(u32, u32, &[u8])> = Vec::new();
    try_reserve(&mut ranked, rank_of.len() + unmerged.len()).map_err(table)?;
    for (t, &id) in ids {
        if let Some(&rank) = rank_of.get(&id) {
            ranked.push((rank, id, t));
        }
    }
    let base = merges.len() as u32;
    ranked.extend(
        unmerged
            .iter()
            .enumerate()
            .map(|(k, &(id, t))| (base + k as u32, id, t)),
    );
    // Only lengths some token has can split a token in two: looking up every split costs a token of n
    // bytes n hashes of up to n bytes, quadratic in the long tokens trained on long runs of one byte.
    let longest = ids.keys().map(|t| t.len()).max().unwrap_or(0);
    let mut has_len = try_vec(false, longest + 1).map_err(table)?;
    for t in ids.keys() {
        has_len[t.len()] = true;
    }
    let mut pairs = PairRanks::default();
    // Every token has at least one split in a trained vocabulary: room for one each, then more as needed.
    pairs
        .try_reserve(ranked.len())
        .map_err(|_| table(AllocError::of::<(u64, (u32, u32))>(ranked.len())))?;
    for (rank, merged, token) in ranked {
        for k in (1..token.len()).filter(|&k| has_len[k] && has_len[token.len() - k]) {
            if let (Some(&a), Some(&b)) = (ids.get(&token[..k]), ids.get(&token[k..])) {
                pairs
                    .try_reserve(1)
                    .map_err(|_| table(AllocError::of::<(u64, (u32, u32))>(pairs.len() + 1)))?;
                let slot = pairs.entry(pair_key(a, b)).or_insert((rank, merged));
                if rank < slot.0 {
                    *slot = (rank, merged);
                }
            }
        }
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::tests::xorshift;

    /// The pairs of a small trained vocabulary as [`pair_ranks`] finds them, and its table.
    fn trained_pairs() -> (PairRanks, MergeTable) {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let text: String = (0..20_000)
            .map(|_| b"abcde fgh"[xorshift(&mut seed) as usize % 9] as char)
            .collect();
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let mut counts = crate::PreTokenCounts::default();
        crate::count_text(&text, &specials, &mut counts).unwrap();
        let trained = crate::train_counts(&counts, 256 + 300, &specials, &crate::Silent).unwrap();
        let ids: FastMap<&[u8], u32> = (0..)
            .zip(&trained.vocab)
            .map(|(id, t)| (t.as_slice(), id))
            .collect();
        let token = |id: u32| trained.vocab[id as usize].as_slice();
        let merges: Vec<_> = trained
            .merges
            .iter()
            .map(|&(a, b)| (token(a), token(b)))
            .collect();
        let byte_ids: [u32; 256] = std::array::from_fn(|b| ids[[b as u8].as_slice()]);
        let map = pair_ranks(&ids, &merges, &specials).unwrap();
        assert!(map.len() >= 300, "{}", map.len());
        let table = MergeTable::new(&ids, byte_ids, &merges, &specials, true).unwrap();
        assert!(
            matches!(table.ranks, Pairs::Packed(_)),
            "ids of 16 bits are packed"
        );
        (map, table)
    }

    #[test]
    fn the_filter_of_pairs_answers_as_the_map_does() {
        let (ranks, table) = trained_pairs();
        // Every pair is found: the filter never turns one away.
        for (&key, &answer) in &ranks {
            assert_eq!(table.rank((key >> 32) as u32, key as u32), Some(answer));
        }
        // Pairs that do not merge, most of them turned away by the filter, the rest by the map.
        let ids = 256 + 300;
        let (mut asked, mut filtered) = (0, 0);
        for left in 0..ids {
            for right in 0..ids {
                let key = pair_key(left, right);
                if ranks.contains_key(&key) {
                    continue;
                }
                assert_eq!(table.rank(left, right), None);
                asked += 1;
                filtered += !table.may_merge(key) as u32;
            }
        }
        assert!(filtered * 10 >= asked * 8, "{filtered} of {asked}");
    }

    #[test]
    fn the_cache_answers_what_it_holds_and_what_the_filter_rules_out_and_defers_the_rest() {
        let (ranks, table) = trained_pairs();
        let mut cache = MergeCache::for_text(0).unwrap();
        let ids = 256 + 300;
        let (mut others, mut ruled_out) = (0, 0);
        for left in 0..ids {
            for right in 0..ids {
                let truth = ranks.get(&pair_key(left, right)).copied();
                match cache.probe(&table, left, right) {
                    // An answer at once is the table's, NO_MERGE only for a pair that does not merge.
                    Some(answer) => {
                        assert_eq!(answer, truth.unwrap_or(NO_MERGE), "{left} {right}");
                        ruled_out += truth.is_none() as u32;
                    }
                    // Deferred: a pair the filter lets through, answered by `get`, then cached.
                    None => {
                        assert!(table.may_merge(pair_key(left, right)), "{left} {right}");
                        let answer = cache.get(&table, left, right);
                        assert_eq!(answer, truth.unwrap_or(NO_MERGE), "{left} {right}");
                        assert_eq!(cache.probe(&table, left, right), Some(answer));
                    }
                }
                others += truth.is_none() as u32;
            }
        }
        // Most pairs that do not merge never wait: the filter turns 9 in 10 of them away.
        assert!(ruled_out * 10 >= others * 8, "{ruled_out} of {others}");
    }

    #[test]
    fn packed_pairs_answer_as_the_map_and_wide_ids_keep_the_map() {
        let (ranks, _) = trained_pairs();
        let packed = PackedPairs::new(&ranks).unwrap();
        // At most half full, and every pair kept once.
        assert!(packed.slots.len() >= 2 * ranks.len());
        assert_eq!(
            packed.slots.iter().filter(|&&e| e != 0).count(),
            ranks.len()
        );
        for left in 0..256 + 300 + 2 {
            for right in 0..256 + 300 + 2 {
                let expected = ranks.get(&pair_key(left, right)).copied();
                assert_eq!(packed.get(left, right), expected, "{left} {right}");
            }
        }
        // One id or one merged id past 16 bits, and the pairs stay in the map.
        for (key, value) in [
            (pair_key(1 << 16, 5), (0, 300)),
            (pair_key(5, 6), (0, 1 << 16)),
        ] {
            let mut wide = ranks.clone();
            wide.insert(key, value);
            assert!(
                matches!(Pairs::new(wide, true).unwrap(), Pairs::Map(m) if m.len() == ranks.len() + 1)
            );
        }
        // A wide id in no pair (a byte no merge uses) keeps the map too.
        let all = ranks.len();
        assert!(
            matches!(Pairs::new(ranks.clone(), false).unwrap(), Pairs::Map(m) if m.len() == all)
        );
        assert!(matches!(Pairs::new(ranks, true).unwrap(), Pairs::Packed(_)));
    }
}
