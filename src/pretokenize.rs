//! The GPT-2 pre-tokenizer as a hand-written scanner.
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
//! apostrophe) and consumes a run. Where 64 bytes of ASCII (or two-byte Latin letters) lie ahead, it
//! instead takes the boundaries of all their pieces at once from bit masks (`boundaries.rs`): on C code
//! that made scanning 4x faster (302 to 1272 MB/s, one core) and encoding 22% faster.
//!
//! The classes come from `unicode_tables.rs`, read off the `regex` module itself by
//! `scripts/gen_unicode_tables.py`; the scanner equals `regex.findall` on every string, which
//! `tests/test_pretokenize.py` checks by differential fuzzing.
//!
//! Two facts about the pattern that the rest of the crate relies on:
//! - No alternative looks behind, so scanning may start at any piece boundary.
//! - A piece never contains a whitespace character after a non-whitespace one. So a position whose
//!   previous character is not whitespace and whose character is whitespace is always a piece boundary:
//!   text can be cut there without changing the pieces ([`is_safe_cut`]).

use crate::boundaries::{window_boundaries, WINDOW};
use crate::unicode_tables::{BLOCKS, BLOCK_BITS, BLOCK_INDEX};

/// The character classes of the GPT-2 pattern.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Class {
    /// Neither a letter, a number nor whitespace: punctuation, symbols, marks, controls.
    Other = 0,
    /// `\p{L}`.
    Letter = 1,
    /// `\p{N}`.
    Number = 2,
    /// `\s`: Unicode White_Space as `regex` defines it.
    Space = 3,
}

const CLASSES: [Class; 4] = [Class::Other, Class::Letter, Class::Number, Class::Space];

/// Classes of the ASCII bytes, so that the common case is one load.
static ASCII: [Class; 128] = {
    let mut t = [Class::Other; 128];
    let mut b = 0;
    while b < 128 {
        let block = BLOCK_INDEX[0] as usize;
        t[b] = CLASSES[BLOCKS[block][b] as usize];
        b += 1;
    }
    t
};

/// The class of a code point.
#[inline]
pub fn class_of(c: char) -> Class {
    let cp = c as u32;
    if cp < 128 {
        return ASCII[cp as usize];
    }
    let block = BLOCK_INDEX[(cp >> BLOCK_BITS) as usize] as usize;
    CLASSES[BLOCKS[block][(cp & ((1 << BLOCK_BITS) - 1)) as usize] as usize]
}

/// Decodes the character starting at `pos` and returns its class and its length in bytes.
///
/// `bytes` must be valid UTF-8 and `pos` a character boundary before its end.
#[inline(always)]
fn class_at(bytes: &[u8], pos: usize) -> (Class, usize) {
    let b0 = bytes[pos];
    if b0 < 0x80 {
        return (ASCII[b0 as usize], 1);
    }
    // Valid UTF-8 is guaranteed by the &str this slice came from, so continuation bytes are present.
    let (cp, len) = if b0 < 0xE0 {
        (
            ((b0 as u32 & 0x1F) << 6) | (bytes[pos + 1] as u32 & 0x3F),
            2,
        )
    } else if b0 < 0xF0 {
        (
            ((b0 as u32 & 0x0F) << 12)
                | ((bytes[pos + 1] as u32 & 0x3F) << 6)
                | (bytes[pos + 2] as u32 & 0x3F),
            3,
        )
    } else {
        (
            ((b0 as u32 & 0x07) << 18)
                | ((bytes[pos + 1] as u32 & 0x3F) << 12)
                | ((bytes[pos + 2] as u32 & 0x3F) << 6)
                | (bytes[pos + 3] as u32 & 0x3F),
            4,
        )
    };
    let block = BLOCK_INDEX[(cp >> BLOCK_BITS) as usize] as usize;
    let class = CLASSES[BLOCKS[block][(cp & ((1 << BLOCK_BITS) - 1)) as usize] as usize];
    (class, len)
}

/// The class of each byte as a `u8`: the ASCII class for bytes below 0x80, and `NOT_ASCII` (equal to no
/// class) for the others, so that a run of ASCII characters of one class is found by one lookup and one
/// comparison per byte.
static BYTE_CLASS: [u8; 256] = {
    let mut t = [NOT_ASCII; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = ASCII[b] as u8;
        b += 1;
    }
    t
};

const NOT_ASCII: u8 = 0xFF;

/// The end of the run of characters of class `class` that starts at `pos`.
#[inline(always)]
fn run_end(bytes: &[u8], mut pos: usize, class: Class) -> usize {
    loop {
        pos = ascii_run_end(bytes, pos, class);
        if pos >= bytes.len() || bytes[pos] < 0x80 {
            return pos;
        }
        let (c, len) = class_at(bytes, pos);
        if c != class {
            return pos;
        }
        pos += len;
    }
}

/// The end of the run of ASCII characters of class `class` that starts at `pos`: the first byte that
/// is not one, ASCII or not.
///
/// Most of the scanner's time on ASCII text is here. A loop that tests one byte at a time ends with a
/// mispredicted branch at nearly every run, since word lengths follow no pattern: that was 63% of the
/// encoder's mispredictions on C code (callgrind's branch simulation). Testing 16 bytes at once and
/// taking the end from the mask's trailing zeros leaves one well-predicted branch for runs shorter
/// than 16 bytes, which nearly all are.
#[inline(always)]
fn ascii_run_end(bytes: &[u8], mut pos: usize, class: Class) -> usize {
    while let Some(block) = bytes.get(pos..pos + 16) {
        let outside = !ascii_class_mask(block.try_into().unwrap(), class) & 0xFFFF;
        if outside != 0 {
            return pos + outside.trailing_zeros() as usize;
        }
        pos += 16;
    }
    pos + bytes[pos..]
        .iter()
        .position(|&b| BYTE_CLASS[b as usize] != class as u8)
        .unwrap_or(bytes.len() - pos)
}

/// Bit `i` is set when `block[i]` is an ASCII character of class `class` (`BYTE_CLASS[block[i]] ==
/// class`), with SSE2, which every x86-64 processor has.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn ascii_class_mask(block: &[u8; 16], class: Class) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86-64; the load is unaligned and reads exactly the 16 bytes of `block`.
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast());
        let m = match class {
            Class::Letter => sse2::letters(v),
            Class::Number => sse2::numbers(v),
            Class::Space => sse2::spaces(v),
            Class::Other => {
                let ascii = _mm_cmpgt_epi8(v, _mm_set1_epi8(-1));
                let classed = _mm_or_si128(
                    _mm_or_si128(sse2::letters(v), sse2::numbers(v)),
                    sse2::spaces(v),
                );
                _mm_andnot_si128(classed, ascii)
            }
        };
        _mm_movemask_epi8(m) as u32
    }
}

/// The ASCII classes of 16 bytes at once: each function sets the bytes of its class to 0xFF and the
/// others to 0. Comparisons are signed, so bytes from 0x80 up (negative) are in none.
#[cfg(target_arch = "x86_64")]
pub(crate) mod sse2 {
    use std::arch::x86_64::*;

    /// Bytes from `lo` to `hi` (both ASCII).
    #[inline(always)]
    fn within(v: __m128i, lo: u8, hi: u8) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe {
            _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1)),
                _mm_cmpgt_epi8(_mm_set1_epi8(hi as i8 + 1), v),
            )
        }
    }

    /// Bytes equal to `b`.
    #[inline(always)]
    pub(crate) fn equal(v: __m128i, b: u8) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8)) }
    }

    /// `\p{L}` among ASCII: a-z and A-Z.
    #[inline(always)]
    pub(crate) fn letters(v: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        within(unsafe { _mm_or_si128(v, _mm_set1_epi8(0x20)) }, b'a', b'z')
    }

    /// `\p{N}` among ASCII: 0-9.
    #[inline(always)]
    pub(crate) fn numbers(v: __m128i) -> __m128i {
        within(v, b'0', b'9')
    }

    /// `\s` among ASCII: tab to carriage return, and space.
    #[inline(always)]
    pub(crate) fn spaces(v: __m128i) -> __m128i {
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_or_si128(within(v, b'\t', b'\r'), equal(v, b' ')) }
    }
}

/// Bit `i` is set when `block[i]` is an ASCII character of class `class` (portable version).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn ascii_class_mask(block: &[u8; 16], class: Class) -> u32 {
    block.iter().enumerate().fold(0, |m, (i, &b)| {
        m | ((BYTE_CLASS[b as usize] == class as u8) as u32) << i
    })
}

/// The length of the piece that starts at `pos` (a piece boundary before the end of `bytes`).
#[inline(always)]
fn piece_len(bytes: &[u8], pos: usize) -> usize {
    let b0 = bytes[pos];
    if b0 == b'\'' {
        // '(?:[sdmt]|ll|ve|re): lowercase ASCII only.
        match (bytes.get(pos + 1), bytes.get(pos + 2)) {
            (Some(b's' | b'd' | b'm' | b't'), _) => return 2,
            (Some(b'l'), Some(b'l')) | (Some(b'v'), Some(b'e')) | (Some(b'r'), Some(b'e')) => {
                return 3
            }
            _ => {}
        }
    }
    if b0 == b' ' && pos + 1 < bytes.len() {
        // ` ?X+`: a single U+0020 leads a run of letters, numbers or other symbols.
        let (next, _) = class_at(bytes, pos + 1);
        if next != Class::Space {
            return run_end(bytes, pos + 1, next) - pos;
        }
    }
    let (class, len) = class_at(bytes, pos);
    if class != Class::Space {
        return run_end(bytes, pos + len, class) - pos;
    }
    // \s+(?!\S)|\s+ : the whole run if it reaches the end of the text or is a single character;
    // otherwise the run gives its last character back, to lead the next piece.
    let mut end = pos + len;
    let mut last = pos;
    while end < bytes.len() {
        let (c, l) = class_at(bytes, end);
        if c != Class::Space {
            return if last == pos { end - pos } else { last - pos };
        }
        last = end;
        end += l;
    }
    end - pos
}

/// An iterator over the GPT-2 pre-tokens of a text, in order. Concatenated, they give the text back.
///
/// Where 64 bytes of ASCII (or two-byte Latin letters) lie ahead it reads the pieces off their boundary
/// mask ([`window_boundaries`]), and elsewhere (other text that is not ASCII, pieces longer than a
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
        // are character boundaries within the text. The checked slice spent 12% of counting's
        // instructions re-proving this (callgrind, 20 MB of C).
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

/// The class of the character at `pos` of possibly invalid UTF-8, or None if it does not decode.
fn char_class(bytes: &[u8], pos: usize) -> Option<Class> {
    let end = (pos + 4).min(bytes.len());
    let c = match std::str::from_utf8(&bytes[pos..end]) {
        Ok(s) => s.chars().next(),
        Err(e) => std::str::from_utf8(&bytes[pos..pos + e.valid_up_to()])
            .ok()?
            .chars()
            .next(),
    }?;
    Some(class_of(c))
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
    fn block_masks_agree_with_the_byte_table() {
        for class in CLASSES {
            for b in 0..=255u8 {
                let mut block = [b'a'; 16];
                block[b as usize % 16] = b;
                let m = ascii_class_mask(&block, class);
                for (i, &x) in block.iter().enumerate() {
                    let expected = BYTE_CLASS[x as usize] == class as u8;
                    assert_eq!(m >> i & 1 == 1, expected, "{class:?} {x:#x} at {i}");
                }
            }
        }
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
