//! Which adjacent tokens merge, and at which rank: the table the encoder's merge loop asks, built from
//! the vocabulary and merges ([`pair_table`]), and a small cache in front of it ([`RecentPairs`]).

use std::collections::HashMap;

use crate::encode::Encoder;
use crate::error::{try_reserve, try_vec, AllocError, Error, Result};
use crate::special::SpecialTokens;

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The rank of a pair that is not a merge: greater than every real rank.
pub(crate) const NO_MERGE: (u32, u32) = (u32::MAX, 0);

/// For each pair of token ids whose concatenation is a multi-byte token: that token's rank and id. The
/// key packs the two ids into a u64.
pub(crate) type PairTable = FastMap<u64, (u32, u32)>;

#[inline]
pub(crate) fn pair_key(left: u32, right: u32) -> u64 {
    (left as u64) << 32 | right as u64
}

/// A direct-mapped cache of the pair table's answers, in front of it for [`Encoder::merge_short`]. The
/// pair table holds every split of every token (108K pairs for GPT-2, megabytes), and about half of
/// merging's time was waiting on its memory (perf); the pairs merging asks about repeat from piece to
/// piece, and 4096 of them fit in 64 KB.
pub(crate) struct RecentPairs {
    /// (left id << 32 | right id, rank, merged id); an empty entry has a key no pair of ids has.
    entries: Vec<(u64, u32, u32)>,
    /// 64 minus log2 of the number of entries: the hash is the top bits of a product.
    shift: u32,
}

impl RecentPairs {
    /// Enough entries for a text of `text_len` bytes, from 64 to 4096 (64 KB), so that a short text
    /// does not pay to fill a large table: one entry per 16 bytes of text.
    pub(crate) fn for_text(text_len: usize) -> std::result::Result<RecentPairs, AllocError> {
        let n = Self::entries_for(text_len);
        Ok(RecentPairs {
            entries: try_vec((u64::MAX, NO_MERGE.0, NO_MERGE.1), n)?,
            shift: 64 - n.trailing_zeros(),
        })
    }

    /// The number of entries [`Self::for_text`] gives a text of `text_len` bytes.
    pub(crate) fn entries_for(text_len: usize) -> usize {
        (text_len / 16).next_power_of_two().clamp(64, 4096)
    }

    /// The number of entries.
    pub(crate) fn entries(&self) -> usize {
        self.entries.len()
    }

    /// The (rank, merged id) of `left` then `right`, or [`NO_MERGE`].
    #[inline]
    pub(crate) fn get(&mut self, encoder: &Encoder, left: u32, right: u32) -> (u32, u32) {
        let key = pair_key(left, right);
        // Fibonacci hashing: the top bits of the product depend on every bit of both ids.
        let slot = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        let entry = &mut self.entries[slot];
        if entry.0 != key {
            let (rank, merged) = encoder.rank(left, right).unwrap_or(NO_MERGE);
            *entry = (key, rank, merged);
        }
        (entry.1, entry.2)
    }
}

/// Every way to write each multi-byte token as two tokens, with the token's rank (see module docs).
///
/// A token made by merge `i` has rank `i`. A token that no merge makes (a vocabulary may hold some)
/// ranks after all merges, in id order: tiktoken merges toward every token of its rank table, so these
/// must be reachable too, and that order is tiktoken's whenever ids follow merge order. Special tokens
/// are matched before pre-tokenization and never merged.
pub(crate) fn pair_table<M: AsRef<[u8]>>(
    ids: &FastMap<&[u8], u32>,
    merges: &[(M, M)],
    specials: &SpecialTokens,
) -> Result<PairTable> {
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
    // bytes n hashes of up to n bytes, and the tokens trained on one 10 MB run (up to 1 MB) took 72 s.
    let longest = ids.keys().map(|t| t.len()).max().unwrap_or(0);
    let mut has_len = try_vec(false, longest + 1).map_err(table)?;
    for t in ids.keys() {
        has_len[t.len()] = true;
    }
    let mut pairs = PairTable::default();
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
