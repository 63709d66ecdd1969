//! Special tokens such as `<|endoftext|>`: matched before pre-tokenization, never merged.
//!
//! Matching is leftmost-longest (when `<|endoftext|>` and `<|endoftext|><|endoftext|>` are both special,
//! the longer wins where both match), done by one Aho-Corasick automaton so that the cost is linear in the
//! text whatever the number of tokens. The text between matches is pre-tokenized on its own.

use aho_corasick::{AhoCorasick, MatchKind};

use crate::error::{Error, Result};

/// A set of special tokens, deduplicated, in the order first given.
#[derive(Clone, Debug)]
pub struct SpecialTokens {
    tokens: Vec<String>,
    matcher: Option<AhoCorasick>,
    max_len: usize,
}

/// A part of a text: either ordinary text or the special token with the given index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'t> {
    Text(&'t str),
    Special(usize),
}

impl SpecialTokens {
    /// Builds the matcher. Duplicates are dropped; an empty token is an error, since it would match
    /// everywhere.
    pub fn new<S: AsRef<str>>(tokens: &[S]) -> Result<SpecialTokens> {
        let mut unique: Vec<String> = Vec::with_capacity(tokens.len());
        for t in tokens {
            let t = t.as_ref();
            if t.is_empty() {
                return Err(Error::EmptySpecialToken);
            }
            if !unique.iter().any(|u| u == t) {
                unique.push(t.to_string());
            }
        }
        let matcher = if unique.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&unique)
                    .expect("special tokens are few and short enough for an automaton"),
            )
        };
        let max_len = unique.iter().map(String::len).max().unwrap_or(0);
        Ok(SpecialTokens {
            tokens: unique,
            matcher,
            max_len,
        })
    }

    /// The tokens, deduplicated, in the order first given.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// The length in bytes of the longest token (0 when there are none).
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Splits `text` into ordinary text and special tokens, in order. Empty text segments are skipped.
    pub fn split<'t>(&'t self, text: &'t str) -> impl Iterator<Item = Segment<'t>> + 't {
        let mut matches = self.matcher.as_ref().map(|m| m.find_iter(text));
        let mut pos = 0;
        let mut pending: Option<usize> = None;
        std::iter::from_fn(move || loop {
            if let Some(id) = pending.take() {
                return Some(Segment::Special(id));
            }
            match matches.as_mut().and_then(Iterator::next) {
                Some(m) => {
                    let before = &text[pos..m.start()];
                    pos = m.end();
                    pending = Some(m.pattern().as_usize());
                    if !before.is_empty() {
                        return Some(Segment::Text(before));
                    }
                }
                None => {
                    if pos < text.len() {
                        let rest = &text[pos..];
                        pos = text.len();
                        return Some(Segment::Text(rest));
                    }
                    return None;
                }
            }
        })
    }

    /// Whether some occurrence of a special token covers both `bytes[pos - 1]` and `bytes[pos]`, so
    /// that cutting the text at `pos` could change what matches. Needs `max_len - 1` bytes on each side
    /// of `pos` to be exact; it is called with at least that many.
    pub fn straddles(&self, bytes: &[u8], pos: usize) -> bool {
        self.tokens.iter().any(|t| {
            let t = t.as_bytes();
            (1..t.len()).any(|k| pos >= k && bytes.get(pos - k..pos - k + t.len()) == Some(t))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'t>(s: &'t SpecialTokens, text: &'t str) -> Vec<Segment<'t>> {
        s.split(text).collect()
    }

    #[test]
    fn longest_match_wins_and_duplicates_collapse() {
        let s = SpecialTokens::new(&["<|e|>", "<|e|><|e|>", "<|e|>"]).unwrap();
        assert_eq!(s.tokens().len(), 2);
        assert_eq!(
            parts(&s, "a<|e|><|e|>b<|e|>"),
            [
                Segment::Text("a"),
                Segment::Special(1),
                Segment::Text("b"),
                Segment::Special(0)
            ]
        );
    }

    #[test]
    fn no_tokens_means_one_segment() {
        let s = SpecialTokens::new::<&str>(&[]).unwrap();
        assert_eq!(parts(&s, "abc"), [Segment::Text("abc")]);
        assert_eq!(parts(&s, ""), []);
    }

    #[test]
    fn empty_token_is_an_error() {
        assert!(matches!(
            SpecialTokens::new(&["x", ""]),
            Err(Error::EmptySpecialToken)
        ));
    }

    #[test]
    fn straddling_occurrences_are_found() {
        let s = SpecialTokens::new(&["<|a b|>"]).unwrap();
        let text = b"x <|a b|> y";
        assert!(s.straddles(text, 5));
        assert!(s.straddles(text, 3));
        assert!(!s.straddles(text, 2));
        assert!(!s.straddles(text, 9));
    }
}
