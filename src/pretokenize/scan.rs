//! The pre-tokenizer's scanner: the length of one piece at a time ([`piece_len`]), for text the
//! windows do not cover (text that is neither ASCII nor Latin letters, pieces longer than a window,
//! the end of a text).
//!
//! Each alternative of the pattern is a run of one character class, optionally led by a U+0020, so a
//! piece is found from the class of its first character (and of the next one after a space or an
//! apostrophe) and the end of a run. Invariant: a piece starts and ends at character boundaries.

use super::classes::{ascii_class_mask, class_at, Class, BYTE_CLASS};

/// The end of the run of characters of class `class` that starts at `pos`.
#[inline(always)]
fn run_end(bytes: &[u8], mut pos: usize, class: Class) -> usize {
    loop {
        pos = ascii_run_end(bytes, pos, class);
        // Then characters from 0x80 up, until an ASCII byte: CJK text is long runs of them, and looking
        // for an ASCII run after each would cost a vector compare per character.
        loop {
            if pos >= bytes.len() {
                return pos;
            }
            if bytes[pos] < 0x80 {
                break;
            }
            let (c, len) = class_at(bytes, pos);
            if c != class {
                return pos;
            }
            pos += len;
        }
        if BYTE_CLASS[bytes[pos] as usize] != class as u8 {
            return pos;
        }
    }
}

/// The end of the run of ASCII characters of class `class` that starts at `pos`: the first byte that
/// is not one, ASCII or not.
///
/// Most of the scanner's time on ASCII text is here. A loop that tests one byte at a time ends with a
/// mispredicted branch at nearly every run, since word lengths follow no pattern: most of the
/// encoder's mispredictions on code came from there. Testing 16 bytes at once and
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

/// The length of the piece that starts at `pos` (a piece boundary before the end of `bytes`).
#[inline(always)]
pub(super) fn piece_len(bytes: &[u8], pos: usize) -> usize {
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
