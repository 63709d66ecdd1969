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
mod count_map;
mod heap;
mod memory;
mod pairs;
mod words;

pub(crate) use count::count_record;
pub use count::{count_file, count_files, count_text, PreTokenCounts};
pub(crate) use count_map::coprime_step;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::chunks::DEFAULT_CHUNK_SIZE;
use crate::encode::Encoder;
use crate::error::{try_copy, try_push, try_reserve, AllocError, Error, Result};
use crate::progress::{Phase, Progress};
use crate::special::SpecialTokens;
use crate::threads::thread_count;
use heap::{Candidate, MergeHeap, Pair};
use pairs::PairCounts;
use words::{Symbol, Words};

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
    /// Target size of the pieces the input is read in (see the module `chunks`).
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
    train_counts_owned(
        counts,
        options.vocab_size,
        &specials,
        options.count_tokens,
        progress,
    )
}

/// [`train_counts`] on counts it takes: they are freed as the words are made, so training's peak is
/// the counts or the words, not both. Counts the tokens of the text when `count_tokens`
/// ([`TrainOptions::count_tokens`]).
pub fn train_counts_owned(
    counts: PreTokenCounts,
    vocab_size: usize,
    specials: &SpecialTokens,
    count_tokens: bool,
    progress: &dyn Progress,
) -> Result<Trained> {
    let facts = Facts::of(&counts, count_tokens);
    train(Counts::Owned(counts), facts, vocab_size, specials, progress)
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
    let facts = Facts::of(counts, false);
    train(
        Counts::Borrowed(counts),
        facts,
        vocab_size,
        specials,
        progress,
    )
}

/// The counts training starts from: its caller's, or its own, freed as the words are made.
enum Counts<'c> {
    Borrowed(&'c PreTokenCounts),
    Owned(PreTokenCounts),
}

/// What the result tells of the training text besides the merges, taken from the counts before they go.
struct Facts {
    pretokens: usize,
    bytes: u64,
    /// The distinct pre-tokens of two bytes or more, their bytes, and the bytes of the longest.
    words: usize,
    symbols: usize,
    longest: usize,
    /// The tokens of the text that no merge changes (single bytes and special tokens), when the tokens
    /// are to be counted.
    fixed_tokens: Option<u64>,
}

impl Facts {
    fn of(counts: &PreTokenCounts, count_tokens: bool) -> Facts {
        let (words, symbols, longest) = counts.words_size();
        Facts {
            pretokens: counts.len(),
            bytes: counts.bytes(),
            words,
            symbols,
            longest,
            fixed_tokens: count_tokens
                .then(|| counts.single_byte_occurrences() + counts.special_occurrences()),
        }
    }
}

/// Trains with the narrowest symbols the vocabulary allows.
fn train(
    counts: Counts,
    facts: Facts,
    vocab_size: usize,
    specials: &SpecialTokens,
    progress: &dyn Progress,
) -> Result<Trained> {
    let num_merges = num_merges(vocab_size, specials)?;
    // A word's header holds its length in 32 bits; a pre-token of 4 GiB cannot be made into one.
    if facts.longest > u32::MAX as usize {
        return Err(AllocError::of::<u8>(facts.longest).named(WORDS));
    }
    // Each merge removes a symbol, so the symbols bound the ids the words ever hold.
    let max_id = 256 + num_merges.min(facts.symbols);
    match max_id < u16::MAX as usize {
        true => train_words::<u16>(counts, facts, num_merges, specials, progress),
        false => train_words::<u32>(counts, facts, num_merges, specials, progress),
    }
}

/// Makes the words of `counts` (freeing them as it goes when owned), then the merges.
fn train_words<S: Symbol>(
    counts: Counts,
    facts: Facts,
    num_merges: usize,
    specials: &SpecialTokens,
    progress: &dyn Progress,
) -> Result<Trained> {
    let mut words =
        Words::<S>::with_capacity(facts.words, facts.symbols).map_err(|e| e.named(WORDS))?;
    match counts {
        Counts::Borrowed(counts) => counts.for_each(|piece, count| {
            if piece.len() >= 2 {
                words.push(piece, count)
            }
        }),
        Counts::Owned(counts) => counts.drain_words(|piece, count| words.push(piece, count)),
    }
    let Merged {
        mut tokens, merges, ..
    } = merge_words(&mut words, num_merges, progress, PairCounts::budget)?;
    let vocab = |e: AllocError| e.named("the vocabulary");
    try_reserve(&mut tokens, specials.tokens().len()).map_err(vocab)?;
    for t in added_specials(specials) {
        tokens.push(try_copy(t.as_bytes()).map_err(vocab)?);
    }
    let mut trained = Trained {
        vocab: tokens,
        pretokens: facts.pretokens,
        bytes: facts.bytes,
        tokens: None,
        merges,
    };
    if let Some(fixed) = facts.fixed_tokens {
        trained.tokens = words_encoded_length(&words, fixed, &trained, specials)?;
    }
    Ok(trained)
}

/// The merges made on `words` and the tokens they make.
struct Merged {
    /// The bytes of each id: the 256 bytes, then one token per merge.
    tokens: Vec<Vec<u8>>,
    merges: Vec<Pair>,
    /// How many times every pair was counted again for want of a tracked one: the tests check that
    /// their small budgets make some.
    #[cfg_attr(not(test), allow(dead_code))]
    rescans: usize,
}

/// Makes up to `num_merges` merges on `words`, tracking `budget(merges left)` pairs or so
/// ([`PairCounts`]).
fn merge_words<S: Symbol>(
    words: &mut Words<S>,
    num_merges: usize,
    progress: &dyn Progress,
    budget: fn(usize) -> usize,
) -> Result<Merged> {
    let mut pairs = PairCounts::new(words, budget(num_merges)).map_err(|e| e.named(PAIR_COUNTS))?;
    // Setting up takes a while with millions of distinct pre-tokens: a chance to stop before merging.
    progress.report(Phase::Merge, 0, num_merges as u64)?;
    let vocab = |e: AllocError| e.named("the vocabulary");
    let mut tokens: Vec<Vec<u8>> = Vec::new();
    try_reserve(&mut tokens, 256).map_err(vocab)?;
    for b in 0..=255u8 {
        tokens.push(try_copy(&[b]).map_err(vocab)?);
    }
    let mut heap = new_heap(&pairs, &tokens)?;
    // Each merge removes at least one symbol, so the symbols bound the merges; `num_merges` itself may
    // be far larger (a huge vocab_size just trains until no pair is left).
    let mut merges = Vec::new();
    try_reserve(&mut merges, num_merges.min(words.symbol_count())).map_err(vocab)?;
    let mut last_report = Instant::now();
    let mut rescans = 0;
    while merges.len() < num_merges {
        let Some(top) = heap.pop(&tokens) else {
            // No tracked pair is left; untracked ones may be.
            if pairs.threshold() <= 1 {
                break;
            }
            rescans += 1;
            if !pairs
                .rescan(words, tokens.len(), budget(num_merges - merges.len()))
                .map_err(|e| e.named(PAIR_COUNTS))?
            {
                break;
            }
            heap = new_heap(&pairs, &tokens)?;
            continue;
        };
        let Some(live) = pairs.count(&top.pair) else {
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
        let holders = pairs
            .begin_step(&top.pair, id)
            .map_err(|e| e.named(PAIR_COUNTS))?;
        words
            .merge(top.pair, id, holders.iter(), &mut pairs)
            .map_err(|e| e.named(PAIR_COUNTS))?;
        drop(holders);
        pairs
            .end_step(|candidate| heap.push(candidate, &tokens))
            .map_err(|e| e.named(HEAP))?;
        if pairs
            .prune(budget(num_merges - merges.len()))
            .map_err(|e| e.named(PAIR_COUNTS))?
        {
            heap = new_heap(&pairs, &tokens)?;
        }
        if merges.len() == num_merges || last_report.elapsed() >= REPORT_EVERY {
            progress.report(Phase::Merge, merges.len() as u64, num_merges as u64)?;
            last_report = Instant::now();
        }
    }
    Ok(Merged {
        tokens,
        merges,
        rescans,
    })
}

/// The heap of the tracked pairs.
fn new_heap(pairs: &PairCounts, tokens: &[Vec<u8>]) -> Result<MergeHeap> {
    let mut candidates = Vec::new();
    try_reserve(&mut candidates, pairs.len()).map_err(|e| e.named(HEAP))?;
    candidates.extend(pairs.candidates());
    Ok(MergeHeap::from_vec(candidates, tokens))
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
    tokens_of(trained, specials, counts.special_occurrences(), |f| {
        let mut failed = Ok(());
        counts.for_each(|piece, count| {
            if failed.is_ok() {
                failed = f(piece, count);
            }
        });
        failed
    })
}

/// [`encoded_length`] from the words trained on (the counts are gone by then): each word's bytes (its
/// tokens' bytes) encoded once, times its count, plus `fixed`: the single-byte pre-tokens and the
/// special tokens, one token each.
fn words_encoded_length<S: Symbol>(
    words: &Words<S>,
    fixed: u64,
    trained: &Trained,
    specials: &SpecialTokens,
) -> Result<Option<u64>> {
    tokens_of(trained, specials, fixed, |f| {
        let mut piece = Vec::new();
        for (_, count, symbols) in words.iter() {
            piece.clear();
            for &s in symbols {
                let bytes = &trained.vocab[s.id() as usize];
                try_reserve(&mut piece, bytes.len()).map_err(|e| e.named(WORDS))?;
                piece.extend_from_slice(bytes);
            }
            f(&piece, count as u64)?;
        }
        Ok(())
    })
}

/// `fixed` plus the tokens of the pieces `each` passes (a piece and how many times it occurs) with the
/// encoder of `trained`; None when the vocabulary cannot make one. Fails only when memory runs out.
fn tokens_of(
    trained: &Trained,
    specials: &SpecialTokens,
    fixed: u64,
    each: impl FnOnce(&mut dyn FnMut(&[u8], u64) -> Result<()>) -> Result<()>,
) -> Result<Option<u64>> {
    let Some(encoder) = encoder_of(trained, specials)? else {
        return Ok(None);
    };
    let mut pretokens = encoder.pretoken_encoder()?;
    let mut tokens = fixed;
    each(&mut |piece, count| {
        tokens += count * pretokens.token_count(piece)? as u64;
        Ok(())
    })?;
    Ok(Some(tokens))
}

/// The encoder of `trained`, or None when its vocabulary cannot make one (two merges made the same
/// bytes). Fails only when memory runs out.
fn encoder_of(trained: &Trained, specials: &SpecialTokens) -> Result<Option<Encoder>> {
    let tables = |e: AllocError| e.named("the tables of the vocabulary");
    let mut vocab = Vec::new();
    try_reserve(&mut vocab, trained.vocab.len()).map_err(tables)?;
    vocab.extend((0u32..).zip(trained.vocab.iter().map(Vec::as_slice)));
    let mut merges = Vec::new();
    try_reserve(&mut merges, trained.merges.len()).map_err(tables)?;
    let token = |id: u32| trained.vocab[id as usize].as_slice();
    merges.extend(trained.merges.iter().map(|&(a, b)| (token(a), token(b))));
    match Encoder::new(&vocab, &merges, specials.tokens()) {
        Ok(encoder) => Ok(Some(encoder)),
        Err(e @ Error::OutOfMemory { .. }) => Err(e),
        Err(_) => Ok(None),
    }
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

    /// A corpus of `n` words of random lengths and letters (a fixed generator), with repeats: many
    /// distinct pairs, counts of every size and ties.
    fn random_words(n: usize, letters: u8, seed: u64) -> String {
        let mut state = seed;
        let mut next = move |below: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % below
        };
        let mut text = String::new();
        for _ in 0..n {
            text.push(' ');
            // A few frequent short words, and a long tail of rarer ones.
            let spread = 1 + next(9);
            let len = 2 + next(spread) as usize;
            for _ in 0..len {
                text.push((b'a' + next(letters as u64) as u8) as char);
            }
        }
        text
    }

    /// The words of `counts`, as training makes them.
    fn words_of<S: Symbol>(counts: &PreTokenCounts) -> Words<S> {
        let facts = Facts::of(counts, false);
        let mut words = Words::with_capacity(facts.words, facts.symbols).unwrap();
        counts.for_each(|piece, count| {
            if piece.len() >= 2 {
                words.push(piece, count)
            }
        });
        words
    }

    #[test]
    fn two_byte_and_four_byte_symbols_train_alike() {
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let mut counts = PreTokenCounts::default();
        count_text(&random_words(20_000, 12, 1), &specials, &mut counts).unwrap();
        let all = |_| usize::MAX;
        let narrow = merge_words(&mut words_of::<u16>(&counts), 3000, &Silent, all).unwrap();
        let wide = merge_words(&mut words_of::<u32>(&counts), 3000, &Silent, all).unwrap();
        assert_eq!(narrow.merges.len(), 3000);
        assert_eq!((narrow.merges, narrow.tokens), (wide.merges, wide.tokens));
    }

    #[test]
    fn a_vocab_over_65536_ids_trains_on_four_byte_symbols() {
        // 70,000 tokens: the words hold ids above 65,535, which two-byte symbols cannot.
        let text = random_words(120_000, 26, 2);
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        let mut counts = PreTokenCounts::default();
        count_text(&text, &specials, &mut counts).unwrap();
        let path = std::env::temp_dir().join(format!("bytepair-wide-{}", std::process::id()));
        std::fs::write(&path, &text).unwrap();
        let mut options = TrainOptions::new(70_000);
        options.special_tokens = vec!["<|eot|>".into()];
        options.count_tokens = true;
        let wide = train_files(&[&path], &options, &Silent).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(wide.vocab.len(), 70_000);
        // A smaller vocabulary (two-byte symbols) makes the same first merges.
        let narrow = train_counts(&counts, 60_000, &specials, &Silent).unwrap();
        assert_eq!(narrow.merges[..], wide.merges[..narrow.merges.len()]);
        // The words' final tokens (ids up to 69,999), as bytes and encoded again, count what the encoder
        // counts on the pre-tokens themselves.
        assert_eq!(
            wide.tokens,
            encoded_length(&counts, &wide, &specials).unwrap()
        );
        assert!(wide.tokens.is_some());
    }

    #[test]
    fn tracking_few_pairs_makes_the_same_merges_as_tracking_all() {
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let mut counts = PreTokenCounts::default();
        count_text(&random_words(30_000, 10, 3), &specials, &mut counts).unwrap();
        let all =
            merge_words(&mut words_of::<u16>(&counts), 2000, &Silent, |_| usize::MAX).unwrap();
        // Tracking a quarter as many pairs as merges are left raises the threshold as merges are made, so
        // the tracked pairs run out and every pair is counted again, several times.
        let few = merge_words(&mut words_of::<u16>(&counts), 2000, &Silent, |left| {
            left / 4
        })
        .unwrap();
        assert_eq!(all.rescans, 0);
        assert!(few.rescans >= 2, "{} rescans", few.rescans);
        assert_eq!(all.merges.len(), 2000);
        assert_eq!((few.merges, few.tokens), (all.merges, all.tokens));
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
