//! The words training merges in, and the counts of their adjacent token pairs, both updated in place
//! by each merge.
//!
//! Each distinct pre-token becomes a *word*: a sequence of token ids (its bytes, at first) with the
//! number of times the pre-token occurs ([`Words`]). For every adjacent pair of tokens, [`PairCounts`]
//! keeps its total count over all words and the list of words that hold it ([`PairStats`]). A merge
//! ([`Words::merge`]) rewrites only the words on its pair's list, and adjusts the counts of the pairs
//! around each rewritten occurrence: a step costs what it changes, not the size of the corpus.
//!
//! Invariants a merge relies on and keeps:
//! - [`PairStats::count`] is the exact number of occurrences, weighted by word count, of the pair in
//!   the current words; pairs at zero are removed from the map.
//! - [`PairStats::words`] holds every word that contains the pair (and possibly some that no longer do:
//!   rewriting a word leaves it on the lists of pairs it lost; the rewrite finds nothing to do there).
//!   It holds each word once: a pair is only ever created in one step (the initial count, or the step
//!   that creates the newer of its two tokens), and words are visited once per step.

use std::collections::hash_map::Entry;

use super::count::PreTokenCounts;
use super::heap::Pair;
use crate::bytes_map::FastMap;
use crate::error::{try_push, try_reserve, AllocError};

/// Every adjacent pair of tokens in the words, with its count and the words that hold it.
pub(super) type PairCounts = FastMap<Pair, PairStats>;

/// The count of a pair and the words that hold it.
#[derive(Default)]
pub(super) struct PairStats {
    /// Occurrences, weighted by word count.
    pub(super) count: i64,
    /// The words that hold the pair, each once.
    words: Vec<u32>,
}

/// The distinct pre-tokens of length two or more, as token ids, stored end to end. A word shrinks in
/// place as merges apply; its slot keeps its start.
pub(super) struct Words {
    symbols: Vec<u32>,
    start: Vec<usize>,
    len: Vec<u32>,
    count: Vec<i64>,
}

/// Counts every adjacent pair in `words`, weighted by word count, and lists the words that hold it.
pub(super) fn count_pairs(words: &Words) -> Result<PairCounts, AllocError> {
    let mut pairs = PairCounts::default();
    for w in 0..words.len.len() {
        let symbols = words.symbols(w);
        for pair in symbols.windows(2) {
            try_reserve_map(&mut pairs)?;
            let s = pairs.entry((pair[0], pair[1])).or_default();
            s.count += words.count[w];
            if s.words.last() != Some(&(w as u32)) {
                try_push(&mut s.words, w as u32)?;
            }
        }
    }
    Ok(pairs)
}

/// Room for one more pair in `pairs` (a check of the room left, as an insert makes anyway).
#[inline]
fn try_reserve_map(pairs: &mut PairCounts) -> Result<(), AllocError> {
    pairs
        .try_reserve(1)
        .map_err(|_| AllocError::of::<(Pair, PairStats)>(pairs.len() + 1))
}

impl Words {
    /// The words of `counts`, in memory allocated once (the total length is counted first).
    pub(super) fn new(counts: &PreTokenCounts) -> Result<Words, AllocError> {
        let (mut n, mut total) = (0, 0);
        counts.for_each(|piece, _| {
            if piece.len() >= 2 {
                (n, total) = (n + 1, total + piece.len());
            }
        });
        let mut words = Words {
            symbols: Vec::new(),
            start: Vec::new(),
            len: Vec::new(),
            count: Vec::new(),
        };
        try_reserve(&mut words.symbols, total)?;
        try_reserve(&mut words.start, n)?;
        try_reserve(&mut words.len, n)?;
        try_reserve(&mut words.count, n)?;
        counts.for_each(|piece, count| {
            if piece.len() >= 2 {
                words.start.push(words.symbols.len());
                words.len.push(piece.len() as u32);
                words.count.push(count as i64);
                words.symbols.extend(piece.iter().map(|&b| b as u32));
            }
        });
        Ok(words)
    }

    /// The symbols of all words, merged or not: a bound on the number of merges.
    pub(super) fn symbol_count(&self) -> usize {
        self.symbols.len()
    }

    fn symbols(&self, w: usize) -> &[u32] {
        &self.symbols[self.start[w]..self.start[w] + self.len[w] as usize]
    }

    /// Replaces every occurrence of `pair` (left to right, without overlap) by `id` in the words that
    /// hold it, and updates `pairs`. Returns the pairs this step created (they hold `id`), for the
    /// queue.
    pub(super) fn merge(
        &mut self,
        pair: Pair,
        id: u32,
        pairs: &mut PairCounts,
    ) -> Result<Vec<Pair>, AllocError> {
        let (a, b) = pair;
        let holders = pairs.remove(&pair).map(|s| s.words).unwrap_or_default();
        let mut created: Vec<Pair> = Vec::new();
        let mut emptied: Vec<Pair> = Vec::new();
        for w in holders {
            let count = self.count[w as usize];
            let start = self.start[w as usize];
            let len = self.len[w as usize] as usize;
            let symbols = &mut self.symbols[start..start + len];
            let mut add = |p: Pair, delta: i64| -> Result<(), AllocError> {
                if p == pair {
                    return Ok(());
                }
                try_reserve_map(pairs)?;
                let s = match pairs.entry(p) {
                    Entry::Occupied(s) => s.into_mut(),
                    Entry::Vacant(slot) => {
                        try_push(&mut created, p)?;
                        slot.insert(PairStats::default())
                    }
                };
                s.count += delta;
                if delta > 0 {
                    if s.words.last() != Some(&w) {
                        try_push(&mut s.words, w)?;
                    }
                } else if s.count == 0 {
                    try_push(&mut emptied, p)?;
                }
                Ok(())
            };
            // Rewrite in place: `out` trails `read`, so the symbol before an occurrence is already
            // rewritten (it may be `id` itself), which is what the new left pair must use.
            let (mut read, mut out) = (0, 0);
            while read < len {
                if read + 1 < len && symbols[read] == a && symbols[read + 1] == b {
                    if out > 0 {
                        let prev = symbols[out - 1];
                        add((prev, a), -count)?;
                        add((prev, id), count)?;
                    }
                    if read + 2 < len {
                        let next = symbols[read + 2];
                        add((b, next), -count)?;
                        add((id, next), count)?;
                    }
                    symbols[out] = id;
                    read += 2;
                } else {
                    symbols[out] = symbols[read];
                    read += 1;
                }
                out += 1;
            }
            self.len[w as usize] = out as u32;
        }
        for p in emptied.iter().chain(&created) {
            if pairs.get(p).is_some_and(|s| s.count <= 0) {
                pairs.remove(p);
            }
        }
        created.retain(|p| pairs.contains_key(p));
        Ok(created)
    }
}
