//! Differential fuzzing of the pre-tokenizer against a straightforward model of the GPT-2 pattern.
//!
//! The scanner in `src/pretokenize/` is hand-optimized: it looks one character ahead and never
//! backtracks. The model below instead walks the pattern's alternatives in order, the way a
//! backtracking regex engine does, so that the two share nothing but the character classes
//! (`class_of`, which `tests/test_pretokenize.py` checks against `regex` for every code point).
//!
//! Also checked: the pieces concatenate back to the input, and every position the chunker may cut at
//! (`is_safe_cut`) is a piece boundary, with the pieces on each side those of the whole.

#![no_main]

use bytepair::{class_of, is_safe_cut, pretokenize, Class};
use libfuzzer_sys::fuzz_target;

fn is(chars: &[char], i: usize, class: Class) -> bool {
    chars.get(i).is_some_and(|&c| class_of(c) == class)
}

/// The length in characters of `X+` at `i`: the longest run of `class`.
fn run(chars: &[char], i: usize, class: Class) -> usize {
    chars[i..]
        .iter()
        .take_while(|&&c| class_of(c) == class)
        .count()
}

/// ` ?X+` at `i`: with the optional space taken if that lets `X+` match, else without it.
fn space_then_run(chars: &[char], i: usize, class: Class) -> Option<usize> {
    if chars[i] == ' ' && is(chars, i + 1, class) {
        return Some(1 + run(chars, i + 1, class));
    }
    Some(run(chars, i, class)).filter(|&n| n > 0)
}

/// The length in characters of the match at `i` (before the end of `chars`), trying the alternatives
/// of `'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+` in order.
fn match_at(chars: &[char], i: usize) -> Option<usize> {
    let rest: String = chars[i..chars.len().min(i + 3)].iter().collect();
    for contraction in ["'s", "'d", "'m", "'t", "'ll", "'ve", "'re"] {
        if rest.starts_with(contraction) {
            return Some(contraction.len());
        }
    }
    for class in [Class::Letter, Class::Number, Class::Other] {
        if let Some(n) = space_then_run(chars, i, class) {
            return Some(n);
        }
    }
    // \s+(?!\S): the greedy run, then shorter ones, until what follows is not a non-space.
    let longest = run(chars, i, Class::Space);
    for n in (1..=longest).rev() {
        if i + n == chars.len() || is(chars, i + n, Class::Space) {
            return Some(n);
        }
    }
    // \s+
    Some(longest).filter(|&n| n > 0)
}

/// `regex.findall` with the pattern: matches from left to right, skipping where nothing matches.
fn model(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match match_at(&chars, i) {
            Some(n) => {
                pieces.push(chars[i..i + n].iter().collect());
                i += n;
            }
            None => i += 1,
        }
    }
    pieces
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let pieces: Vec<&str> = pretokenize(&text).collect();
    assert_eq!(pieces, model(&text), "text {text:?}");
    assert_eq!(pieces.concat(), text);

    let mut boundaries = vec![false; text.len() + 1];
    let mut at = 0;
    for piece in &pieces {
        boundaries[at] = true;
        at += piece.len();
    }
    let cuts: Vec<usize> = (0..text.len())
        .filter(|&pos| is_safe_cut(text.as_bytes(), pos))
        .collect();
    for &pos in &cuts {
        assert!(boundaries[pos], "safe cut {pos} inside a piece of {text:?}");
    }
    // Re-scanning both sides is linear per cut: a few cuts keep an input's check linear.
    for &pos in cuts.iter().step_by(cuts.len() / 8 + 1) {
        let mut split: Vec<&str> = pretokenize(&text[..pos]).collect();
        split.extend(pretokenize(&text[pos..]));
        assert_eq!(split, pieces, "cut at {pos} of {text:?}");
    }
});
