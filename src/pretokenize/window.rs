//! The piece boundaries of 64 bytes of ASCII text at once, as a bit mask.
//!
//! The scanner ([`super::scan`]) finds one piece at a time, and which of its branches a piece takes
//! depends on the piece's class, which nothing predicts: on code, where pieces average under three
//! bytes, that costs about one mispredicted branch per piece. Here the classes of 64 bytes are
//! compared at once into masks (bit `i` for byte `i`), the boundaries follow from a few shifts and
//! ands, and the pieces are read off the mask with `trailing_zeros`: one unpredictable branch per
//! window instead of one per piece.
//!
//! For ASCII the pattern's pieces have a local description. With `X` the class of a byte and `SP` a
//! U+0020, a piece starts at byte `i` when:
//! - a run of letters, numbers or other symbols starts at `i` (`X[i-1] != X[i]`) and byte `i-1` is not
//!   a space (a space before such a run leads it: ` ?X+`);
//! - such a run starts at `i+1` and byte `i` is a space;
//! - a whitespace run starts at `i`;
//! - byte `i` is the last of a whitespace run of two or more bytes that is followed by another byte
//!   (`\s+(?!\S)` gives the last one back);
//! - a contraction (`'s`, `'ll`, ...) ended at `i`; and not at the letter after its apostrophe. A
//!   contraction starts at an apostrophe where a piece starts.
//!
//! The rules hold for characters of more than one byte too when every byte of a character is marked
//! with its class, and only spaces and apostrophes, which are ASCII, are looked at byte by byte. The
//! masks mark the two-byte Latin letters (U+00C0 to U+02BF but × and ÷, all of them `\p{L}`) so, which
//! keeps French and German in the windows; other bytes from 0x80 up end the exact part of a window.
//!
//! Each rule reads bytes `i-2..=i+1` at most (a contraction at `i-1` reads `i+1`), and the window's
//! first byte is a piece boundary, where the pattern starts afresh (nothing in it looks behind). So
//! the boundaries up to byte 61 of a window are exact when its bytes are ASCII or Latin letters, and
//! the first `h - 1` are when byte `h` is the first that is neither. The tests of `pretokenize/mod.rs`
//! check the result against the one-piece-at-a-time scanner, and the fuzz target against a model of
//! the pattern.

/// Bytes per window.
pub(super) const WINDOW: usize = 64;

/// Boundaries are exact below this bit when the whole window is ASCII or Latin letters: the rules read
/// up to two bytes ahead of a boundary (a contraction's letters), and a window has no bytes after its
/// last.
const EXACT: u32 = WINDOW as u32 - 3;

/// The boundaries of the window that starts at a piece boundary: bit `i` is set when a piece starts at
/// byte `i`, for `0 < i` below the first bit that depends on a byte that is neither ASCII nor part of a
/// Latin letter, or that lies past the window (bit 0, the window's start, is left out). Also returns
/// the mask of those other bytes from 0x80 up, which the caller scans one piece at a time.
#[inline(always)]
pub(super) fn window_boundaries(window: &[u8; WINDOW]) -> (u64, u64) {
    let mut m = ByteMasks::of(window);
    if m.high != 0 {
        let latin = latin_letters(window, m.high);
        m.letter |= latin;
        m.high &= !latin;
    }
    let other = !(m.letter | m.number | m.space | m.high);
    let starts = |class: u64| class & !(class << 1);
    // Runs of one class that start here (bit 0 starts one, as the text after a boundary does).
    let run = starts(m.letter) | starts(m.number) | starts(other);
    let led_by_space = m.space_char << 1;
    let mut bounds = (run & !led_by_space)
        | ((run >> 1) & m.space_char)
        | starts(m.space)
        | (m.space & (m.space << 1) & !(m.space >> 1));
    // A contraction at an apostrophe where a piece starts: `'` then one of s d m t, or ll, ve, re.
    let apostrophe = m.apostrophe & run & !led_by_space;
    if apostrophe != 0 {
        let one = apostrophe & (m.sdmt >> 1);
        let two = apostrophe & (((m.l >> 1) & (m.l >> 2)) | (((m.v | m.r) >> 1) & (m.e >> 2)));
        bounds = (bounds & !((one | two) << 1)) | (one << 2) | (two << 3);
    }
    let exact = EXACT.min(m.high.trailing_zeros().saturating_sub(1));
    let below = (1u64 << exact) - 1;
    (bounds & below & !1, m.high)
}

/// The bytes of the two-byte Latin letters (U+00C0 to U+02BF: leads 0xC3 to 0xCA, all `\p{L}` but
/// U+00D7 and U+00F7) that come before any other character that is not ASCII, given `high`, the bytes
/// from 0x80 up. Counted as letters, they keep the accents of European words in the windows. Bit by
/// bit rather than with masks, so that ASCII windows pay nothing (masks for every window slowed
/// ASCII text down).
#[inline]
fn latin_letters(window: &[u8; WINDOW], high: u64) -> u64 {
    let (mut latin, mut rest) = (0u64, high);
    while rest != 0 {
        let i = rest.trailing_zeros() as usize;
        // Bytes 0xC3 to 0xCA only ever lead a character of two bytes.
        match (window[i], window.get(i + 1)) {
            (0xC3, Some(0x97 | 0xB7)) => break,
            (0xC3..=0xCA, Some(_)) => {
                latin |= 0b11 << i;
                rest &= !(0b11 << i);
            }
            _ => break,
        }
    }
    latin
}

/// Per-byte masks of a window (bit `i` for byte `i`).
struct ByteMasks {
    letter: u64,
    number: u64,
    /// `\s` among ASCII: tab to carriage return, and space.
    space: u64,
    /// U+0020 alone.
    space_char: u64,
    apostrophe: u64,
    /// Bytes from 0x80 up.
    high: u64,
    sdmt: u64,
    l: u64,
    v: u64,
    r: u64,
    e: u64,
}

impl ByteMasks {
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn of(window: &[u8; WINDOW]) -> ByteMasks {
        use super::classes::sse2;
        use std::arch::x86_64::*;
        let mut m = ByteMasks {
            letter: 0,
            number: 0,
            space: 0,
            space_char: 0,
            apostrophe: 0,
            high: 0,
            sdmt: 0,
            l: 0,
            v: 0,
            r: 0,
            e: 0,
        };
        for (k, block) in window.chunks_exact(16).enumerate() {
            // SAFETY: SSE2 is part of x86-64; the load is unaligned and reads exactly the 16 bytes of
            // `block`.
            let v = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
            // SAFETY: SSE2 is part of x86-64.
            let bits = |x: __m128i| (unsafe { _mm_movemask_epi8(x) } as u32 as u64) << (16 * k);
            let eq = |b: u8| sse2::equal(v, b);
            // SAFETY: SSE2 is part of x86-64.
            let or = |a: __m128i, b: __m128i| unsafe { _mm_or_si128(a, b) };
            m.letter |= bits(sse2::letters(v));
            m.number |= bits(sse2::numbers(v));
            m.space |= bits(sse2::spaces(v));
            m.space_char |= bits(eq(b' '));
            m.apostrophe |= bits(eq(b'\''));
            m.high |= bits(v);
            m.sdmt |= bits(or(or(eq(b's'), eq(b'd')), or(eq(b'm'), eq(b't'))));
            m.l |= bits(eq(b'l'));
            m.v |= bits(eq(b'v'));
            m.r |= bits(eq(b'r'));
            m.e |= bits(eq(b'e'));
        }
        m
    }

    #[cfg(not(target_arch = "x86_64"))]
    #[inline(always)]
    fn of(window: &[u8; WINDOW]) -> ByteMasks {
        let mask = |f: &dyn Fn(u8) -> bool| {
            window
                .iter()
                .enumerate()
                .fold(0u64, |m, (i, &b)| m | (f(b) as u64) << i)
        };
        ByteMasks {
            letter: mask(&|b| b.is_ascii_alphabetic()),
            number: mask(&|b| b.is_ascii_digit()),
            space: mask(&|b| matches!(b, b'\t'..=b'\r' | b' ')),
            space_char: mask(&|b| b == b' '),
            apostrophe: mask(&|b| b == b'\''),
            high: mask(&|b| b >= 0x80),
            sdmt: mask(&|b| matches!(b, b's' | b'd' | b'm' | b't')),
            l: mask(&|b| b == b'l'),
            v: mask(&|b| b == b'v'),
            r: mask(&|b| b == b'r'),
            e: mask(&|b| b == b'e'),
        }
    }
}
