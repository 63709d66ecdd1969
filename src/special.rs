//! Special tokens such as `<|endoftext|>`: matched before pre-tokenization, never merged.
//!
//! Matching is leftmost-longest (when `<|endoftext|>` and `<|endoftext|><|endoftext|>` are both special,
//! the longer wins where both match), done by one Aho-Corasick automaton so that the cost is linear in the
//! text whatever the number of tokens. The text between matches is pre-tokenized on its own.
//!
//! A special token is at most [`MAX_SPECIAL_TOKEN_LEN`] bytes. Whether a cut falls inside an occurrence
//! ([`SpecialTokens::straddles`]) looks at the longest token's length on each side of every candidate
//! cut, and reading a file holds that much text back: a token of megabytes would make each of those
//! cost megabytes. And the automaton must build in time linear in the tokens: aho-corasick's DFA, which
//! it picks for a few tokens, builds in time quadratic in a token that overlaps itself (`"x" *
//! 100_000` took seconds), so past [`DFA_MAX_TOTAL`] bytes of tokens the contiguous NFA is built
//! instead.
//!
//! Invariants: the tokens are distinct, non-empty and at most [`MAX_SPECIAL_TOKEN_LEN`] bytes; the
//! segments of a text, joined, are the text.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use memchr::memmem::Finder;

use crate::error::{Error, Result};

/// The longest special token accepted, in bytes (UTF-8). Real ones are a few dozen bytes.
pub const MAX_SPECIAL_TOKEN_LEN: usize = 1024;

/// Up to this many bytes of tokens in all, the matcher may be a DFA (the fastest to search, and quick
/// to build at this size), beyond it is a contiguous NFA (linear to build).
const DFA_MAX_TOTAL: usize = 1024;

/// A set of special tokens, deduplicated, in the order first given.
#[derive(Clone, Debug)]
pub struct SpecialTokens {
    tokens: Vec<String>,
    matcher: Option<AhoCorasick>,
    /// A substring search for each token of two bytes or more, for [`Self::straddles`].
    finders: Vec<Finder<'static>>,
    max_len: usize,
    /// The tokens' first bytes, when there are at most three of them (repeated to fill the three): a
    /// text holding none of them holds no token, which `memchr3` tells faster than the matcher can.
    first_bytes: Option<[u8; 3]>,
}

/// A part of a text: either ordinary text or the special token with the given index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'t> {
    Text(&'t str),
    Special(usize),
}

impl SpecialTokens {
    /// Builds the matcher. Duplicates are dropped; an empty token is an error, since it would match
    /// everywhere, and so is a token of more than `MAX_SPECIAL_TOKEN_LEN` bytes.
    pub fn new<S: AsRef<str>>(tokens: &[S]) -> Result<SpecialTokens> {
        let mut unique: Vec<String> = Vec::with_capacity(tokens.len());
        for t in tokens {
            let t = t.as_ref();
            if t.is_empty() {
                return Err(Error::EmptySpecialToken);
            }
            if t.len() > MAX_SPECIAL_TOKEN_LEN {
                return Err(Error::SpecialTokenTooLong {
                    len: t.len(),
                    max: MAX_SPECIAL_TOKEN_LEN,
                });
            }
            if !unique.iter().any(|u| u == t) {
                unique.push(t.to_string());
            }
        }
        let total: usize = unique.iter().map(String::len).sum();
        let matcher = if unique.is_empty() {
            None
        } else {
            let kind = (total > DFA_MAX_TOTAL).then_some(AhoCorasickKind::ContiguousNFA);
            let matcher = AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .kind(kind)
                .build(&unique)
                .map_err(|e| Error::InvalidVocab(format!("special tokens: {e}")))?;
            Some(matcher)
        };
        let finders = unique
            .iter()
            .filter(|t| t.len() >= 2)
            .map(|t| Finder::new(t.as_bytes()).into_owned())
            .collect();
        let max_len = unique.iter().map(String::len).max().unwrap_or(0);
        let mut firsts: Vec<u8> = unique.iter().map(|t| t.as_bytes()[0]).collect();
        firsts.sort_unstable();
        firsts.dedup();
        let first_bytes = match firsts[..] {
            [a] => Some([a; 3]),
            [a, b] => Some([a, b, b]),
            [a, b, c] => Some([a, b, c]),
            _ => None,
        };
        Ok(SpecialTokens {
            tokens: unique,
            matcher,
            finders,
            max_len,
            first_bytes,
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
        // Most texts hold no token: for a chat message, starting the matcher cost more than the test.
        let may_hold = match self.first_bytes {
            Some([a, b, c]) => memchr::memchr3(a, b, c, text.as_bytes()).is_some(),
            None => true,
        };
        let mut matches = self
            .matcher
            .as_ref()
            .filter(|_| may_hold)
            .map(|m| m.find_iter(text));
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
    ///
    /// One substring search per token, over the `2 * len - 2` bytes around `pos` where such an
    /// occurrence must lie: linear in the token's length even when the text repeats it end to end
    /// (comparing the token at each of its offsets would take its length squared there).
    pub fn straddles(&self, bytes: &[u8], pos: usize) -> bool {
        self.finders.iter().any(|finder| {
            let len = finder.needle().len();
            let start = pos.saturating_sub(len - 1);
            let end = pos.saturating_add(len - 1).min(bytes.len());
            start < pos && pos < end && finder.find(&bytes[start..end]).is_some()
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
    fn splits_like_a_leftmost_longest_scan_with_few_or_many_first_bytes() {
        // One to four distinct first bytes: up to three take the `memchr3` test before the matcher.
        let sets: [&[&str]; 4] = [
            &["ab"],
            &["ab", "ba", "abc"],
            &["ab", "ba", "cab"],
            &["ab", "ba", "cab", "db"],
        ];
        fn naive<'t>(tokens: &[&str], text: &'t str) -> Vec<Segment<'t>> {
            let (mut out, mut text_start, mut i) = (Vec::new(), 0, 0);
            while i < text.len() {
                let longest = (0..tokens.len())
                    .filter(|&k| text[i..].starts_with(tokens[k]))
                    .max_by_key(|&k| (tokens[k].len(), std::cmp::Reverse(k)));
                match longest {
                    Some(k) => {
                        if text_start < i {
                            out.push(Segment::Text(&text[text_start..i]));
                        }
                        out.push(Segment::Special(k));
                        i += tokens[k].len();
                        text_start = i;
                    }
                    None => i += 1,
                }
            }
            if text_start < text.len() {
                out.push(Segment::Text(&text[text_start..]));
            }
            out
        }
        let mut state = 7u64;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        for tokens in sets {
            let s = SpecialTokens::new(tokens).unwrap();
            assert_eq!(s.first_bytes.is_some(), tokens.len() < 4);
            for _ in 0..500 {
                let len = next(12);
                let text: String = (0..len)
                    .map(|_| b"abcdxy"[next(6) as usize] as char)
                    .collect();
                assert_eq!(
                    parts(&s, &text),
                    naive(tokens, &text),
                    "{tokens:?} {text:?}"
                );
            }
        }
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
    fn tokens_past_the_limit_are_refused_and_long_ones_build_at_once() {
        let too_long = "x".repeat(MAX_SPECIAL_TOKEN_LEN + 1);
        assert!(matches!(
            SpecialTokens::new(&[too_long]),
            Err(Error::SpecialTokenTooLong { len, max: MAX_SPECIAL_TOKEN_LEN }) if len == MAX_SPECIAL_TOKEN_LEN + 1
        ));
        // Many tokens that overlap themselves, 100 KB in all: the DFA took minutes on such sets.
        let tokens: Vec<String> = (0..100)
            .map(|i| format!("{}{i}", "x".repeat(MAX_SPECIAL_TOKEN_LEN - 3)))
            .collect();
        let start = std::time::Instant::now();
        let s = SpecialTokens::new(&tokens).unwrap();
        assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
        let text = format!("a{}b", tokens[42]);
        assert_eq!(
            parts(&s, &text),
            [Segment::Text("a"), Segment::Special(42), Segment::Text("b")]
        );
    }

    #[test]
    fn straddles_agrees_with_comparing_at_every_offset() {
        let s = SpecialTokens::new(&["abab", "ba", "x"]).unwrap();
        let text = b"abababxbaab";
        for pos in 0..=text.len() {
            let naive = s.tokens().iter().any(|t| {
                let t = t.as_bytes();
                (1..t.len()).any(|k| pos >= k && text.get(pos - k..pos - k + t.len()) == Some(t))
            });
            assert_eq!(s.straddles(text, pos), naive, "{pos}");
        }
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
