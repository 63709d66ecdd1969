//! Training: choosing merges from pre-token counts, incrementally.
//!
//! Each distinct pre-token becomes a *word*: a sequence of token ids (its bytes, at first) with the
//! number of times the pre-token occurs. The trainer keeps, for every adjacent pair of tokens, its total
//! count over all words and the list of words that hold it ([`PairStats`]), and a [`MergeQueue`] of the
//! pairs. A merge step pops the best pair, rewrites only the words on its list, and adjusts the counts
//! of the pairs around each rewritten occurrence. So a step costs what it changes, not the size of the
//! corpus.
//!
//! Invariants the step relies on:
//! - `PairStats::count` is the exact number of occurrences, weighted by word count, of the pair in the
//!   current words; pairs at zero are removed from the map.
//! - `PairStats::words` holds every word that contains the pair (and possibly some that no longer do:
//!   rewriting a word leaves it on the lists of pairs it lost; the rewrite finds nothing to do there).
//!   It holds each word once: a pair is only ever created in one step — the initial count, or the step
//!   that creates the newer of its two tokens — and words are visited once per step.

pub mod count;
pub mod queue;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::encode::cache::{CacheCap, Scratch};
use crate::encode::Encoder;
use crate::error::{try_copy, try_push, try_reserve, AllocError, Error, Result};
use crate::progress::{Phase, Progress};
use crate::special::SpecialTokens;
use crate::threads::thread_count;
use crate::train::count::{count_files, PreTokenCounts};
use crate::train::queue::{Candidate, MergeQueue, Pair};

/// How often the merge loop reports progress, and so how soon it stops when asked to: by time, since
/// a merge takes from nanoseconds to tens of milliseconds (the first merges of a large corpus rewrite
/// millions of words), and a fixed count of merges between reports left Ctrl-C waiting up to 0.2 s.
const REPORT_EVERY: Duration = Duration::from_millis(50);

/// How to train.
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// The size of the final vocabulary: 256 bytes, the merges, and the special tokens.
    pub vocab_size: usize,
    /// Tokens that split the text and are never merged; they get the last ids, but for a token of one
    /// byte, which keeps that byte's id.
    pub special_tokens: Vec<String>,
    /// Threads for reading and counting; `None` uses every core (see [`crate::threads::thread_count`]).
    pub num_threads: Option<usize>,
    /// Target size of the pieces the input is read in (see [`crate::chunks`]).
    pub chunk_size: usize,
    /// Also count the tokens the training text encodes to ([`Trained::tokens`]): one more pass, which
    /// encodes each distinct pre-token once. That takes memory as encoding does: a 10 MB pre-token
    /// took the peak of training it from 124 MB to 323 MB.
    pub count_tokens: bool,
}

impl TrainOptions {
    pub fn new(vocab_size: usize) -> TrainOptions {
        TrainOptions {
            vocab_size,
            special_tokens: Vec::new(),
            num_threads: None,
            chunk_size: crate::train::count::DEFAULT_CHUNK_SIZE,
            count_tokens: false,
        }
    }
}

/// A trained vocabulary. Ids 0–255 are the bytes in order, then one id per merge in the order the
/// merges were made, then the special tokens: the GPT-2 layout, in which an id is its tiktoken rank.
/// A special token of one byte is not added again: it is that byte's token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trained {
    /// The bytes of each id.
    pub vocab: Vec<Vec<u8>>,
    /// How many distinct pre-tokens the text had.
    pub pretokens: usize,
    /// The bytes of the training text.
    pub bytes: u64,
    /// How many tokens the training text encodes to with this vocabulary: None unless asked for
    /// ([`TrainOptions::count_tokens`]), and in the odd case where two merges made the same bytes,
    /// which no encoder can take.
    pub tokens: Option<u64>,
    /// The merges, as the ids of the two tokens merged; merge `i` created id `256 + i`.
    pub merges: Vec<Pair>,
}

type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The count of a pair and the words that hold it.
#[derive(Default)]
struct PairStats {
    count: i64,
    words: Vec<u32>,
}

/// The distinct pre-tokens of length two or more, as token ids, stored end to end. A word shrinks in
/// place as merges apply; its slot keeps its start.
struct Words {
    symbols: Vec<u32>,
    start: Vec<usize>,
    len: Vec<u32>,
    count: Vec<i64>,
}

/// Trains on the files at `paths`, each its own document (see [`count_files`]).
///
/// Stops early, without error, when no pair is left to merge. Fails on unreadable or non-UTF-8 input,
/// on a `vocab_size` below `256 + special tokens` (of more than one byte), on an empty special token,
/// and when `progress` stops it.
pub fn train_files<P: AsRef<Path> + Sync>(
    paths: &[P],
    options: &TrainOptions,
    progress: &dyn Progress,
) -> Result<Trained> {
    let specials = SpecialTokens::new(&options.special_tokens)?;
    let num_merges = num_merges(options.vocab_size, &specials)?;
    let threads = thread_count(options.num_threads);
    let counts = count_files(paths, &specials, options.chunk_size, threads, progress)?;
    let mut trained = train_counts(&counts, num_merges, &specials, progress)?;
    if options.count_tokens {
        trained.tokens = encoded_length(&counts, &trained, &specials)?;
    }
    Ok(trained)
}

/// Trains on pre-token counts already made (see [`crate::train::count::count_text`]).
pub fn train_counts(
    counts: &PreTokenCounts,
    num_merges: usize,
    specials: &SpecialTokens,
    progress: &dyn Progress,
) -> Result<Trained> {
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    let mut words = Words::new(counts).map_err(|e| e.named(WORDS))?;
    let mut pairs = count_pairs(&words).map_err(|e| e.named(PAIRS))?;
    // Setting up takes a while with millions of distinct pre-tokens: a chance to stop before merging.
    progress.report(Phase::Merge, 0, num_merges as u64)?;
    let mut candidates = Vec::new();
    try_reserve(&mut candidates, pairs.len()).map_err(|e| e.named(QUEUE))?;
    candidates.extend(pairs.iter().map(|(&pair, s)| Candidate {
        count: s.count,
        pair,
    }));
    let vocab = |e: AllocError| e.named("the vocabulary");
    try_reserve(&mut tokens, 256 + specials.tokens().len()).map_err(vocab)?;
    for b in 0..=255u8 {
        tokens.push(try_copy(&[b]).map_err(vocab)?);
    }
    let mut queue = MergeQueue::from_vec(candidates, &tokens);
    // Each merge removes at least one symbol, so the symbols bound the merges; `num_merges` itself may
    // be far larger (a huge vocab_size just trains until no pair is left).
    let mut merges = Vec::new();
    try_reserve(&mut merges, num_merges.min(words.symbols.len())).map_err(vocab)?;
    let mut last_report = Instant::now();
    while merges.len() < num_merges {
        let Some(top) = queue.pop(&tokens) else { break };
        let Some(live) = pairs.get(&top.pair).map(|s| s.count) else {
            continue;
        };
        if live != top.count {
            let live = Candidate {
                count: live,
                pair: top.pair,
            };
            queue.push(live, &tokens).map_err(|e| e.named(QUEUE))?;
            continue;
        }
        let id = tokens.len() as u32;
        let (left, right) = (&tokens[top.pair.0 as usize], &tokens[top.pair.1 as usize]);
        let mut merged = Vec::new();
        try_reserve(&mut merged, left.len() + right.len()).map_err(vocab)?;
        merged.extend_from_slice(left);
        merged.extend_from_slice(right);
        try_push(&mut tokens, merged).map_err(vocab)?;
        merges.push(top.pair);
        let created = words
            .merge(top.pair, id, &mut pairs)
            .map_err(|e| e.named(PAIRS))?;
        for pair in created {
            if let Some(s) = pairs.get(&pair) {
                let candidate = Candidate {
                    count: s.count,
                    pair,
                };
                queue.push(candidate, &tokens).map_err(|e| e.named(QUEUE))?;
            }
        }
        if merges.len() == num_merges || last_report.elapsed() >= REPORT_EVERY {
            progress.report(Phase::Merge, merges.len() as u64, num_merges as u64)?;
            last_report = Instant::now();
        }
    }
    try_reserve(&mut tokens, specials.tokens().len()).map_err(vocab)?;
    for t in added_specials(specials) {
        tokens.push(try_copy(t.as_bytes()).map_err(vocab)?);
    }
    Ok(Trained {
        vocab: tokens,
        pretokens: counts.len(),
        bytes: counts.bytes(),
        tokens: None,
        merges,
    })
}

/// What the parts of training are called in out-of-memory errors.
const WORDS: &str = "the distinct pre-tokens";
const PAIRS: &str = "the pairs of tokens";
const QUEUE: &str = "the queue of merges";

/// The special tokens that get an id of their own: all but those of one byte, which are that byte's
/// token already (a vocabulary holds each byte string once).
fn added_specials(specials: &SpecialTokens) -> impl Iterator<Item = &String> {
    specials.tokens().iter().filter(|t| t.len() > 1)
}

/// The number of tokens the counted text encodes to with `trained`: each distinct pre-token encoded
/// once, times its count, plus one token per special-token occurrence. Exact, since encoding encodes
/// each pre-token on its own; None when the vocabulary cannot make an encoder. Fails only when memory
/// runs out.
fn encoded_length(
    counts: &PreTokenCounts,
    trained: &Trained,
    specials: &SpecialTokens,
) -> Result<Option<u64>> {
    let tables = |e: AllocError| e.named("the tables of the vocabulary");
    let mut vocab = Vec::new();
    try_reserve(&mut vocab, trained.vocab.len()).map_err(tables)?;
    vocab.extend((0u32..).zip(trained.vocab.iter().map(Vec::as_slice)));
    let mut merges = Vec::new();
    try_reserve(&mut merges, trained.merges.len()).map_err(tables)?;
    let token = |id: u32| trained.vocab[id as usize].as_slice();
    merges.extend(trained.merges.iter().map(|&(a, b)| (token(a), token(b))));
    let encoder = match Encoder::new(&vocab, &merges, specials.tokens()) {
        Ok(encoder) => encoder,
        Err(e @ Error::OutOfMemory { .. }) => return Err(e),
        Err(_) => return Ok(None),
    };
    let mut tokens = counts.special_occurrences();
    let mut ids = Vec::new();
    // Each piece comes once: small caches, which would not be hit.
    let mut scratch = Scratch::for_text(0, CacheCap::STREAM).map_err(tables)?;
    let mut failed = Ok(());
    counts.for_each(|piece, count| {
        ids.clear();
        if failed.is_ok() {
            failed = encoder.encode_pretoken(piece, &mut ids, &mut scratch);
            tokens += count * ids.len() as u64;
        }
    });
    failed?;
    Ok(Some(tokens))
}

/// The number of merges that fills `vocab_size` after the bytes and the special tokens.
pub fn num_merges(vocab_size: usize, specials: &SpecialTokens) -> Result<usize> {
    let minimum = 256 + added_specials(specials).count();
    vocab_size.checked_sub(minimum).ok_or(Error::VocabTooSmall {
        vocab_size,
        minimum,
    })
}

/// Counts every adjacent pair in `words`, weighted by word count, and lists the words that hold it.
fn count_pairs(words: &Words) -> std::result::Result<FastMap<Pair, PairStats>, AllocError> {
    let mut pairs: FastMap<Pair, PairStats> = FastMap::default();
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
fn try_reserve_map(pairs: &mut FastMap<Pair, PairStats>) -> std::result::Result<(), AllocError> {
    pairs
        .try_reserve(1)
        .map_err(|_| AllocError::of::<(Pair, PairStats)>(pairs.len() + 1))
}

impl Words {
    /// The words of `counts`, in memory allocated once (the total length is counted first).
    fn new(counts: &PreTokenCounts) -> std::result::Result<Words, AllocError> {
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

    fn symbols(&self, w: usize) -> &[u32] {
        &self.symbols[self.start[w]..self.start[w] + self.len[w] as usize]
    }

    /// Replaces every occurrence of `pair` (left to right, without overlap) by `id` in the words that
    /// hold it, and updates `pairs`. Returns the pairs this step created (they hold `id`), for the
    /// queue.
    fn merge(
        &mut self,
        pair: Pair,
        id: u32,
        pairs: &mut FastMap<Pair, PairStats>,
    ) -> std::result::Result<Vec<Pair>, AllocError> {
        let (a, b) = pair;
        let holders = pairs.remove(&pair).map(|s| s.words).unwrap_or_default();
        let mut created: Vec<Pair> = Vec::new();
        let mut emptied: Vec<Pair> = Vec::new();
        for w in holders {
            let count = self.count[w as usize];
            let start = self.start[w as usize];
            let len = self.len[w as usize] as usize;
            let symbols = &mut self.symbols[start..start + len];
            let mut add = |p: Pair, delta: i64| -> std::result::Result<(), AllocError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;
    use crate::train::count::count_text;

    fn train(text: &str, vocab_size: usize, specials: &[&str]) -> Trained {
        let specials = SpecialTokens::new(specials).unwrap();
        let mut counts = PreTokenCounts::default();
        count_text(text, &specials, &mut counts).unwrap();
        train_counts(
            &counts,
            num_merges(vocab_size, &specials).unwrap(),
            &specials,
            &Silent,
        )
        .unwrap()
    }

    /// The merges as "left|right" strings.
    fn merge_bytes(t: &Trained) -> Vec<String> {
        let s = |id: u32| String::from_utf8_lossy(&t.vocab[id as usize]).into_owned();
        t.merges
            .iter()
            .map(|&(a, b)| format!("{}|{}", s(a), s(b)))
            .collect()
    }

    #[test]
    fn ties_go_to_the_greatest_byte_tuple() {
        // "ab" and "cd" both occur twice: ("c", "d") > ("a", "b").
        let t = train("ab cd ab cd", 258, &[]);
        assert_eq!(merge_bytes(&t), ["c|d", "a|b"]);
    }

    #[test]
    fn overlapping_pairs_merge_left_to_right() {
        // "aaa" once and " aaa" twice: ("a", "a") wins, and merging it left to right turns each "aaa"
        // into "aa" "a", so the next merge is ("aa", "a") (right to left would give ("a", "aa")).
        // bytepair.reference gives the same two merges.
        let t = train("aaa aaa aaa", 258, &[]);
        assert_eq!(merge_bytes(&t), ["a|a", "aa|a"]);
        assert_eq!(t.vocab.len(), 258);
    }

    #[test]
    fn stops_early_when_no_pair_is_left_and_ids_have_no_gaps() {
        let t = train("ab", 1000, &["<|eot|>"]);
        assert_eq!(merge_bytes(&t), ["a|b"]);
        assert_eq!(t.vocab.len(), 258);
        assert_eq!(t.vocab[256], b"ab");
        assert_eq!(t.vocab[257], b"<|eot|>");
    }

    #[test]
    fn a_special_token_of_one_byte_keeps_its_byte_id_and_is_not_added_again() {
        // 258 = 256 bytes + "<|eot|>" + one merge: "\n" is byte 10 already and counts once.
        let t = train("ab\nab\nab", 258, &["\n", "<|eot|>"]);
        assert_eq!(merge_bytes(&t), ["a|b"]);
        assert_eq!(t.vocab.len(), 258);
        assert_eq!(t.vocab[257], b"<|eot|>");
        assert_eq!(t.vocab.iter().filter(|v| *v == b"\n").count(), 1);
    }

    #[test]
    fn bytes_and_tokens_of_the_training_text_come_from_the_counts() {
        // Pre-tokens "ab" three times and " ab" once, "\n" twice and "<|eot|>" once: 3 + 1 + 2 + 1.
        let text = "ab\nab\nab ab<|eot|>";
        let specials = SpecialTokens::new(&["\n", "<|eot|>"]).unwrap();
        let t = train(text, 259, &["\n", "<|eot|>"]);
        assert_eq!(merge_bytes(&t), ["a|b", " |ab"]);
        assert_eq!(t.bytes, 18);
        let mut counts = PreTokenCounts::default();
        count_text(text, &specials, &mut counts).unwrap();
        assert_eq!(encoded_length(&counts, &t, &specials).unwrap(), Some(7));
    }

    #[test]
    fn vocab_too_small_is_an_error() {
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        assert!(matches!(
            num_merges(256, &specials),
            Err(Error::VocabTooSmall {
                vocab_size: 256,
                minimum: 257
            })
        ));
    }
}
