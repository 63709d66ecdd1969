//! Training: choosing merges from pre-token counts, exactly as the reference trainer does.
//!
//! [`train_files`] counts the pre-tokens of the input files ([`count`]), then [`train_counts`] makes
//! the merges: it turns each distinct pre-token into a word of token ids ([`words`]), counts every
//! adjacent pair, and repeatedly merges the best pair ([`heap`]: the greatest count, ties to the
//! greatest pair of byte strings), updating only the words and counts that merge touches.
//!
//! Both take the size of the vocabulary to reach (`vocab_size`: the 256 bytes, the merges and the
//! special tokens), as the Python API does, and stop early, without error, when no pair is left.
//!
//! Invariants: ids 0-255 are the bytes, merge `i` makes id `256 + i`, the special tokens of more than
//! one byte come last; the result does not depend on the number of threads or the chunk size.

mod count;
mod heap;
mod words;

pub use count::{count_file, count_files, count_text, PreTokenCounts};

use std::path::Path;
use std::time::{Duration, Instant};

use crate::chunks::DEFAULT_CHUNK_SIZE;
use crate::encode::Encoder;
use crate::error::{try_copy, try_push, try_reserve, AllocError, Error, Result};
use crate::progress::{Phase, Progress};
use crate::special::SpecialTokens;
use crate::threads::thread_count;
use heap::{Candidate, MergeHeap};
use words::{count_pairs, Words};

/// How often the merge loop reports progress, and so how soon it stops when asked to: by time, since
/// a merge takes from nanoseconds to tens of milliseconds (the first merges of a large corpus rewrite
/// millions of words), and with a fixed count of merges between reports Ctrl-C could wait for long.
const REPORT_EVERY: Duration = Duration::from_millis(50);

/// How to train.
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// The size of the final vocabulary: 256 bytes, the merges, and the special tokens.
    pub vocab_size: usize,
    /// Tokens that split the text and are never merged; they get the last ids, but for a token of one
    /// byte, which keeps that byte's id.
    pub special_tokens: Vec<String>,
    /// Threads for reading and counting; `None` uses every core (see [`crate::thread_count`]).
    pub num_threads: Option<usize>,
    /// Target size of the pieces the input is read in (see [`crate::chunks`]).
    pub chunk_size: usize,
    /// Also count the tokens the training text encodes to ([`Trained::tokens`]): one more pass, which
    /// encodes each distinct pre-token once. That takes memory as encoding does, which for a corpus of
    /// huge pre-tokens is more than training itself takes.
    pub count_tokens: bool,
}

impl TrainOptions {
    /// Options for a vocabulary of `vocab_size` tokens: no special tokens, every core, chunks of
    /// [`crate::DEFAULT_CHUNK_SIZE`], tokens not counted.
    pub fn new(vocab_size: usize) -> TrainOptions {
        TrainOptions {
            vocab_size,
            special_tokens: Vec::new(),
            num_threads: None,
            chunk_size: DEFAULT_CHUNK_SIZE,
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
    pub merges: Vec<(u32, u32)>,
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
    // A vocabulary too small fails before the files are read.
    num_merges(options.vocab_size, &specials)?;
    let threads = thread_count(options.num_threads);
    let counts = count_files(paths, &specials, options.chunk_size, threads, progress)?;
    let mut trained = train_counts(&counts, options.vocab_size, &specials, progress)?;
    if options.count_tokens {
        trained.tokens = encoded_length(&counts, &trained, &specials)?;
    }
    Ok(trained)
}

/// Trains a vocabulary of `vocab_size` tokens on pre-token counts already made (see [`count_text`]),
/// whose special tokens are `specials`.
///
/// Stops early, without error, when no pair is left to merge. Fails on a `vocab_size` below `256 +
/// special tokens` (of more than one byte), when memory runs out, and when `progress` stops it.
pub fn train_counts(
    counts: &PreTokenCounts,
    vocab_size: usize,
    specials: &SpecialTokens,
    progress: &dyn Progress,
) -> Result<Trained> {
    let num_merges = num_merges(vocab_size, specials)?;
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    let mut words = Words::new(counts).map_err(|e| e.named(WORDS))?;
    let mut pair_counts = count_pairs(&words).map_err(|e| e.named(PAIR_COUNTS))?;
    // Setting up takes a while with millions of distinct pre-tokens: a chance to stop before merging.
    progress.report(Phase::Merge, 0, num_merges as u64)?;
    let mut candidates = Vec::new();
    try_reserve(&mut candidates, pair_counts.len()).map_err(|e| e.named(HEAP))?;
    candidates.extend(pair_counts.iter().map(|(&pair, s)| Candidate {
        count: s.count,
        pair,
    }));
    let vocab = |e: AllocError| e.named("the vocabulary");
    try_reserve(&mut tokens, 256 + specials.tokens().len()).map_err(vocab)?;
    for b in 0..=255u8 {
        tokens.push(try_copy(&[b]).map_err(vocab)?);
    }
    let mut heap = MergeHeap::from_vec(candidates, &tokens);
    // Each merge removes at least one symbol, so the symbols bound the merges; `num_merges` itself may
    // be far larger (a huge vocab_size just trains until no pair is left).
    let mut merges = Vec::new();
    try_reserve(&mut merges, num_merges.min(words.symbol_count())).map_err(vocab)?;
    let mut last_report = Instant::now();
    while merges.len() < num_merges {
        let Some(top) = heap.pop(&tokens) else { break };
        let Some(live) = pair_counts.get(&top.pair).map(|s| s.count) else {
            continue;
        };
        if live != top.count {
            let live = Candidate {
                count: live,
                pair: top.pair,
            };
            heap.push(live, &tokens).map_err(|e| e.named(HEAP))?;
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
            .merge(top.pair, id, &mut pair_counts)
            .map_err(|e| e.named(PAIR_COUNTS))?;
        for pair in created {
            if let Some(s) = pair_counts.get(&pair) {
                let candidate = Candidate {
                    count: s.count,
                    pair,
                };
                heap.push(candidate, &tokens).map_err(|e| e.named(HEAP))?;
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
const PAIR_COUNTS: &str = "the counts of pairs of tokens";
const HEAP: &str = "the heap of merges";

/// The special tokens that get an id of their own: all but those of one byte, which are that byte's
/// token already (a vocabulary holds each byte string once).
fn added_specials(specials: &SpecialTokens) -> impl Iterator<Item = &String> {
    specials.tokens().iter().filter(|t| t.len() > 1)
}

/// The number of tokens the counted text encodes to with `trained`: each distinct pre-token encoded
/// once, times its count, plus one token per special-token occurrence. Exact, since encoding encodes
/// each pre-token on its own; None when the vocabulary cannot make an encoder. Fails only when memory
/// runs out.
pub fn encoded_length(
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
    let mut pretokens = encoder.pretoken_encoder()?;
    let mut failed = Ok(());
    counts.for_each(|piece, count| {
        if failed.is_ok() {
            match pretokens.token_count(piece) {
                Ok(n) => tokens += count * n as u64,
                Err(e) => failed = Err(e),
            }
        }
    });
    failed?;
    Ok(Some(tokens))
}

/// The number of merges that fills `vocab_size` after the bytes and the special tokens.
fn num_merges(vocab_size: usize, specials: &SpecialTokens) -> Result<usize> {
    let minimum = 256 + added_specials(specials).count();
    vocab_size.checked_sub(minimum).ok_or(Error::VocabTooSmall {
        vocab_size,
        minimum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;

    fn train(text: &str, vocab_size: usize, specials: &[&str]) -> Trained {
        let specials = SpecialTokens::new(specials).unwrap();
        let mut counts = PreTokenCounts::default();
        count_text(text, &specials, &mut counts).unwrap();
        train_counts(&counts, vocab_size, &specials, &Silent).unwrap()
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
        let counts = PreTokenCounts::default();
        assert!(matches!(
            train_counts(&counts, 256, &specials, &Silent),
            Err(Error::VocabTooSmall {
                vocab_size: 256,
                minimum: 257
            })
        ));
    }

    #[test]
    fn train_counts_and_train_files_take_the_same_vocab_size() {
        let text = "low lower lowest newer wider<|eot|>low new wide ".repeat(3);
        let path = std::env::temp_dir().join(format!("bytepair-vocab-{}", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let mut options = TrainOptions::new(262);
        options.special_tokens = vec!["<|eot|>".into()];
        let from_file = train_files(&[&path], &options, &Silent).unwrap();
        std::fs::remove_file(&path).unwrap();
        let from_counts = train(&text, 262, &["<|eot|>"]);
        // 256 bytes, 5 merges and the special token.
        assert_eq!(from_counts.vocab.len(), 262);
        assert_eq!(from_counts.merges.len(), 5);
        assert_eq!(from_counts, from_file);
    }
}
