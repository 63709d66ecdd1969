//! The GPT-2 pre-tokenizer as a hand-written scanner: [`pretokenize`], and where text can be cut
//! without changing its pre-tokens ([`is_safe_cut`]).
//!
//! GPT-2 splits text into pre-tokens with the pattern
//!
//! ```text
//! '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//! ```
//!
//! applied left to right by Python's `regex` module. Every peer that runs this through a backtracking
//! regex engine spends most of its time there, yet the pattern needs no backtracking beyond one
//! character: each alternative is a run of one character class, optionally led by a U+0020, and the
//! look-ahead `(?!\S)` only ever gives back the last character of a whitespace run. So the scanner looks
//! at the class of the current character (and of the next one when the current one is a space or an
//! apostrophe) and consumes a run ([`scan`]). Where 64 bytes of ASCII (or two-byte Latin letters) lie
//! ahead, it instead takes the boundaries of all their pieces at once from bit masks ([`window`]),
//! which spares a mispredicted branch per piece.
//!
//! The classes ([`classes`]) come from [`unicode_tables`], read off the `regex` module itself by
//! `scripts/gen_unicode_tables.py`; the scanner equals `regex.findall` on every string, which
//! `tests/test_pretokenize.py` checks by differential fuzzing, and the windows equal the scanner,
//! which the tests here and the `pretokenize` fuzz target check.
//!
//! Two facts about the pattern that the rest of the crate relies on:
//! - No alternative looks behind, so scanning may start at any piece boundary.
//! - A piece never contains a whitespace character after a non-whitespace one. So a position whose
//!   previous character is not whitespace and whose character is whitespace is always a piece boundary:
//!   text can be cut there without changing the pieces ([`is_safe_cut`]).

mod classes;
mod scan;
mod unicode_tables;
mod window;

pub use classes::{class_of, Class};
pub use unicode_tables::UNICODE_VERSION;

use classes::char_class;
use scan::piece_len;
use window::{window_boundaries, WINDOW};

/// An iterator over the GPT-2 pre-tokens of a text, in order. Concatenated, they give the text back.
///
/// Where 64 bytes of ASCII (or two-byte Latin letters) lie ahead it reads the pieces off their boundary
/// mask (`window_boundaries`), and elsewhere (other text that is not ASCII, pieces longer than a
/// window, the last 63 bytes) it scans one piece at a time.
#[derive(Clone, Debug)]
pub struct PreTokens<'t> {
    text: &'t str,
    /// Where the next piece starts.
    pos: usize,
    /// Boundaries after `pos` in the window that starts at `base` (bit `i` for byte `base + i`).
    ends: u64,
    base: usize,
    /// Scan one piece at a time until here: a window found bytes before it that are neither ASCII nor
    /// Latin letters.
    scalar_until: usize,
}

impl<'t> Iterator for PreTokens<'t> {
    type Item = &'t str;

    #[inline(always)]
    fn next(&mut self) -> Option<&'t str> {
        let start = self.pos;
        let bytes = self.text.as_bytes();
        if self.ends != 0 {
            self.pos = self.base + self.ends.trailing_zeros() as usize;
            self.ends &= self.ends - 1;
        } else if start >= bytes.len() {
            return None;
        } else {
            self.pos = start + self.next_len(bytes, start);
        }
        debug_assert!(self.text.is_char_boundary(self.pos));
        // SAFETY: boundaries lie between whole characters (in a window both bytes of a Latin letter
        // share its class, so no boundary falls between them, and boundaries stop before any other
        // byte from 0x80 up; `piece_len` advances by lengths read from lead bytes), so both ends
        // are character boundaries within the text. The checked slice would re-prove this for every
        // piece, a visible cost in counting.
        Some(unsafe { self.text.get_unchecked(start..self.pos) })
    }
}

impl PreTokens<'_> {
    /// The length of the piece at `start` (a boundary before the end), from a new window if one
    /// applies, which also leaves the window's later boundaries in `ends`.
    #[inline(always)]
    fn next_len(&mut self, bytes: &[u8], start: usize) -> usize {
        if start >= self.scalar_until && bytes[start] < 0x80 {
            if let Some(window) = bytes.get(start..start + WINDOW) {
                let (bounds, high) = window_boundaries(window.try_into().unwrap());
                if bounds != 0 {
                    self.base = start;
                    self.ends = bounds & (bounds - 1);
                    return bounds.trailing_zeros() as usize;
                }
                // No boundary: one piece fills the window, or other text that is not ASCII comes soon;
                // scan past the last such byte before trying a window again.
                if high != 0 {
                    self.scalar_until = start + WINDOW - high.leading_zeros() as usize;
                }
            }
        }
        piece_len(bytes, start)
    }
}

/// Splits `text` into GPT-2 pre-tokens, exactly as `regex.findall` with the GPT-2 pattern does.
///
/// ```
/// let pieces: Vec<&str> = bytepair::pretokenize("it's  1999!\n").collect();
/// assert_eq!(pieces, ["it", "'s", " ", " 1999", "!", "\n"]);
/// ```
pub fn pretokenize(text: &str) -> PreTokens<'_> {
    PreTokens {
        text,
        pos: 0,
        ends: 0,
        base: 0,
        scalar_until: 0,
    }
}

/// Whether cutting `bytes` (UTF-8) at `pos` leaves the pre-tokens unchanged: the character at `pos` is
/// whitespace and the one before it is not (see the module docs). Positions that are not character
/// boundaries, and the two ends, are never safe.
pub fn is_safe_cut(bytes: &[u8], pos: usize) -> bool {
    if pos == 0 || pos >= bytes.len() || (bytes[pos] & 0xC0) == 0x80 {
        return false;
    }
    let Some(here) = char_class(bytes, pos) else {
        return false;
    };
    if here != Class::Space {
        return false;
    }
    let mut start = pos - 1;
    while start > 0 && pos - start < 4 && (bytes[start] & 0xC0) == 0x80 {
        start -= 1;
    }
    matches!(char_class(bytes, start), Some(c) if c != Class::Space)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(s: &str) -> Vec<&str> {
        pretokenize(s).collect()
    }

    /// The pieces found one at a time by `piece_len` alone, which the tests in
    /// `tests/test_pretokenize.py` prove equal to `regex`.
    fn scanned_one_by_one(s: &str) -> Vec<&str> {
        let mut pieces = Vec::new();
        let mut pos = 0;
        while pos < s.len() {
            let len = piece_len(s.as_bytes(), pos);
            pieces.push(&s[pos..pos + len]);
            pos += len;
        }
        pieces
    }

    #[test]
    fn windows_agree_with_the_scan_one_piece_at_a_time() {
        // Fragments that make every rule meet every other at every offset of a window: contractions
        // (and near misses), spaces before runs and at the end of runs of whitespace, long runs, and
        // characters that are not ASCII (letters, numbers, whitespace, symbols).
        const FRAGMENTS: [&str; 48] = [
            "a",
            "Zq",
            "word",
            "'",
            "'s",
            "'d",
            "'m",
            "'t",
            "'l",
            "'ll",
            "'ve",
            "'re",
            "'v",
            "'r",
            "'S",
            "s",
            "ll",
            "e",
            " ",
            " ",
            "  ",
            "\t",
            "\n",
            "\r\n",
            "\x0b",
            "\x0c",
            "0",
            "42",
            "!",
            "?.",
            "{",
            "_",
            "-",
            "é",
            "ü",
            "×",
            "÷",
            "ß",
            "Ž",
            "ɐ",
            "日本",
            "٣",
            "\u{a0}",
            "\u{3000}",
            "🙂",
            "ʰ",
            "ª",
            "supercalifragilisticexpialidociousandthensomemoreletterstofillawindow",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut text = String::new();
        for round in 0..20_000 {
            text.clear();
            // Mostly ASCII, or ASCII and Latin letters, so that windows apply; every eighth text draws
            // from all the fragments.
            let choices = match round % 8 {
                0 => FRAGMENTS.len(),
                1..=3 => 40,
                _ => 33,
            };
            let len = next() % 160;
            for _ in 0..len {
                text.push_str(FRAGMENTS[(next() % choices as u64) as usize]);
            }
            assert_eq!(pieces(&text), scanned_one_by_one(&text), "{text:?}");
        }
    }

    #[test]
    fn windows_agree_on_every_two_byte_character() {
        // Each character in the contexts that reveal its class (as in tests/test_pretokenize.py), in
        // runs long enough for windows.
        for cp in 0x80..0x800u32 {
            let c = char::from_u32(cp).unwrap();
            let text = format!("{}x{c}{c} {c}1{c} 'a{c}\t{c}x{c}", "word ".repeat(14)).repeat(3);
            assert_eq!(pieces(&text), scanned_one_by_one(&text), "U+{cp:04X}");
        }
    }

    #[test]
    fn whitespace_gives_back_its_last_character() {
        assert_eq!(pieces("a   b"), ["a", "  ", " b"]);
        assert_eq!(pieces("a\n\nb"), ["a", "\n", "\n", "b"]);
        assert_eq!(pieces("a \n b"), ["a", " \n", " b"]);
        assert_eq!(pieces("a \u{a0}b"), ["a", " ", "\u{a0}", "b"]);
        assert_eq!(pieces("x   "), ["x", "   "]);
        assert_eq!(pieces(" "), [" "]);
        assert_eq!(pieces("\n x"), ["\n", " x"]);
    }

    #[test]
    fn contractions_are_lowercase_ascii_only() {
        assert_eq!(pieces("it's I'LL"), ["it", "'s", " I", "'", "LL"]);
        assert_eq!(
            pieces("we'll've're'd'm't"),
            ["we", "'ll", "'ve", "'re", "'d", "'m", "'t"]
        );
        assert_eq!(pieces("?'s"), ["?'", "s"]);
        assert_eq!(pieces(" 's"), [" '", "s"]);
        assert_eq!(pieces("'"), ["'"]);
        assert_eq!(pieces("'l"), ["'", "l"]);
    }

    #[test]
    fn classes_follow_unicode() {
        assert_eq!(
            pieces("naïve 日本語 ٣٤ x²"),
            ["naïve", " 日本語", " ٣٤", " x", "²"]
        );
        assert_eq!(pieces("e\u{301}!! 🙂🙂"), ["e", "\u{301}!!", " 🙂🙂"]);
        assert_eq!(pieces("\u{1c}\u{85}a"), ["\u{1c}", "\u{85}", "a"]);
    }

    #[test]
    fn safe_cuts_preserve_pieces() {
        let text = "a\u{3000}b c\n d\u{a0}\u{a0}é\t'll  ";
        let whole = pieces(text);
        for pos in 0..=text.len() {
            if is_safe_cut(text.as_bytes(), pos) {
                let mut cut = pieces(&text[..pos]);
                cut.extend(pieces(&text[pos..]));
                assert_eq!(cut, whole, "cut at {pos}");
            }
        }
        assert!(is_safe_cut(text.as_bytes(), 1));
        assert!(!is_safe_cut(text.as_bytes(), 0));
    }
}
