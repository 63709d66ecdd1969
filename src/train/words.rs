//! The words training merges in, rewritten in place by each merge.
//!
//! Each distinct pre-token of two bytes or more becomes a *word*: a sequence of token ids (its bytes, at
//! first) with the number of times the pre-token occurs ([`Words`]). A merge ([`Words::merge`]) rewrites
//! only the words on its pair's list ([`super::pairs`]), and adjusts the counts of the pairs around each
//! rewritten occurrence: a step costs what it changes, not the size of the corpus.
//!
//! The words are most of training's memory and the merge loop's cache misses, so each word is one
//! record in one array: a header (its count, 8 bytes, and the length of its span, 4 bytes) then its
//! span of symbols, ids of two bytes when the vocabulary fits them ([`Symbol`]). A word is named by its
//! offset in the array, which is what the pairs' lists hold: rewriting a word touches the cache lines of
//! its record and nothing else. A word shortened by merges ends at its first [`Symbol::END`]; the rest
//! of its span is left as it was.
//!
//! Invariants: records lie end to end from offset 0; a span never changes length; a word's live
//! symbols are a prefix of its span, followed by `END` when shorter than the span; every live symbol is
//! an id below `END`.

use super::heap::Pair;
use crate::error::AllocError;
use crate::huge_pages;
use crate::prefetch::prefetch;

/// The type of a token id in the words.
pub(super) trait Symbol: Copy + Eq + Send + Sync + 'static {
    /// Marks the end of a word shorter than its span; never an id.
    const END: Self;
    /// The symbols of a word's header: 12 bytes, its count and the length of its span.
    const HEADER: usize;
    fn from_id(id: u32) -> Self;
    fn id(self) -> u32;
    /// Writes the header of a word of `count` occurrences and `span` symbols.
    fn write_header(out: &mut Vec<Self>, count: u64, span: u32);
    /// The count and span of the word whose header is `header`.
    fn read_header(header: &[Self]) -> (u64, u32);
}

impl Symbol for u16 {
    const END: u16 = u16::MAX;
    const HEADER: usize = 6;
    #[inline(always)]
    fn from_id(id: u32) -> u16 {
        id as u16
    }
    #[inline(always)]
    fn id(self) -> u32 {
        self as u32
    }
    fn write_header(out: &mut Vec<u16>, count: u64, span: u32) {
        out.extend((0..4).map(|i| (count >> (16 * i)) as u16));
        out.extend([span as u16, (span >> 16) as u16]);
    }
    #[inline(always)]
    fn read_header(h: &[u16]) -> (u64, u32) {
        let count = (0..4).fold(0, |c, i| c | (h[i] as u64) << (16 * i));
        (count, h[4] as u32 | (h[5] as u32) << 16)
    }
}

impl Symbol for u32 {
    const END: u32 = u32::MAX;
    const HEADER: usize = 3;
    #[inline(always)]
    fn from_id(id: u32) -> u32 {
        id
    }
    #[inline(always)]
    fn id(self) -> u32 {
        self
    }
    fn write_header(out: &mut Vec<u32>, count: u64, span: u32) {
        out.extend([count as u32, (count >> 32) as u32, span]);
    }
    #[inline(always)]
    fn read_header(h: &[u32]) -> (u64, u32) {
        (h[0] as u64 | (h[1] as u64) << 32, h[2])
    }
}

/// What a merge reports of the pairs around each occurrence of its pair `(a, b)` it rewrites into `id`
/// ([`super::pairs::PairCounts`]), in a word of `count` occurrences at offset `word`.
pub(super) trait PairChanges {
    /// The occurrence had `x` before it: `(x, a)` lost `count` occurrences, `(x, id)` gained them.
    fn left(&mut self, x: u32, count: i64, word: u64) -> Result<(), AllocError>;
    /// The occurrence had `y` after it: `(b, y)` lost `count` occurrences, `(id, y)` gained them.
    fn right(&mut self, y: u32, count: i64, word: u64) -> Result<(), AllocError>;
}

/// The distinct pre-tokens of length two or more, as records of token ids end to end. A word shrinks in
/// place as merges apply; its span stays.
pub(super) struct Words<S> {
    records: Vec<S>,
    /// The symbols of all words, merged or not.
    symbols: usize,
}

/// How many holders ahead of the one being rewritten the merge prefetches: enough loads in flight to
/// hide the latency of memory, few enough that the lines are still in cache when their turn comes.
const PREFETCH_AHEAD: usize = 8;

impl<S: Symbol> Words<S> {
    /// Room for `words` words of `symbols` symbols in all, allocated once.
    pub(super) fn with_capacity(words: usize, symbols: usize) -> Result<Self, AllocError> {
        let mut records = Vec::new();
        let size = words
            .checked_mul(S::HEADER)
            .and_then(|h| h.checked_add(symbols))
            .ok_or(AllocError::of::<S>(usize::MAX))?;
        huge_pages::try_reserve(&mut records, size)?;
        Ok(Words {
            records,
            symbols: 0,
        })
    }

    /// Appends the word of `piece` (its bytes, at most 2^32 - 1 of them) occurring `count` times,
    /// within the capacity reserved.
    pub(super) fn push(&mut self, piece: &[u8], count: u64) {
        S::write_header(&mut self.records, count, piece.len() as u32);
        self.records
            .extend(piece.iter().map(|&b| S::from_id(b as u32)));
        self.symbols += piece.len();
    }

    /// The symbols of all words, merged or not: a bound on the number of merges.
    pub(super) fn symbol_count(&self) -> usize {
        self.symbols
    }

    /// The words, in order: the offset of each (what the pairs' lists hold), its count and its live
    /// symbols.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u64, i64, &[S])> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            let record = self.records.get(at..).filter(|r| !r.is_empty())?;
            let (count, span) = S::read_header(record);
            let span = &record[S::HEADER..S::HEADER + span as usize];
            let word = at as u64;
            at += S::HEADER + span.len();
            Some((word, count as i64, live(span)))
        })
    }

    /// Replaces every occurrence of `pair` (left to right, without overlap) by `id` in the words
    /// `holders` names (offsets, as [`Self::iter`] gives them), and reports the neighbours of each
    /// occurrence to `pairs`: the pairs it removes lose the word's count, and the pairs it makes (they
    /// hold `id`) gain it.
    pub(super) fn merge(
        &mut self,
        pair: Pair,
        id: u32,
        mut holders: impl Iterator<Item = u64>,
        pairs: &mut impl PairChanges,
    ) -> Result<(), AllocError> {
        let (a, b, new) = (S::from_id(pair.0), S::from_id(pair.1), S::from_id(id));
        // Holders are read PREFETCH_AHEAD ahead of the one rewritten, and their records prefetched: a
        // rewrite waits on memory for its record otherwise, one word after another.
        let mut ahead = [0u64; PREFETCH_AHEAD];
        let mut queued = 0;
        for slot in &mut ahead {
            let Some(w) = holders.next() else { break };
            *slot = w;
            prefetch(self.records.as_ptr().wrapping_add(w as usize));
            queued += 1;
        }
        let mut next = 0;
        while queued > 0 {
            let w = ahead[next];
            match holders.next() {
                Some(later) => {
                    ahead[next] = later;
                    prefetch(self.records.as_ptr().wrapping_add(later as usize));
                }
                None => queued -= 1,
            }
            next = (next + 1) % PREFETCH_AHEAD;
            let record = &mut self.records[w as usize..];
            let (count, span) = S::read_header(record);
            let count = count as i64;
            let symbols = &mut record[S::HEADER..S::HEADER + span as usize];
            // Rewrite in place: `out` trails `read`, so the symbol before an occurrence is already
            // rewritten (it may be `id` itself), which is what the new left pair must use. Symbols
            // before the first occurrence stay where they are; those between occurrences move left.
            let (mut read, found) = next_occurrence(symbols, 0, a, b);
            if !found {
                continue;
            }
            let mut out = read;
            loop {
                if out > 0 {
                    pairs.left(symbols[out - 1].id(), count, w)?;
                }
                let after = read + 2;
                if let Some(&y) = symbols.get(after).filter(|&&y| y != S::END) {
                    pairs.right(y.id(), count, w)?;
                }
                symbols[out] = new;
                out += 1;
                let (end, found) = next_occurrence(symbols, after, a, b);
                for i in after..end {
                    symbols[out + i - after] = symbols[i];
                }
                out += end - after;
                read = end;
                if !found {
                    break;
                }
            }
            // A merge shortened the word: `out` is within its span.
            symbols[out] = S::END;
        }
        Ok(())
    }
}

/// The first occurrence of `(a, b)` in the live symbols of `span` from `from` on, and true; or where
/// the live symbols end (the first `END`, or the span's end), and false. One pass finds both, since
/// neither `a` nor `b` is `END`.
#[inline(always)]
fn next_occurrence<S: Symbol>(span: &[S], from: usize, a: S, b: S) -> (usize, bool) {
    let rest = &span[from..];
    match rest
        .windows(2)
        .position(|p| p[0] == S::END || (p[0] == a && p[1] == b))
    {
        Some(i) => (from + i, rest[i] != S::END),
        // No window left: the last symbol alone, live or `END`.
        None => (span.len() - (span.last() == Some(&S::END)) as usize, false),
    }
}

/// The live symbols of a span: up to its first `END`.
#[inline(always)]
fn live<S: Symbol>(span: &[S]) -> &[S] {
    &span[..span.iter().position(|&s| s == S::END).unwrap_or(span.len())]
}
