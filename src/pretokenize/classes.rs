//! The character classes of the GPT-2 pattern (`\p{L}`, `\p{N}`, `\s`, the rest): of a character
//! ([`class_of`]), of the character at a byte offset ([`class_at`], [`char_class`]), and of 16 ASCII
//! bytes at once ([`ascii_class_mask`], and the SSE2 masks the windows use, [`sse2`]).
//!
//! Every class comes from one lookup ([`class_of_code_point`] in the generated tables, or the ASCII
//! table, which holds the same classes), so that the scanner, the windows and the safe cuts agree.

use super::unicode_tables::{BLOCKS, BLOCK_BITS, BLOCK_INDEX};

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

/// The class of a character.
#[inline]
pub fn class_of(c: char) -> Class {
    let cp = c as u32;
    if cp < 128 {
        return ASCII[cp as usize];
    }
    class_of_code_point(cp)
}

/// The class of a code point, from the generated tables: two dependent loads.
#[inline(always)]
fn class_of_code_point(cp: u32) -> Class {
    let block = BLOCK_INDEX[(cp >> BLOCK_BITS) as usize] as usize;
    CLASSES[BLOCKS[block][(cp & ((1 << BLOCK_BITS) - 1)) as usize] as usize]
}

/// Decodes the character starting at `pos` and returns its class and its length in bytes.
///
/// `bytes` must be valid UTF-8 and `pos` a character boundary before its end.
#[inline(always)]
pub(super) fn class_at(bytes: &[u8], pos: usize) -> (Class, usize) {
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
    (class_of_code_point(cp), len)
}

/// The class of each byte as a `u8`: the ASCII class for bytes below 0x80, and `NOT_ASCII` (equal to no
/// class) for the others, so that a run of ASCII characters of one class is found by one lookup and one
/// comparison per byte.
pub(super) static BYTE_CLASS: [u8; 256] = {
    let mut t = [NOT_ASCII; 256];
    let mut b = 0;
    while b < 128 {
        t[b] = ASCII[b] as u8;
        b += 1;
    }
    t
};

const NOT_ASCII: u8 = 0xFF;

/// Bit `i` is set when `block[i]` is an ASCII character of class `class` (`BYTE_CLASS[block[i]] ==
/// class`), with SSE2, which every x86-64 processor has.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn ascii_class_mask(block: &[u8; 16], class: Class) -> u32 {
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
pub(super) mod sse2 {
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
pub(super) fn ascii_class_mask(block: &[u8; 16], class: Class) -> u32 {
    block.iter().enumerate().fold(0, |m, (i, &b)| {
        m | ((BYTE_CLASS[b as usize] == class as u8) as u32) << i
    })
}

/// The class of the character at `pos` of possibly invalid UTF-8, or None if it does not decode.
pub(super) fn char_class(bytes: &[u8], pos: usize) -> Option<Class> {
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
}
