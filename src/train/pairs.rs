//! [`PairCounts`]: the adjacent pairs of tokens training may merge next, with their counts and the words
//! that hold them.
//!
//! A corpus of millions of distinct pre-tokens has millions of distinct pairs, nearly all of them rare
//! (a pair seen in one rare word), and a trainer that keeps a count, a list of words and heap entries for
//! each of them spends more memory on them than on the words. Only the most frequent pairs can be merged
//! within the merges asked for, so the trainer *tracks* only the pairs whose count is at least a
//! threshold `T`, and that is exact:
//!
//! - Every pair of count `>= T` is tracked, with its exact count and a list of the words that hold it;
//!   pairs below `T` may be untracked. So while some tracked pair is left, the greatest tracked pair is
//!   the greatest pair: an untracked one counts less than `T`.
//! - A pair's count never rises after the step that created it (a step only makes pairs that hold its
//!   new id), so a pair untracked for being below `T` stays below `T`.
//! - When no tracked pair is left but pairs may be, [`PairCounts::rescan`] counts every pair of the
//!   words again and lowers `T`. When too many pairs are tracked, [`PairCounts::prune`] raises `T` and
//!   drops the pairs below it.
//!
//! `T` is chosen so that about [`PairCounts::budget`] pairs are tracked: several times the merges still to
//! make, so that rescans are rare (a rescan reads every word).
//!
//! The word lists ([`WordList`]) hold words (their offsets among the words' records) in increasing
//! order, as gaps in LEB128 varints: the lists of the first pairs, which hold nearly every (word, pair)
//! of the corpus, are most of the memory left besides the words. Every list is written in increasing
//! order: the first lists by one pass over the words, exactly sized, and the list of a pair made by a
//! step while the step visits the holders of the pair it merges, whose list is in increasing order.
//!
//! Invariants: a tracked pair's count is the exact number of its occurrences in the current words,
//! weighted by word count, and is at least `T` (pairs that fall below leave); its list holds every word
//! that contains it, each once, in increasing order (and possibly words that no longer contain it, where
//! the rewrite finds nothing to do).

use std::collections::hash_map::Entry;

use super::heap::{Candidate, Pair};
use super::memory;
use super::words::{PairChanges, Symbol, Words};
use crate::bytes_map::FastMap;
use crate::error::{try_reserve, AllocError};

/// The words that hold a pair (their offsets, see [`Words::iter`]), in increasing order, as varint
/// gaps from the previous one.
#[derive(Debug, Default)]
pub(super) struct WordList {
    bytes: Vec<u8>,
    last: u64,
}

/// The bytes of `gap` as a varint.
#[inline]
fn varint_size(gap: u64) -> usize {
    (64 - (gap | 1).leading_zeros() as usize).div_ceil(7)
}

impl WordList {
    /// Appends `w` unless it is the last word already; `w` is never smaller than the last word.
    #[inline]
    fn push(&mut self, w: u64) -> Result<(), AllocError> {
        if !self.bytes.is_empty() && w == self.last {
            return Ok(());
        }
        let mut gap = w - self.last;
        let size = varint_size(gap);
        // Lists made at their exact size (see `rescan`) never grow; the others grow as vectors do.
        if self.bytes.capacity() - self.bytes.len() < size {
            try_reserve(&mut self.bytes, size)?;
        }
        while gap >= 0x80 {
            self.bytes.push(gap as u8 | 0x80);
            gap >>= 7;
        }
        self.bytes.push(gap as u8);
        self.last = w;
        Ok(())
    }

    /// The words, in increasing order.
    pub(super) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let (mut at, mut w) = (0, 0u64);
        std::iter::from_fn(move || {
            let (mut gap, mut shift) = (0u64, 0);
            loop {
                let b = *self.bytes.get(at)?;
                at += 1;
                gap |= ((b & 0x7F) as u64) << shift;
                if b < 0x80 {
                    w += gap;
                    return Some(w);
                }
                shift += 7;
            }
        })
    }
}

/// A tracked pair's count and the words that hold it.
#[derive(Debug, Default)]
pub(super) struct PairStats {
    /// Occurrences, weighted by word count.
    pub(super) count: i64,
    pub(super) words: WordList,
}

/// The tracked pairs, and the pairs the current step makes.
pub(super) struct PairCounts {
    tracked: FastMap<Pair, PairStats>,
    /// The pairs the current step made (they hold its id), tracked or not when the step ends.
    made: FastMap<Pair, PairStats>,
    /// The id the current step makes.
    id: u32,
    /// Pairs of this count or more are tracked.
    threshold: i64,
}

/// Room for one more pair in `map` (a check of the room left, as an insert makes anyway).
#[inline]
fn try_reserve_map(map: &mut FastMap<Pair, PairStats>) -> Result<(), AllocError> {
    map.try_reserve(1)
        .map_err(|_| AllocError::of::<(Pair, PairStats)>(map.len() + 1))
}

/// The fewest pairs worth tracking, however few merges are left: a few megabytes.
const MIN_BUDGET: usize = 1 << 16;

impl PairCounts {
    /// The pairs of `words`, tracking about `budget` of them (all when there are not many more).
    pub(super) fn new<S: Symbol>(
        words: &Words<S>,
        budget: usize,
    ) -> Result<PairCounts, AllocError> {
        let mut pairs = PairCounts {
            tracked: FastMap::default(),
            made: FastMap::default(),
            id: u32::MAX,
            threshold: 1,
        };
        pairs.rescan(words, budget)?;
        Ok(pairs)
    }

    /// How many pairs to track with `merges_left` merges to make.
    pub(super) fn budget(merges_left: usize) -> usize {
        merges_left.saturating_mul(4).max(MIN_BUDGET)
    }

    /// The count below which pairs are not tracked.
    pub(super) fn threshold(&self) -> i64 {
        self.threshold
    }

    /// The number of tracked pairs.
    pub(super) fn len(&self) -> usize {
        self.tracked.len()
    }

    /// The tracked pairs as heap candidates.
    pub(super) fn candidates(&self) -> impl Iterator<Item = Candidate> + '_ {
        self.tracked.iter().map(|(&pair, s)| Candidate {
            count: s.count,
            pair,
        })
    }

    /// The live count of a tracked pair.
    pub(super) fn count(&self, pair: &Pair) -> Option<i64> {
        self.tracked.get(pair).map(|s| s.count)
    }

    /// Starts the step that merges `pair` into `id`: untracks `pair` and returns its words.
    pub(super) fn begin_step(&mut self, pair: &Pair, id: u32) -> WordList {
        self.id = id;
        self.tracked
            .remove(pair)
            .map(|s| s.words)
            .unwrap_or_default()
    }

    /// Ends the step: tracks the pairs it made that reach the threshold, and passes each to `push`.
    pub(super) fn end_step(
        &mut self,
        mut push: impl FnMut(Candidate) -> Result<(), AllocError>,
    ) -> Result<(), AllocError> {
        self.tracked.try_reserve(self.made.len()).map_err(|_| {
            AllocError::of::<(Pair, PairStats)>(self.tracked.len() + self.made.len())
        })?;
        for (pair, s) in self.made.drain() {
            if s.count >= self.threshold {
                push(Candidate {
                    count: s.count,
                    pair,
                })?;
                self.tracked.insert(pair, s);
            }
        }
        self.id = u32::MAX;
        Ok(())
    }

    /// Raises the threshold so that about `budget` pairs stay tracked, when more than twice as many
    /// are; returns whether it did (then the heap holds pairs no longer tracked).
    pub(super) fn prune(&mut self, budget: usize) -> Result<bool, AllocError> {
        if self.tracked.len() <= budget.saturating_mul(2) {
            return Ok(false);
        }
        let mut counts = Vec::new();
        try_reserve(&mut counts, self.tracked.len())?;
        counts.extend(self.tracked.values().map(|s| s.count));
        let threshold = threshold_for(&mut counts, budget);
        if threshold <= self.threshold {
            return Ok(false);
        }
        self.threshold = threshold;
        self.tracked.retain(|_, s| s.count >= threshold);
        self.tracked.shrink_to_fit();
        memory::return_freed_memory();
        Ok(true)
    }

    /// Counts every pair of `words` afresh, sets the threshold so that about `budget` pairs are
    /// tracked (all of them when there are not many more), and makes their word lists. Returns whether
    /// some pair is left.
    pub(super) fn rescan<S: Symbol>(
        &mut self,
        words: &Words<S>,
        budget: usize,
    ) -> Result<bool, AllocError> {
        self.tracked = FastMap::default();
        // Per pair: its count, the bytes of its list, and the last word counted, for the list's size.
        let mut all: FastMap<Pair, (i64, usize, u64)> = FastMap::default();
        for (w, count, symbols) in words.iter() {
            for pair in symbols.windows(2) {
                all.try_reserve(1)
                    .map_err(|_| AllocError::of::<(Pair, (i64, usize, u64))>(all.len() + 1))?;
                let (c, size, last) = all.entry((pair[0].id(), pair[1].id())).or_insert((0, 0, 0));
                if *size == 0 {
                    *size = varint_size(w);
                } else if *last != w {
                    *size += varint_size(w - *last);
                }
                *c += count;
                *last = w;
            }
        }
        if all.is_empty() {
            return Ok(false);
        }
        let mut counts = Vec::new();
        try_reserve(&mut counts, all.len())?;
        counts.extend(all.values().map(|&(c, _, _)| c));
        self.threshold = match all.len() > budget.saturating_mul(2) {
            true => threshold_for(&mut counts, budget),
            false => 1,
        };
        drop(counts);
        let threshold = self.threshold;
        all.retain(|_, &mut (c, _, _)| c >= threshold);
        self.tracked
            .try_reserve(all.len())
            .map_err(|_| AllocError::of::<(Pair, PairStats)>(all.len()))?;
        for (&pair, &(count, size, _)) in &all {
            let mut words = WordList::default();
            words
                .bytes
                .try_reserve_exact(size)
                .map_err(|_| AllocError::of::<u8>(size))?;
            self.tracked.insert(pair, PairStats { count, words });
        }
        drop(all);
        memory::return_freed_memory();
        for (w, _, symbols) in words.iter() {
            for pair in symbols.windows(2) {
                if let Some(s) = self.tracked.get_mut(&(pair[0].id(), pair[1].id())) {
                    s.words.push(w)?;
                }
            }
        }
        Ok(true)
    }
}

impl PairChanges for PairCounts {
    /// Takes `count` off `pair`, which the step removed from a word; a tracked pair that falls below
    /// the threshold is untracked.
    #[inline]
    fn sub(&mut self, pair: Pair, count: i64) {
        // A pair that holds the step's id is one the step made: it is kept or not when the step ends.
        let made = pair.0 == self.id || pair.1 == self.id;
        let map = if made {
            &mut self.made
        } else {
            &mut self.tracked
        };
        if let Entry::Occupied(mut s) = map.entry(pair) {
            s.get_mut().count -= count;
            if !made && s.get().count < self.threshold {
                s.remove();
            }
        }
    }

    /// Adds `count` to `pair`, which the step made in `word` (it holds the step's id).
    #[inline]
    fn add(&mut self, pair: Pair, count: i64, word: u64) -> Result<(), AllocError> {
        try_reserve_map(&mut self.made)?;
        let s = self.made.entry(pair).or_default();
        s.count += count;
        s.words.push(word)
    }
}

/// The count of the `budget`-th most frequent pair of `counts` (reordering them), at least 1.
fn threshold_for(counts: &mut [i64], budget: usize) -> i64 {
    let k = budget.min(counts.len() - 1);
    let (_, &mut nth, _) = counts.select_nth_unstable_by(k, |a, b| b.cmp(a));
    nth.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_lists_give_back_what_was_pushed() {
        let mut list = WordList::default();
        let words = [
            0,
            1,
            1,
            2,
            127,
            128,
            300,
            16_384,
            16_385,
            2_000_000,
            1 << 40,
            u64::MAX,
        ];
        for &w in &words {
            list.push(w).unwrap();
        }
        let mut expected = words.to_vec();
        expected.dedup();
        assert_eq!(list.iter().collect::<Vec<_>>(), expected);
        let size: usize = expected
            .iter()
            .scan(0, |last, &w| {
                let gap = w - *last;
                *last = w;
                Some(varint_size(gap))
            })
            .sum();
        assert_eq!(list.bytes.len(), size);
    }
}
