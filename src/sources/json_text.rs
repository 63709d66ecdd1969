//! The text field of a JSON line, read in one pass that builds nothing but the text: the path the
//! records of a dataset take. [`super::jsonl`] gives every line here first, and the full parser
//! (serde_json) only what this pass declines.
//!
//! Why: the text of web data is a JSON string with an escape every few dozen bytes (most of them
//! `\n`), and serde_json reads it a byte at a time between escapes, then hands it over to be copied
//! again. Here the string is scanned 16 bytes at a time for a quote, a backslash or a control
//! character, and each block is stored into the text as it is scanned, so that the text is written
//! once, as it is read.
//!
//! Invariant: when [`text_field`] returns a text, serde_json, reading the same line as
//! [`super::jsonl`] does, gives the same text. Anything this pass does not take as it stands (a line
//! that is not an object, an escaped key, a surrogate escape, deep nesting, any syntax error, a
//! missing field) is declined, and the full parser says what the line holds or what is wrong with
//! it. So this pass may be stricter than serde_json, never laxer, and errors keep serde's words.

/// Where a record's text is.
pub(super) enum Text<'a> {
    /// In the line (a string without escapes).
    Borrowed(&'a str),
    /// In the caller's scratch buffer.
    Scratch,
}

/// Objects and lists nested deeper than this are left to the full parser, so that a hostile line
/// cannot make this pass recurse deeply (serde_json skips the values of other fields without
/// recursing, at any depth).
const MAX_DEPTH: usize = 64;

/// The value of the string field `field` of the JSON object `line` (the last one, when the field
/// is given more than once, as Python's `json` takes it): borrowed from the line when it has no
/// escape, else unescaped into `scratch`. None declines the line (see the module's invariant).
pub(super) fn text_field<'a>(line: &'a str, field: &str, scratch: &mut String) -> Option<Text<'a>> {
    let b = line.as_bytes();
    let i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut text = None;
    let end = members(b, i + 1, b'}', |key, at| {
        // An escaped key could spell the field: serde_json compares it unescaped.
        let key = key.filter(|key| !key.contains(&b'\\'))?;
        if key != field.as_bytes() {
            return skip_value(b, at, 1);
        }
        if b.get(at) != Some(&b'"') {
            return None;
        }
        let (value, end) = read_string(line, at + 1, scratch)?;
        text = Some(value);
        Some(end)
    })?;
    if skip_ws(b, end) != b.len() {
        return None;
    }
    text
}

/// The first index from `i` that is not JSON whitespace.
#[inline]
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// Whether `c` ends a stretch of a JSON string's plain bytes: a quote, a backslash, or a control
/// character (which a string may not hold unescaped).
#[inline(always)]
fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// The first index from `i` whose byte [`is_special`], or `b.len()`: 16 bytes at a time with SSE2
/// (part of x86_64's baseline), else [`next_special_portable`].
#[inline(always)]
fn next_special(b: &[u8], i: usize) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        let mut i = i;
        while i + 16 <= b.len() {
            // SAFETY: `i + 16 <= b.len()`.
            let mask = unsafe { specials_in_block(b.as_ptr().add(i)) };
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
        next_special_portable(b, i)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    next_special_portable(b, i)
}

/// [`next_special`] a word of 8 bytes at a time, then a byte at a time.
#[inline(always)]
fn next_special_portable(b: &[u8], mut i: usize) -> usize {
    while let Some(word) = b.get(i..i + 8) {
        let mask = specials_in_word(u64::from_le_bytes(word.try_into().expect("8 bytes")));
        if mask != 0 {
            return i + mask.trailing_zeros() as usize / 8;
        }
        i += 8;
    }
    while i < b.len() && !is_special(b[i]) {
        i += 1;
    }
    i
}

/// Bit `k` set when byte `k` of the 16 at `p` [`is_special`].
///
/// # Safety
///
/// `p` must be valid for reading 16 bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
unsafe fn specials_in_block(p: *const u8) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: the caller's promise; the load is unaligned.
    let v = unsafe { _mm_loadu_si128(p.cast()) };
    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
    let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
    // Unsigned `c <= 0x1F` as `max(c, 0x1F) == 0x1F`: SSE2 compares bytes as signed only.
    let low = _mm_set1_epi8(0x1F);
    let control = _mm_cmpeq_epi8(_mm_max_epu8(v, low), low);
    _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
}

/// The high bit of byte `k` of the result set when byte `k` of `word` (little-endian) [`is_special`],
/// exactly for the lowest such byte (above it a borrow may set more): what [`next_special`] needs.
#[inline(always)]
fn specials_in_word(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    let below_0x20 = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    zero_byte(word ^ (ONES * b'"' as u64)) | zero_byte(word ^ (ONES * b'\\' as u64)) | below_0x20
}

/// Reads the string that starts at `start` (after its opening quote): its text, and the index after
/// its closing quote. None declines it (see the module's invariant).
fn read_string<'a>(line: &'a str, start: usize, scratch: &mut String) -> Option<(Text<'a>, usize)> {
    let b = line.as_bytes();
    let end = next_special(b, start);
    match b.get(end) {
        Some(b'"') => return Some((Text::Borrowed(&line[start..end]), end + 1)),
        Some(b'\\') => {}
        _ => return None,
    }
    // The text is at most as long as the rest of the line (an escape is never shorter than what it
    // stands for), and the blocks of `copy_plain` write up to 16 bytes past it.
    scratch.clear();
    scratch.try_reserve(b.len() - start + 16).ok()?;
    // SAFETY: what is written is the line's bytes between escapes and the UTF-8 of the escapes'
    // characters: the line is UTF-8, and it is cut only before and after ASCII bytes (quotes and
    // backslashes), so the text is UTF-8 too.
    let out = unsafe { scratch.as_mut_vec() };
    out.extend_from_slice(&b[start..end]);
    // SAFETY: room for `b.len() - start + 16` bytes was reserved, and `end - start` are used.
    let end = unsafe { unescape(b, end, out)? };
    Some((Text::Scratch, end))
}

/// Appends the text of the string's rest, from `i` (at a backslash), to `out`; returns the index
/// after the closing quote, or None.
///
/// # Safety
///
/// `out` must have room for `b.len() - i + 16` more bytes ([`copy_plain`]'s condition, which each
/// step keeps: an escape writes fewer bytes than it takes).
unsafe fn unescape(b: &[u8], mut i: usize, out: &mut Vec<u8>) -> Option<usize> {
    loop {
        match b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => {
                let letter = *b.get(i + 1)?;
                match SHORT_ESCAPES[letter as usize] {
                    0 => {
                        let c = unicode_escape(b, i + 1)?;
                        let mut utf8 = [0; 4];
                        out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                        i += 6;
                    }
                    // Most escapes: one byte for two, without a branch on which.
                    byte => {
                        out.push(byte);
                        i += 2;
                    }
                }
            }
            _ => return None,
        }
        // SAFETY: the caller's promise, kept by the step above.
        i = unsafe { copy_plain(b, i, out) };
    }
}

/// The byte each one-letter escape stands for, by its letter; 0 for `u` and for letters JSON has no
/// escape for.
static SHORT_ESCAPES: [u8; 256] = {
    let mut table = [0; 256];
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[b'/' as usize] = b'/';
    table[b'b' as usize] = 0x08;
    table[b'f' as usize] = 0x0C;
    table[b'n' as usize] = b'\n';
    table[b'r' as usize] = b'\r';
    table[b't' as usize] = b'\t';
    table
};

/// Appends `b[i..]` up to the next byte that [`is_special`] (or the end) to `out`, and returns that
/// byte's index.
///
/// # Safety
///
/// `out` must have room for `b.len() - i + 16` more bytes: with SSE2, each block of 16 bytes is stored
/// before it is known how many of them belong to the text.
#[inline(always)]
unsafe fn copy_plain(b: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    debug_assert!(out.capacity() - out.len() >= b.len() - i + 16);
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    let i = {
        let mut i = i;
        while i + 16 <= b.len() {
            // SAFETY: the 16 bytes read are in `b`; the 16 written are within the room the caller
            // promised, which shrinks by no more than `i` grows; `set_len` covers only bytes written.
            unsafe {
                let from = b.as_ptr().add(i);
                let to = out.as_mut_ptr().add(out.len());
                std::ptr::copy_nonoverlapping(from, to, 16);
                let mask = specials_in_block(from);
                let plain = if mask == 0 {
                    16
                } else {
                    mask.trailing_zeros() as usize
                };
                out.set_len(out.len() + plain);
                i += plain;
                if plain < 16 {
                    return i;
                }
            }
        }
        i
    };
    let end = next_special(b, i);
    out.extend_from_slice(&b[i..end]);
    end
}

/// The character of the escape `\uXXXX` whose `u` is at `i`; None when it is not one, and for
/// surrogates (pairs included: rare, and left to the full parser).
#[inline]
fn unicode_escape(b: &[u8], i: usize) -> Option<char> {
    if b.get(i) != Some(&b'u') {
        return None;
    }
    // A surrogate is no char: `from_u32` declines it.
    char::from_u32(hex4(b, i + 1)?)
}

/// The value of the four hex digits at `i`.
#[inline]
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let digits = b.get(i..i + 4)?;
    let mut code = 0;
    for &d in digits {
        code = code << 4 | (d as char).to_digit(16)?;
    }
    Some(code)
}

/// The index after the JSON value at `i`, at nesting `depth`; None when it is not a valid value.
fn skip_value(b: &[u8], i: usize, depth: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => skip_string(b, i + 1),
        b'{' => skip_container(b, i + 1, depth, b'}'),
        b'[' => skip_container(b, i + 1, depth, b']'),
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        b'-' | b'0'..=b'9' => skip_number(b, i),
        _ => None,
    }
}

/// The index after the string that starts at `i` (after its opening quote), its escapes checked as
/// serde_json checks those of a value it skips: a known letter, or `u` and four hex digits.
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i = next_special(b, i);
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                letter if SHORT_ESCAPES[letter as usize] != 0 => i += 2,
                b'u' => {
                    hex4(b, i + 2)?;
                    i += 6;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// The index after the object or list that starts at `i` (after its bracket), at nesting `depth`.
fn skip_container(b: &[u8], i: usize, depth: usize, close: u8) -> Option<usize> {
    if depth >= MAX_DEPTH {
        return None;
    }
    members(b, i, close, |_, at| skip_value(b, at, depth + 1))
}

/// The index after the members of the object (`close` is `}`) or list (`]`) that starts at `i`
/// (after its bracket). `value` reads each member's value: it is given the member's key (the bytes
/// between its quotes, as written; None in a list) and where the value starts, and returns the index
/// after the value, or None to decline the line.
fn members<'b>(
    b: &'b [u8],
    i: usize,
    close: u8,
    mut value: impl FnMut(Option<&'b [u8]>, usize) -> Option<usize>,
) -> Option<usize> {
    let mut i = skip_ws(b, i);
    if b.get(i) == Some(&close) {
        return Some(i + 1);
    }
    loop {
        let mut key = None;
        if close == b'}' {
            if b.get(i) != Some(&b'"') {
                return None;
            }
            let key_end = skip_string(b, i + 1)?;
            key = Some(&b[i + 1..key_end - 1]);
            i = skip_ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
        }
        i = skip_ws(b, value(key, i)?);
        match *b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            c if c == close => return Some(i + 1),
            _ => return None,
        }
    }
}

/// The index after `word` at `i`, if it is there.
fn literal(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    (b.get(i..i + word.len())? == word).then_some(i + word.len())
}

/// The index after the number at `i`, by JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)?
/// ([eE] [+-]? [0-9]+)?`.
fn skip_number(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match *b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(i + 1),
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let end = digits(i);
        if end == i {
            return None;
        }
        i = end;
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::sources::jsonl::parse_line;

    /// The text the one-pass reader gives, or None when it declines the line.
    fn fast(line: &str, field: &str) -> Option<String> {
        let mut scratch = String::new();
        text_field(line, field, &mut scratch).map(|text| match text {
            Text::Borrowed(text) => text.to_string(),
            Text::Scratch => scratch.clone(),
        })
    }

    /// What serde_json makes of the line: Ok(text or None when the field is missing), or Err.
    fn full(line: &str, field: &str) -> Result<Option<String>, String> {
        let mut scratch = String::new();
        let parsed = parse_line(line, field, &mut scratch, &Cell::new(false));
        match parsed {
            Ok(Some(Text::Borrowed(text))) => Ok(Some(text.to_string())),
            Ok(Some(Text::Scratch)) => Ok(Some(scratch)),
            Ok(None) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn the_scans_find_the_first_special_byte() {
        let mut seed = 0x2545_F491_4F6C_DD1D;
        let alphabet = [
            b'a', b' ', b'"', b'\\', 0x1F, 0x20, 0x00, 0x7F, 0x80, 0xA2, 0xDC, 0xFF,
        ];
        for _ in 0..2000 {
            let len = xorshift(&mut seed) as usize % 40;
            let bytes: Vec<u8> = (0..len)
                .map(|_| match xorshift(&mut seed) % 4 {
                    0 => alphabet[xorshift(&mut seed) as usize % alphabet.len()],
                    _ => xorshift(&mut seed) as u8,
                })
                .collect();
            for start in 0..=len {
                let expected = (start..len).find(|&k| is_special(bytes[k])).unwrap_or(len);
                assert_eq!(
                    next_special(&bytes, start),
                    expected,
                    "{bytes:?} from {start}"
                );
                // The scan of other architectures, a word at a time, then a byte at a time.
                assert_eq!(next_special_portable(&bytes, start), expected);
            }
        }
    }

    #[test]
    fn records_as_datasets_write_them_take_the_one_pass_reader() {
        let lines = [
            r#"{"text": "plain"}"#,
            r#"{"id": 17, "text": "line\none\ttab \"quoted\" back\\slash \/ \b\f\r", "url": "x"}"#,
            r#"  {"meta": {"a": [1, -2.5e-3, 0, true, false, null, {"b": "c\u00e9"}], "d": {}}, "text": "é \u00e9\u20ac\u0000 end"}  "#,
            r#"{"text":"","x":[]}"#,
            r#"{"text": "first", "text": "last wins"}"#,
            r#"{"a": "\ud83d\ude00 in another field", "text": "t"}"#,
        ];
        for line in lines {
            let text = fast(line, "text");
            assert!(text.is_some(), "declined: {line}");
            assert_eq!(Ok(text), full(line, "text"), "{line}");
        }
    }

    #[test]
    fn what_the_one_pass_reader_declines_is_left_to_serde() {
        let declined = [
            // Not the reader's to judge: the full parser reads these.
            r#"{"t\u0065xt": "escaped key"}"#,
            r#"{"text": "\ud83d\ude00 a surrogate pair"}"#,
            r#"{"id": 1}"#,
            // Each of these is an error, whose message is the full parser's.
            r#"["text"]"#,
            r#""text""#,
            r#"{"text": 5}"#,
            r#"{"text": "a" "b"}"#,
            r#"{"text": "a",}"#,
            r#"{"text": "a"} x"#,
            r#"{"text": "a", "n": 01}"#,
            r#"{"text": "a", "n": 1.}"#,
            r#"{"text": "a", "n": -}"#,
            r#"{"text": "a", "n": NaN}"#,
            r#"{"text": "a", "n": .5}"#,
            r#"{"text": "a", "n": 1e}"#,
            r#"{"text": "bad \x escape"}"#,
            r#"{"text": "bad \u12G4 escape"}"#,
            r#"{"text": "\ud800 lone"}"#,
            "{\"text\": \"raw\ttab\"}",
            r#"{"text": "unterminated}"#,
            r#"{"text": "a", "x": tru}"#,
            r#"{"text": "a", "x": [1,]}"#,
            r#"{"text": "a", "x": {"k" 1}}"#,
            r#"{"text": "a""#,
            "",
        ];
        for line in declined {
            assert_eq!(fast(line, "text"), None, "{line}");
        }
        let deep = format!(
            r#"{{"x": {}1{}, "text": "t"}}"#,
            "[".repeat(70),
            "]".repeat(70)
        );
        assert_eq!(fast(&deep, "text"), None);
        assert_eq!(full(&deep, "text"), Ok(Some("t".to_string())));
    }

    /// Mutated records: whenever the one-pass reader gives a text, serde_json gives the same one.
    #[test]
    fn the_one_pass_reader_agrees_with_serde_on_mutated_records() {
        let seeds = [
            r#"{"id": 12, "text": "a\nb\t\"c\" \\d \u00e9 é", "meta": {"k": [1.5, -0, 2e10, true, null]}}"#,
            r#"{"text": "x", "text": "y\/z", "n": -12.75E+3, "s": "\ud83d\ude00"}"#,
            r#"{"meta": {}, "list": [], "text": "0123456789abcdef0123456789\n0123456789"}"#,
        ];
        let inserts: &[&str] = &[
            "\"", "\\", "{", "}", "[", "]", ",", ":", "0", "1", "-", ".", "e", "+", "t", "n", " ",
            "\t", "\r", "\n", "\u{1}", "\u{1f}", "u", "d800", "é", "😀", "x", "\\u00", "text",
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        let (mut taken, mut agreed_errors) = (0, 0);
        for round in 0..40_000 {
            let mut line = seeds[round % seeds.len()].to_string();
            for _ in 0..1 + xorshift(&mut seed) % 3 {
                let boundaries: Vec<usize> = (0..=line.len())
                    .filter(|&k| line.is_char_boundary(k))
                    .collect();
                let at = boundaries[xorshift(&mut seed) as usize % boundaries.len()];
                match xorshift(&mut seed) % 3 {
                    0 => {
                        let next = boundaries.iter().find(|&&k| k > at).copied();
                        if let Some(next) = next {
                            line.replace_range(at..next, "");
                        }
                    }
                    _ => line.insert_str(at, inserts[xorshift(&mut seed) as usize % inserts.len()]),
                }
            }
            match fast(&line, "text") {
                Some(text) => {
                    taken += 1;
                    assert_eq!(full(&line, "text"), Ok(Some(text)), "{line}");
                }
                None => agreed_errors += full(&line, "text").is_err() as usize,
            }
        }
        // The mutations leave enough lines whole to test both sides.
        assert!(
            taken > 5_000 && agreed_errors > 5_000,
            "{taken} {agreed_errors}"
        );
    }
}
