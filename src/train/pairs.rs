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
//! of the corpus, are most of the memory left besides the words. Every list is written once, in
//! increasing order and at its exact size, counted beforehand ([`Tally`]): the first lists by a second
//! pass over the words, and the list of a pair made by a step when the step ends, from its log of the
//! words it rewrote in the order it visited them (the merged pair's list, increasing), only for the
//! made pairs that stay tracked.
//!
//! A step merging `(a, b)` into `id` changes only pairs next to an occurrence: `(x, a)` and `(b, y)`
//! lose, `(x, id)` and `(id, y)` gain. It gathers those changes in arrays indexed by the neighbour
//! token `x` or `y` ([`Step`]), and takes the losses off the tracked map when it ends: one lookup per
//! distinct neighbour instead of one per occurrence. Before the first merge every symbol is a byte,
//! and the pairs are counted in a table of all 65,536 byte pairs instead of a hash map.
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
    /// Lists are made at their exact size (see [`Tally`]), so a push never grows one.
    #[inline(always)]
    fn push(&mut self, w: u64) -> Result<(), AllocError> {
        if !self.bytes.is_empty() && w == self.last {
            return Ok(());
        }
        let mut gap = w - self.last;
        self.last = w;
        let size = varint_size(gap);
        if self.bytes.capacity() - self.bytes.len() < size {
            try_reserve(&mut self.bytes, size)?;
        }
        while gap >= 0x80 {
            self.bytes.push(gap as u8 | 0x80);
            gap >>= 7;
        }
        self.bytes.push(gap as u8);
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

/// A token next to the pair a step merges, `(a, b)` into `id`: `x` on the left, `y` on the right.
#[derive(Clone, Copy)]
struct Neighbour {
    /// The occurrences the step took from `(x, a)` (or `(b, y)`), weighted by word count.
    lost: i64,
    /// The pair `(x, id)` (or `(id, y)`) in [`Step::made`], or [`NONE`].
    made: u32,
}

/// No made pair yet, in [`Neighbour::made`].
const NONE: u32 = u32::MAX;

const UNTOUCHED: Neighbour = Neighbour {
    lost: 0,
    made: NONE,
};

/// A pair the current step made: it holds the step's id.
struct Made {
    pair: Pair,
    /// Which neighbour array names it: the left one for `(x, id)`, the right one for `(id, y)`.
    on_left: bool,
    /// Its count, and the size of its word list.
    tally: Tally,
    /// Its word list, made only when the step ends with the pair tracked.
    words: Option<WordList>,
}

/// What the current step changes, gathered by neighbour token so that the tracked map is looked up
/// once per distinct neighbour when the step ends, not once per occurrence.
struct Step {
    pair: Pair,
    id: u32,
    /// Indexed by token id: `x` of `(x, a)` and `(x, id)`.
    left: Vec<Neighbour>,
    /// Indexed by token id: `y` of `(b, y)` and `(id, y)`.
    right: Vec<Neighbour>,
    made: Vec<Made>,
    /// Each word that made a pair, once for each pair it made, with the pair's index in `made`, in the
    /// order the step visits them: the lists of the pairs left tracked are written from it when the
    /// step ends, exactly sized.
    log: Vec<(u64, u32)>,
}

impl Step {
    /// Counts `count` occurrences of the made pair of `neighbour` in `word`.
    #[inline(always)]
    fn make(
        made: &mut Vec<Made>,
        log: &mut Vec<(u64, u32)>,
        neighbour: &mut Neighbour,
        pair: Pair,
        on_left: bool,
        count: i64,
        word: u64,
    ) -> Result<(), AllocError> {
        if neighbour.made == NONE {
            try_reserve(made, 1)?;
            neighbour.made = made.len() as u32;
            made.push(Made {
                pair,
                on_left,
                tally: Tally::default(),
                words: None,
            });
        }
        let tally = &mut made[neighbour.made as usize].tally;
        // A word is logged once a made pair, however many times it holds the pair: a word of
        // millions of occurrences would otherwise log as many.
        let new_word = tally.size == 0 || tally.last != word;
        tally.add(count, word);
        if new_word {
            if log.len() == log.capacity() {
                try_reserve(log, 1)?;
            }
            log.push((word, neighbour.made));
        }
        Ok(())
    }
}

/// The tracked pairs, and the pairs the current step makes.
pub(super) struct PairCounts {
    tracked: FastMap<Pair, PairStats>,
    step: Step,
    /// Pairs of this count or more are tracked.
    threshold: i64,
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
            step: Step {
                pair: (u32::MAX, u32::MAX),
                id: u32::MAX,
                left: Vec::new(),
                right: Vec::new(),
                made: Vec::new(),
                log: Vec::new(),
            },
            threshold: 1,
        };
        // Before the first merge, every symbol is a byte.
        pairs.rescan(words, 256, budget)?;
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

    /// Starts the step that merges `pair` into `id`, the greatest id so far: untracks `pair` and
    /// returns its words.
    pub(super) fn begin_step(&mut self, pair: &Pair, id: u32) -> Result<WordList, AllocError> {
        let step = &mut self.step;
        let tokens = id as usize + 1;
        for side in [&mut step.left, &mut step.right] {
            try_reserve(side, tokens.saturating_sub(side.len()))?;
            side.resize(tokens.max(side.len()), UNTOUCHED);
        }
        step.pair = *pair;
        step.id = id;
        Ok(self
            .tracked
            .remove(pair)
            .map(|s| s.words)
            .unwrap_or_default())
    }

    /// Ends the step: takes what it lost off the tracked pairs (untracking those that fall below the
    /// threshold), tracks the pairs it made that reach the threshold, and passes each to `push`.
    pub(super) fn end_step(
        &mut self,
        mut push: impl FnMut(Candidate) -> Result<(), AllocError>,
    ) -> Result<(), AllocError> {
        let step = &mut self.step;
        let (a, b) = step.pair;
        let mut tracked_made = 0;
        for m in &mut step.made {
            // The made pair's neighbour is also the lost pair's: (x, id) beside (x, a), (id, y) beside
            // (b, y). `(id, id)` has no lost pair: what was before it was `(id, a)`, a made pair.
            let (neighbour, lost) = match m.on_left {
                true => (&mut step.left[m.pair.0 as usize], (m.pair.0, a)),
                false => (&mut step.right[m.pair.1 as usize], (b, m.pair.1)),
            };
            if neighbour.lost != 0 {
                if let Entry::Occupied(mut s) = self.tracked.entry(lost) {
                    s.get_mut().count -= neighbour.lost;
                    if s.get().count < self.threshold {
                        s.remove();
                    }
                }
            }
            *neighbour = UNTOUCHED;
            if m.tally.count >= self.threshold {
                m.words = Some(m.tally.list()?);
                tracked_made += 1;
            }
        }
        for &(word, made) in &step.log {
            if let Some(words) = &mut step.made[made as usize].words {
                words.push(word)?;
            }
        }
        step.log.clear();
        self.tracked
            .try_reserve(tracked_made)
            .map_err(|_| AllocError::of::<(Pair, PairStats)>(self.tracked.len() + tracked_made))?;
        for m in step.made.drain(..) {
            if let Some(words) = m.words {
                let count = m.tally.count;
                push(Candidate {
                    count,
                    pair: m.pair,
                })?;
                self.tracked.insert(m.pair, PairStats { count, words });
            }
        }
        step.id = u32::MAX;
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
    /// tracked (all of them when there are not many more), and makes their word lists. Every symbol of
    /// the words is below `tokens`. Returns whether some pair is left.
    pub(super) fn rescan<S: Symbol>(
        &mut self,
        words: &Words<S>,
        tokens: usize,
        budget: usize,
    ) -> Result<bool, AllocError> {
        self.tracked = FastMap::default();
        match tokens <= DENSE_TOKENS {
            true => self.rescan_dense(words, tokens, budget),
            false => self.rescan_sparse(words, budget),
        }
    }

    /// [`Self::rescan`] with a table of every possible pair, indexed by its two ids: with few tokens
    /// (the bytes, before the first merge), an index is cheaper than a hash-map lookup, and the pairs
    /// are counted, then listed, once for each pair of symbols in the words.
    fn rescan_dense<S: Symbol>(
        &mut self,
        words: &Words<S>,
        tokens: usize,
        budget: usize,
    ) -> Result<bool, AllocError> {
        let index = |pair: &[S]| pair[0].id() as usize * tokens + pair[1].id() as usize;
        let mut tallies = Vec::new();
        try_reserve(&mut tallies, tokens * tokens)?;
        tallies.resize(tokens * tokens, Tally::default());
        for (w, count, symbols) in words.iter() {
            for pair in symbols.windows(2) {
                tallies[index(pair)].add(count, w);
            }
        }
        if !self.set_threshold(tallies.iter().filter(|t| t.count > 0), budget)? {
            return Ok(false);
        }
        let threshold = self.threshold;
        let mut lists = Vec::new();
        try_reserve(&mut lists, tallies.len())?;
        for t in &tallies {
            lists.push(match t.count >= threshold {
                true => t.list()?,
                false => WordList::default(),
            });
        }
        for (w, _, symbols) in words.iter() {
            for pair in symbols.windows(2) {
                let i = index(pair);
                if tallies[i].count >= threshold {
                    lists[i].push(w)?;
                }
            }
        }
        let tracked = tallies.iter().filter(|t| t.count >= threshold).count();
        self.tracked
            .try_reserve(tracked)
            .map_err(|_| AllocError::of::<(Pair, PairStats)>(tracked))?;
        for (i, (t, words)) in tallies.iter().zip(lists).enumerate() {
            if t.count >= threshold {
                let pair = ((i / tokens) as u32, (i % tokens) as u32);
                let count = t.count;
                self.tracked.insert(pair, PairStats { count, words });
            }
        }
        Ok(true)
    }

    /// [`Self::rescan`] with a hash map of the pairs the words hold.
    fn rescan_sparse<S: Symbol>(
        &mut self,
        words: &Words<S>,
        budget: usize,
    ) -> Result<bool, AllocError> {
        let mut all: FastMap<Pair, Tally> = FastMap::default();
        for (w, count, symbols) in words.iter() {
            for pair in symbols.windows(2) {
                all.try_reserve(1)
                    .map_err(|_| AllocError::of::<(Pair, Tally)>(all.len() + 1))?;
                all.entry((pair[0].id(), pair[1].id()))
                    .or_default()
                    .add(count, w);
            }
        }
        if !self.set_threshold(all.values(), budget)? {
            return Ok(false);
        }
        let threshold = self.threshold;
        all.retain(|_, t| t.count >= threshold);
        self.tracked
            .try_reserve(all.len())
            .map_err(|_| AllocError::of::<(Pair, PairStats)>(all.len()))?;
        for (&pair, t) in &all {
            let (count, words) = (t.count, t.list()?);
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

    /// Sets the threshold so that about `budget` of the pairs `tallies` counts are tracked (all of
    /// them when there are not many more); returns whether there is any pair.
    fn set_threshold<'t>(
        &mut self,
        tallies: impl Iterator<Item = &'t Tally> + Clone,
        budget: usize,
    ) -> Result<bool, AllocError> {
        let pairs = tallies.clone().count();
        if pairs == 0 {
            return Ok(false);
        }
        self.threshold = match pairs > budget.saturating_mul(2) {
            true => {
                let mut counts = Vec::new();
                try_reserve(&mut counts, pairs)?;
                counts.extend(tallies.map(|t| t.count));
                threshold_for(&mut counts, budget)
            }
            false => 1,
        };
        Ok(true)
    }
}

/// A pair as a rescan counts it: its count, and the bytes of its word list with the last word counted
/// in them, so that the list is made at its exact size.
#[derive(Clone, Copy, Default)]
struct Tally {
    count: i64,
    size: usize,
    last: u64,
}

impl Tally {
    /// Counts an occurrence in word `w` of `count` occurrences; `w` is never smaller than the last.
    #[inline]
    fn add(&mut self, count: i64, w: u64) {
        if self.size == 0 {
            self.size = varint_size(w);
        } else if self.last != w {
            self.size += varint_size(w - self.last);
        }
        self.count += count;
        self.last = w;
    }

    /// An empty word list with room for the words counted.
    fn list(&self) -> Result<WordList, AllocError> {
        let mut words = WordList::default();
        words
            .bytes
            .try_reserve_exact(self.size)
            .map_err(|_| AllocError::of::<u8>(self.size))?;
        Ok(words)
    }
}

/// The most tokens for which a rescan counts pairs in a table of every possible pair (as many entries
/// as tokens squared): the bytes, before the first merge.
const DENSE_TOKENS: usize = 256;

impl PairChanges for PairCounts {
    #[inline]
    fn left(&mut self, x: u32, count: i64, word: u64) -> Result<(), AllocError> {
        let step = &mut self.step;
        if x == step.id {
            // The occurrence follows another in the word: the pair before it was `(id, a)`, which
            // the step made itself.
            let made = step.right[step.pair.0 as usize].made;
            if made != NONE {
                step.made[made as usize].tally.count -= count;
            }
        } else {
            step.left[x as usize].lost += count;
        }
        let neighbour = &mut step.left[x as usize];
        Step::make(
            &mut step.made,
            &mut step.log,
            neighbour,
            (x, step.id),
            true,
            count,
            word,
        )
    }

    #[inline]
    fn right(&mut self, y: u32, count: i64, word: u64) -> Result<(), AllocError> {
        let step = &mut self.step;
        let neighbour = &mut step.right[y as usize];
        neighbour.lost += count;
        Step::make(
            &mut step.made,
            &mut step.log,
            neighbour,
            (step.id, y),
            false,
            count,
            word,
        )
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
