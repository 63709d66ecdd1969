//! Python's `str` to UTF-8 ([`utf8`]), faster than asking Python for it.
//!
//! CPython stores a string as one unit per character, of 1, 2 or 4 bytes (Latin-1, UCS-2 or UCS-4: the
//! widest character decides), and makes UTF-8 only when asked, one character at a time, keeping the copy
//! in the string for as long as it lives: for prose with a few emoji (UCS-4) that is a sizeable part of
//! an `encode` call. Here an ASCII string is used in place, and otherwise blocks of 16 characters that
//! are all ASCII, most of any text, are narrowed in one vectorized step, and only other blocks go
//! character by character ([`to_utf8`]), into a copy that the call frees.

#[cfg(feature = "python")]
use std::borrow::Cow;
use std::mem::MaybeUninit;

#[cfg(feature = "python")]
use pyo3::{ffi, prelude::*, types::PyString};

#[cfg(feature = "python")]
use super::errors::to_py_err;
#[cfg(feature = "python")]
use crate::error::try_reserve;

/// The UTF-8 of `text`: in place when it is ASCII (CPython stores ASCII as is), else converted by
/// [`to_utf8`]. A lone surrogate raises the `UnicodeEncodeError` Python itself would; MemoryError when
/// the copy cannot be allocated.
#[cfg(feature = "python")]
pub(super) fn utf8<'a>(text: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    match stored(text)? {
        Some(Stored::Ascii(ascii)) => return Ok(Cow::Borrowed(ascii)),
        Some(stored @ Stored::Units(units)) => {
            let mut copy = String::new();
            match stored.append_to(&mut copy) {
                Ok(()) => return Ok(Cow::Owned(copy)),
                Err(BlockError::Alloc(e)) => {
                    return Err(to_py_err(e.of_text("the UTF-8 copy", units.len())))
                }
                Err(BlockError::NotUtf8) => {}
            }
        }
        None => {}
    }
    // A surrogate (or an interpreter whose storage is not read here): Python's own conversion.
    text.to_str().map(Cow::Borrowed)
}

/// Appends the UTF-8 of `text` to `out`, as [`utf8`] makes it but without a copy of its own: the
/// stream of `encode_iterable` gathers many short strings (lines of a file) into one text.
#[cfg(feature = "python")]
pub(super) fn push_utf8(text: &Bound<'_, PyString>, out: &mut String) -> PyResult<()> {
    if let Some(stored) = stored(text)? {
        match stored.append_to(out) {
            Ok(()) => return Ok(()),
            Err(BlockError::Alloc(e)) => {
                let most = stored.max_utf8_len();
                return Err(to_py_err(e.of_text("the text of the stream", most)));
            }
            // A surrogate: Python's own conversion raises its error.
            Err(BlockError::NotUtf8) => {}
        }
    }
    out.push_str(text.to_str()?);
    Ok(())
}

/// A `str`'s characters read in place, to be handed over as UTF-8 a block at a time
/// ([`Utf8Blocks::next`]), as [`utf8`] would convert them whole.
#[cfg(feature = "python")]
pub(super) struct Utf8Blocks<'a> {
    text: Stored<'a>,
    /// The characters handed over so far.
    at: usize,
}

/// What [`Utf8Blocks::next`] could not do.
#[cfg(feature = "python")]
#[derive(Debug)]
pub(super) enum BlockError {
    /// The buffer could not grow.
    Alloc(crate::error::AllocError),
    /// A character UTF-8 cannot hold: Python's own conversion raises the error the user expects.
    NotUtf8,
}

/// `text` as [`Utf8Blocks`], or None on an interpreter whose storage is not read here.
#[cfg(feature = "python")]
pub(super) fn utf8_blocks<'a>(text: &'a Bound<'_, PyString>) -> PyResult<Option<Utf8Blocks<'a>>> {
    Ok(stored(text)?.map(|text| Utf8Blocks { text, at: 0 }))
}

#[cfg(feature = "python")]
impl Utf8Blocks<'_> {
    /// The most bytes of UTF-8 the whole text can take.
    pub(super) fn max_utf8_len(&self) -> usize {
        self.text.max_utf8_len()
    }

    /// Appends the UTF-8 of the next `chars` characters (fewer at the end) to `out`, and says whether
    /// any are left.
    pub(super) fn next(&mut self, chars: usize, out: &mut String) -> Result<bool, BlockError> {
        let (len, from) = (self.len(), self.at);
        let to = len.min(from.saturating_add(chars));
        let block = match &self.text {
            Stored::Ascii(ascii) => Stored::Ascii(&ascii[from..to]),
            Stored::Units(units) => Stored::Units(units.slice(from, to)),
        };
        block.append_to(out)?;
        self.at = to;
        Ok(to < len)
    }

    /// The number of characters.
    pub(super) fn len(&self) -> usize {
        match &self.text {
            Stored::Ascii(ascii) => ascii.len(),
            Stored::Units(units) => units.len(),
        }
    }
}

/// A `str` as CPython stores it.
#[cfg(feature = "python")]
#[derive(Clone, Copy)]
enum Stored<'a> {
    /// ASCII, which is its own UTF-8.
    Ascii(&'a str),
    Units(Units<'a>),
}

#[cfg(feature = "python")]
impl Stored<'_> {
    /// The most bytes of UTF-8 the text can take.
    fn max_utf8_len(&self) -> usize {
        match self {
            Stored::Ascii(ascii) => ascii.len(),
            Stored::Units(units) => units.max_utf8_len(),
        }
    }

    /// Appends the text's UTF-8 to `out`, with room reserved fallibly first; on a character UTF-8
    /// cannot hold, `out` is left as it was.
    fn append_to(self, out: &mut String) -> Result<(), BlockError> {
        // SAFETY: only UTF-8 is appended: ASCII, or `to_utf8`'s output, which is cut off again when
        // it fails.
        let bytes = unsafe { out.as_mut_vec() };
        try_reserve(bytes, self.max_utf8_len()).map_err(BlockError::Alloc)?;
        match self {
            Stored::Ascii(ascii) => bytes.extend_from_slice(ascii.as_bytes()),
            Stored::Units(units) => {
                let before = bytes.len();
                if to_utf8(units, bytes).is_err() {
                    bytes.truncate(before);
                    return Err(BlockError::NotUtf8);
                }
            }
        }
        Ok(())
    }
}

/// How `text` is stored, read in place; None on an interpreter whose storage is not read here (3.14,
/// PyPy, GraalPy), which then converts with Python's own function.
#[cfg(feature = "python")]
#[allow(unused_variables)]
fn stored<'a>(text: &'a Bound<'_, PyString>) -> PyResult<Option<Stored<'a>>> {
    #[cfg(not(any(Py_3_14, PyPy, GraalPy)))]
    // SAFETY: `text` is a str (its type says so) kept alive by the borrow, and CPython never changes a
    // str's characters once it is shared. READY (before 3.12) gives a legacy string its compact form;
    // after it KIND and DATA describe GET_LENGTH units of that width, which the slices cover exactly.
    // The units of an ASCII string are its UTF-8.
    unsafe {
        use std::slice::from_raw_parts;
        let op = text.as_ptr();
        #[cfg(not(Py_3_12))]
        if ffi::PyUnicode_READY(op) != 0 {
            return Err(PyErr::fetch(text.py()));
        }
        let (data, len) = (
            ffi::PyUnicode_DATA(op),
            ffi::PyUnicode_GET_LENGTH(op) as usize,
        );
        if ffi::PyUnicode_IS_ASCII(op) != 0 {
            return Ok(Some(Stored::Ascii(std::str::from_utf8_unchecked(
                from_raw_parts(data.cast(), len),
            ))));
        }
        return Ok(Some(Stored::Units(match ffi::PyUnicode_KIND(op) {
            ffi::PyUnicode_1BYTE_KIND => Units::Latin1(from_raw_parts(data.cast(), len)),
            ffi::PyUnicode_2BYTE_KIND => Units::Ucs2(from_raw_parts(data.cast(), len)),
            _ => Units::Ucs4(from_raw_parts(data.cast(), len)),
        })));
    }
    #[allow(unreachable_code)]
    Ok(None)
}

/// A string's characters, as CPython stores them.
#[derive(Clone, Copy, Debug)]
enum Units<'a> {
    Latin1(&'a [u8]),
    Ucs2(&'a [u16]),
    Ucs4(&'a [u32]),
}

impl Units<'_> {
    /// The number of characters.
    #[cfg(feature = "python")]
    fn len(&self) -> usize {
        match self {
            Units::Latin1(units) => units.len(),
            Units::Ucs2(units) => units.len(),
            Units::Ucs4(units) => units.len(),
        }
    }

    /// The units `from..to`.
    #[cfg(feature = "python")]
    fn slice(&self, from: usize, to: usize) -> Units<'_> {
        match self {
            Units::Latin1(units) => Units::Latin1(&units[from..to]),
            Units::Ucs2(units) => Units::Ucs2(&units[from..to]),
            Units::Ucs4(units) => Units::Ucs4(&units[from..to]),
        }
    }

    /// The most bytes of UTF-8 these units can take: the room [`to_utf8`] reserves in `out` (with
    /// `Vec::reserve`, which aborts the process when it fails; a caller that must not abort reserves
    /// this much first, fallibly).
    fn max_utf8_len(&self) -> usize {
        match self {
            Units::Latin1(units) => units.len() * 2,
            Units::Ucs2(units) => units.len() * 3,
            Units::Ucs4(units) => units.len() * 4,
        }
    }
}

/// Appends the UTF-8 of `text` to `out`, or returns the index of the first character UTF-8 cannot hold
/// (a lone surrogate, which Python strings may contain, or a unit past U+10FFFF, which they cannot),
/// leaving `out` partly written.
fn to_utf8(text: Units<'_>, out: &mut Vec<u8>) -> Result<(), usize> {
    out.reserve(text.max_utf8_len());
    match text {
        Units::Latin1(units) => encode_units(units, out),
        Units::Ucs2(units) => encode_units(units, out),
        Units::Ucs4(units) => encode_units(units, out),
    }
}

/// Characters [`encode_units`] looks at together: one vector of Latin-1 units.
const BLOCK: usize = 16;

/// [`to_utf8`] for units, into room already reserved.
fn encode_units<T: Unit>(units: &[T], out: &mut Vec<u8>) -> Result<(), usize> {
    // Written once, in order: the pages of the fewest bytes the units can take (one each) mapped at
    // once, on 4 KB pages (see `huge_pages`).
    crate::huge_pages::populate_spare(out, units.len());
    let mut blocks = units.chunks_exact(BLOCK);
    let mut at = 0;
    for block in &mut blocks {
        let block: &[T; BLOCK] = block.try_into().expect("a whole block");
        // The room reserved for the rest of the text holds at least one byte per unit.
        let room: &mut [MaybeUninit<u8>; BLOCK] = (&mut out.spare_capacity_mut()[..BLOCK])
            .try_into()
            .expect("a whole block");
        if T::narrow_ascii(block, room) {
            // SAFETY: `narrow_ascii` wrote the block's 16 bytes, all ASCII, into the spare room.
            unsafe { out.set_len(out.len() + BLOCK) };
        } else {
            encode_chars(block, at, out)?;
        }
        at += BLOCK;
    }
    encode_chars(blocks.remainder(), at, out)
}

/// A unit of CPython's storage (1, 2 or 4 bytes), and how a block of them that is all ASCII is
/// narrowed to its bytes: in one vector step on x86_64, where reading the units was a third of the
/// time of `encode` on prose stored as UCS-4 (it has a few emoji), the units loaded one by one.
trait Unit: Copy + Into<u32> {
    /// Writes the units of `block` as bytes into `out` and returns true when all are ASCII; returns
    /// false otherwise, with anything written to `out`.
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    fn narrow_ascii(block: &[Self; BLOCK], out: &mut [MaybeUninit<u8>; BLOCK]) -> bool {
        if block.iter().fold(0, |any, &c| any | c.into()) >= 0x80 {
            return false;
        }
        for (slot, &c) in out.iter_mut().zip(block) {
            slot.write(c.into() as u8);
        }
        true
    }

    /// As above, with SSE2 ([`sse2`]).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    fn narrow_ascii(block: &[Self; BLOCK], out: &mut [MaybeUninit<u8>; BLOCK]) -> bool;
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
impl Unit for u8 {}
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
impl Unit for u16 {}
#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
impl Unit for u32 {}

// SSE2 is part of x86_64's baseline. Each block is loaded in 16-byte vectors, tested for a bit above
// 0x7F in any unit, and packed down to bytes: values under 0x80 pass the saturating packs unchanged.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    use super::{Unit, BLOCK};

    /// Whether no lane of `v` has a bit of `high` set, lane by lane in 16- or 32-bit lanes alike.
    #[inline(always)]
    fn none_set(v: __m128i, high: __m128i) -> bool {
        // SAFETY: SSE2 is enabled (the module's cfg).
        unsafe {
            let set = _mm_and_si128(v, high);
            _mm_movemask_epi8(_mm_cmpeq_epi8(set, _mm_setzero_si128())) == 0xFFFF
        }
    }

    impl Unit for u8 {
        #[inline(always)]
        fn narrow_ascii(block: &[u8; BLOCK], out: &mut [MaybeUninit<u8>; BLOCK]) -> bool {
            // SAFETY: `block` and `out` are 16 bytes each (unaligned loads and stores); SSE2 is
            // enabled.
            unsafe {
                let v = _mm_loadu_si128(block.as_ptr().cast());
                _mm_storeu_si128(out.as_mut_ptr().cast(), v);
                _mm_movemask_epi8(v) == 0
            }
        }
    }

    impl Unit for u16 {
        #[inline(always)]
        fn narrow_ascii(block: &[u16; BLOCK], out: &mut [MaybeUninit<u8>; BLOCK]) -> bool {
            // SAFETY: `block` is 32 bytes (two unaligned loads), `out` 16 (one store); SSE2 is
            // enabled.
            unsafe {
                let p = block.as_ptr().cast::<__m128i>();
                let (a, b) = (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)));
                if !none_set(_mm_or_si128(a, b), _mm_set1_epi16(!0x7F)) {
                    return false;
                }
                _mm_storeu_si128(out.as_mut_ptr().cast(), _mm_packus_epi16(a, b));
                true
            }
        }
    }

    impl Unit for u32 {
        #[inline(always)]
        fn narrow_ascii(block: &[u32; BLOCK], out: &mut [MaybeUninit<u8>; BLOCK]) -> bool {
            // SAFETY: `block` is 64 bytes (four unaligned loads), `out` 16 (one store); SSE2 is
            // enabled.
            unsafe {
                let p = block.as_ptr().cast::<__m128i>();
                let (a, b) = (_mm_loadu_si128(p), _mm_loadu_si128(p.add(1)));
                let (c, d) = (_mm_loadu_si128(p.add(2)), _mm_loadu_si128(p.add(3)));
                let any = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d));
                if !none_set(any, _mm_set1_epi32(!0x7F)) {
                    return false;
                }
                let (ab, cd) = (_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
                _mm_storeu_si128(out.as_mut_ptr().cast(), _mm_packus_epi16(ab, cd));
                true
            }
        }
    }
}

/// Appends the UTF-8 of `units`, which start at index `at` of the string, one character at a time.
fn encode_chars<T: Copy + Into<u32>>(
    units: &[T],
    at: usize,
    out: &mut Vec<u8>,
) -> Result<(), usize> {
    for (k, &c) in units.iter().enumerate() {
        let c: u32 = c.into();
        // Arrays of a fixed length, so that no push is a call to memcpy.
        match c {
            0..=0x7F => out.push(c as u8),
            0x80..=0x7FF => {
                out.extend_from_slice(&[0xC0 | (c >> 6) as u8, 0x80 | (c & 0x3F) as u8])
            }
            0xD800..=0xDFFF => return Err(at + k),
            0x800..=0xFFFF => out.extend_from_slice(&[
                0xE0 | (c >> 12) as u8,
                0x80 | (c >> 6 & 0x3F) as u8,
                0x80 | (c & 0x3F) as u8,
            ]),
            0x1_0000..=0x10_FFFF => out.extend_from_slice(&[
                0xF0 | (c >> 18) as u8,
                0x80 | (c >> 12 & 0x3F) as u8,
                0x80 | (c >> 6 & 0x3F) as u8,
                0x80 | (c & 0x3F) as u8,
            ]),
            _ => return Err(at + k),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf8(text: Units<'_>) -> Result<String, usize> {
        let mut out = Vec::new();
        to_utf8(text, &mut out)?;
        Ok(String::from_utf8(out).expect("valid UTF-8"))
    }

    /// Checks that `text` converts to its UTF-8 from every width that can store it.
    fn assert_every_width(text: &str) {
        let ucs4: Vec<u32> = text.chars().map(u32::from).collect();
        let ucs2: Vec<u16> = ucs4.iter().map(|&c| c as u16).collect();
        let latin1: Vec<u8> = ucs4.iter().map(|&c| c as u8).collect();
        let mut widths = vec![Units::Ucs4(&ucs4)];
        if ucs4.iter().all(|&c| c < 0x1_0000) {
            widths.push(Units::Ucs2(&ucs2));
        }
        if ucs4.iter().all(|&c| c < 0x100) {
            widths.push(Units::Latin1(&latin1));
        }
        for units in widths {
            assert_eq!(utf8(units).as_deref(), Ok(text), "{units:?}");
        }
    }

    #[test]
    fn every_width_matches_rust_s_own_encoding() {
        // ASCII blocks, mixed blocks, and a tail shorter than a block, at every width.
        let texts = [
            String::new(),
            "plain ASCII text that spans more than one block of sixteen".to_string(),
            "caf\u{e9} na\u{ef}ve \u{ff}".repeat(5),
            "\u{2019}quoted\u{2019} \u{4e2d}\u{6587} and ascii after it, long enough".to_string(),
            "emoji \u{1f642} and \u{10ffff} at the top".repeat(3),
        ];
        for text in &texts {
            assert_every_width(text);
        }
    }

    /// `n` ASCII characters, `~` (the widest) among them, for the tests to put other characters in.
    fn ascii_chars(n: usize) -> Vec<char> {
        "ascii, all of it: 0123456789~"
            .chars()
            .cycle()
            .take(n)
            .collect()
    }

    #[test]
    fn a_character_at_any_place_of_a_block_is_encoded_whole() {
        // Each kind of character (the widest ASCII, one to four bytes of UTF-8, the ends of each range)
        // at every place of the second of three blocks, the rest ASCII: the block must not narrow.
        let kinds = [
            '\u{7f}',
            '\u{80}',
            '\u{ff}',
            '\u{100}',
            '\u{7ff}',
            '\u{800}',
            '\u{ffff}',
            '\u{10000}',
            '\u{10ffff}',
        ];
        for c in kinds {
            for at in 0..3 * BLOCK {
                let mut chars = ascii_chars(3 * BLOCK);
                chars[at] = c;
                assert_every_width(&chars.iter().collect::<String>());
            }
        }
    }

    #[test]
    fn runs_of_other_characters_anywhere_are_encoded_whole() {
        // A run of 1 to 20 characters that are not ASCII (so within a block, to its end, and across
        // into the next) starting at every place of three blocks: the blocks that hold part of a run
        // go a character at a time, the others are narrowed.
        for other in ['\u{e9}', '\u{4e2d}', '\u{1f642}'] {
            for len in 1..=20 {
                for at in 0..3 * BLOCK {
                    let mut chars = ascii_chars(5 * BLOCK);
                    chars[at..at + len].fill(other);
                    assert_every_width(&chars.iter().collect::<String>());
                }
            }
        }
    }

    #[test]
    fn a_surrogate_anywhere_in_a_run_is_reported_at_its_index() {
        for len in 1..=20 {
            for at in 0..3 * BLOCK {
                for k in [0, len / 2, len - 1] {
                    let mut ucs2: Vec<u16> = "y".repeat(5 * BLOCK).encode_utf16().collect();
                    ucs2[at..at + len].fill(0xE9);
                    ucs2[at + k] = 0xDC00;
                    assert_eq!(utf8(Units::Ucs2(&ucs2)), Err(at + k));
                    let ucs4: Vec<u32> = ucs2.iter().map(|&c| u32::from(c)).collect();
                    assert_eq!(utf8(Units::Ucs4(&ucs4)), Err(at + k));
                }
            }
        }
    }

    #[test]
    fn surrogates_are_reported_at_their_index() {
        let mut ucs2: Vec<u16> = "x".repeat(40).encode_utf16().collect();
        ucs2[33] = 0xD800;
        assert_eq!(utf8(Units::Ucs2(&ucs2)), Err(33));
        let mut ucs4: Vec<u32> = vec![u32::from('y'); 5];
        ucs4[4] = 0xDFFF;
        assert_eq!(utf8(Units::Ucs4(&ucs4)), Err(4));
        ucs4[2] = 0x11_0000;
        assert_eq!(utf8(Units::Ucs4(&ucs4)), Err(2));
    }
}
