//! Where a file is cut: reading it in bounded chunks, cut only where cutting cannot change the result,
//! so that threads can count or encode the chunks independently.
//!
//! Training and whole-file encoding split their input into chunks of about `target` bytes and hand them
//! to different threads. A cut must not change the result, so it is made only where
//!
//! 1. the pre-tokenizer has a piece boundary whatever follows ([`is_safe_cut`]: whitespace after
//!    non-whitespace), and
//! 2. no occurrence of any special token covers the cut ([`SpecialTokens::straddles`]). Then the
//!    leftmost-longest matches on each side are those of the whole text: a match search that reaches the
//!    cut from the left finds no occurrence starting before it, so it resumes exactly where the right
//!    chunk's search starts.
//!
//! Every cut is at an ASCII or whitespace character, hence a character boundary, so each chunk is valid
//! UTF-8 on its own exactly when the file is; the reader does not validate (workers do, in parallel).
//!
//! Memory: the reader holds one chunk being filled plus the few bytes carried past the last cut. A text
//! with no safe cut in [`MAX_UNCUT`] bytes is cut anyway, at the last character boundary before that
//! many bytes that no special token straddles (or, when the text is one token repeated end to end, at
//! the last character boundary): the pre-token that spans such a cut is split there, and each part is
//! counted or encoded on its own, in training and `encode_file` alike. No real pre-token is that long,
//! and without the bound an input with no cut (`/dev/zero`) would grow the chunk until memory ran out.
//!
//! The same cuts serve streaming ([`crate::Encoder::encode_prefix`]) and the blocks of
//! [`crate::Encoder::encode_cancellable`] ([`last_safe_cut`], [`next_safe_cut`]).
//!
//! Invariants: the chunks, joined, are the input, each starting at its `offset`; a chunk ends at a safe
//! cut, at the end of the input, or (only past [`MAX_UNCUT`] bytes without a safe cut) at a forced one.

use std::io::Read;

use crate::pretokenize::is_safe_cut;
use crate::special::SpecialTokens;

/// The chunk size used unless a caller asks for another: big enough that per-chunk overhead vanishes,
/// small enough that a few chunks in flight cost little memory.
pub const DEFAULT_CHUNK_SIZE: usize = 4 << 20;

/// The most bytes a chunk holds when it has no safe cut: 16 MiB.
pub const MAX_UNCUT: usize = 16 << 20;

/// How many character boundaries a cut forced by [`MAX_UNCUT`] tries for one no special token
/// straddles.
const FORCED_CUT_TRIES: usize = 64;

/// The bytes a cut needs to see after it: the whitespace character itself (up to 4 bytes), and enough of
/// the text to see any special token that could straddle it.
pub fn lookahead(specials: &SpecialTokens) -> usize {
    specials.max_len().max(4)
}

/// The last safe cut in `bytes[from..to]`, searching backwards from `to`. `bytes` must extend at least
/// [`lookahead`] bytes past `to`, or end the text.
pub fn last_safe_cut(
    bytes: &[u8],
    specials: &SpecialTokens,
    from: usize,
    to: usize,
) -> Option<usize> {
    (from.max(1)..to)
        .rev()
        .find(|&p| is_safe_cut(bytes, p) && !specials.straddles(bytes, p))
}

/// The first safe cut in `bytes[from..to]`. `bytes` must extend at least [`lookahead`] bytes past
/// `to`, or end the text.
pub fn next_safe_cut(
    bytes: &[u8],
    specials: &SpecialTokens,
    from: usize,
    to: usize,
) -> Option<usize> {
    (from.max(1)..to).find(|&p| is_safe_cut(bytes, p) && !specials.straddles(bytes, p))
}

/// Where to cut `bytes`, which has no safe cut, at or before `to`: see [`MAX_UNCUT`]. `bytes` must
/// extend at least [`lookahead`] bytes past `to`.
fn forced_cut(bytes: &[u8], specials: &SpecialTokens, to: usize) -> usize {
    // A UTF-8 continuation byte is never the first byte of a character.
    let mut boundaries = (1..=to).rev().filter(|&p| bytes[p] & 0xC0 != 0x80);
    let Some(last) = boundaries.next() else {
        return to;
    };
    std::iter::once(last)
        .chain(boundaries)
        .take(FORCED_CUT_TRIES)
        .find(|&p| !specials.straddles(bytes, p))
        .unwrap_or(last)
}

/// A piece of the input and its byte offset in the whole.
#[derive(Debug)]
pub struct Chunk {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// An iterator of [`Chunk`]s read from `R`, cut only where cutting is safe. A chunk that cannot be
/// allocated is an error of kind [`std::io::ErrorKind::OutOfMemory`], not an abort.
pub struct ChunkReader<'s, R> {
    reader: R,
    specials: &'s SpecialTokens,
    target: usize,
    /// A chunk with no safe cut is cut anyway at this many bytes ([`MAX_UNCUT`]).
    max_uncut: usize,
    /// Bytes read but not yet handed out; they start at file offset `offset`.
    carry: Vec<u8>,
    offset: u64,
    eof: bool,
    /// Buffers of chunks that were handed back ([`Self::recycle`]), for the next chunks: a fresh
    /// buffer of megabytes per chunk is fresh pages for the kernel to fault in and zero.
    spare: Vec<Vec<u8>>,
}

impl<'s, R: Read> ChunkReader<'s, R> {
    /// `target` is the chunk size aimed at (at least 1); chunks are shorter when a cut falls early and
    /// longer only when there is no safe cut near it.
    pub fn new(reader: R, specials: &'s SpecialTokens, target: usize) -> Self {
        ChunkReader {
            reader,
            specials,
            target: target.max(1),
            max_uncut: MAX_UNCUT,
            carry: Vec::new(),
            offset: 0,
            eof: false,
            spare: Vec::new(),
        }
    }

    /// The same reader, cutting text with no safe cut at `max_uncut` bytes instead of [`MAX_UNCUT`].
    #[cfg(test)]
    fn with_max_uncut(mut self, max_uncut: usize) -> Self {
        self.max_uncut = max_uncut;
        self
    }

    /// Takes back the buffer of a chunk that is done with, to hold a later chunk. The reader keeps as
    /// many as it is given, so the caller bounds them by the chunks it holds at once.
    pub fn recycle(&mut self, mut bytes: Vec<u8>) {
        bytes.clear();
        self.spare.push(bytes);
    }

    /// Reads until `carry` holds at least `want` bytes or the input ends.
    fn fill(&mut self, want: usize) -> std::io::Result<()> {
        if self.eof || self.carry.len() >= want {
            return Ok(());
        }
        let missing = want - self.carry.len();
        // Fallible: the chunk grows with the input, and an abort would take the process with it.
        self.carry
            .try_reserve(missing)
            .map_err(|_| std::io::ErrorKind::OutOfMemory)?;
        // `read_to_end` reads into the spare capacity without zeroing it first, and retries on
        // `Interrupted`.
        let read = self
            .reader
            .by_ref()
            .take(missing as u64)
            .read_to_end(&mut self.carry)?;
        self.eof = read < missing;
        Ok(())
    }

    fn take(&mut self, end: usize) -> std::io::Result<Chunk> {
        let mut rest = self.spare.pop().unwrap_or_default();
        rest.try_reserve(self.carry.len() - end)
            .map_err(|_| std::io::ErrorKind::OutOfMemory)?;
        rest.extend_from_slice(&self.carry[end..]);
        self.carry.truncate(end);
        let bytes = std::mem::replace(&mut self.carry, rest);
        let chunk = Chunk {
            offset: self.offset,
            bytes,
        };
        self.offset += end as u64;
        Ok(chunk)
    }
}

impl<R: Read> Iterator for ChunkReader<'_, R> {
    type Item = std::io::Result<Chunk>;

    fn next(&mut self) -> Option<Self::Item> {
        // Look-ahead a cut needs: the whitespace character itself (up to 4 bytes), and enough of the
        // text after it to see any special token that could straddle it.
        let lookahead = lookahead(self.specials);
        let mut searched = 0;
        let mut want = self.target;
        loop {
            if let Err(e) = self.fill(want) {
                return Some(Err(e));
            }
            if self.eof {
                if self.carry.is_empty() {
                    return None;
                }
                let end = self.carry.len();
                return Some(self.take(end));
            }
            let limit = self.carry.len() - lookahead.min(self.carry.len());
            if let Some(cut) = last_safe_cut(&self.carry, self.specials, searched, limit) {
                return Some(self.take(cut));
            }
            if limit >= self.max_uncut {
                let cut = forced_cut(&self.carry, self.specials, self.max_uncut);
                return Some(self.take(cut));
            }
            searched = limit;
            // Never past the bound and its look-ahead: the reads stop there until a chunk is taken.
            want = (self.carry.len() + self.target).min(self.max_uncut + lookahead);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    fn chunks(text: &str, specials: &[&str], target: usize) -> Vec<Chunk> {
        let specials = SpecialTokens::new(specials).unwrap();
        ChunkReader::new(text.as_bytes(), &specials, target)
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn chunks_reassemble_the_input_at_safe_cuts() {
        let text = "The cat sat.\n\nOn the mat<|eot|> and  then\u{3000}日本 x";
        for target in 1..20 {
            let parts = chunks(text, &["<|eot|>"], target);
            let joined: Vec<u8> = parts.iter().flat_map(|c| c.bytes.clone()).collect();
            assert_eq!(joined, text.as_bytes());
            let mut offset = 0;
            for c in &parts {
                assert_eq!(c.offset, offset);
                offset += c.bytes.len() as u64;
                std::str::from_utf8(&c.bytes).unwrap();
            }
        }
    }

    #[test]
    fn special_tokens_with_spaces_are_never_cut() {
        let text = "a <|x y|> b <|x y|> c";
        for target in 1..12 {
            for c in chunks(text, &["<|x y|>"], target) {
                let s = std::str::from_utf8(&c.bytes).unwrap();
                assert_eq!(s.matches("<|").count(), s.matches("|>").count(), "{s:?}");
            }
        }
    }

    #[test]
    fn text_without_a_cut_is_cut_at_the_bound_on_a_character_boundary() {
        let specials = SpecialTokens::new(&["<|x|>"]).unwrap();
        // "é" is two bytes, so an odd bound falls inside a character; the special token must not be
        // split either.
        let text = format!("{}<|x|>{}", "é".repeat(20), "é".repeat(40));
        let bytes = text.as_bytes();
        for max_uncut in 5..60 {
            let reader = ChunkReader::new(bytes, &specials, 4).with_max_uncut(max_uncut);
            let parts: Vec<Chunk> = reader.map(Result::unwrap).collect();
            assert!(parts.len() >= text.len() / (max_uncut + 5), "{max_uncut}");
            let joined: Vec<u8> = parts.iter().flat_map(|c| c.bytes.clone()).collect();
            assert_eq!(joined, bytes);
            for c in &parts {
                let s = std::str::from_utf8(&c.bytes).unwrap();
                // The last chunk may also hold the look-ahead read past the bound.
                assert!(c.bytes.len() <= max_uncut + 5, "{max_uncut}: {s:?}");
                assert_eq!(s.matches("<|").count(), s.matches("|>").count(), "{s:?}");
            }
        }
    }

    #[test]
    fn text_without_a_cut_is_one_chunk() {
        let text = "x".repeat(1000);
        let parts = chunks(&text, &[], 16);
        assert_eq!(parts.len(), 1);
        assert_eq!(parts[0].bytes.len(), 1000);
    }

    /// Reads `text` a few bytes at a time, failing with `Interrupted` before each read, and with
    /// `fail_at`'s error once that many bytes were read.
    struct Flaky<'a> {
        text: &'a [u8],
        interrupt: bool,
        fail_at: usize,
        read: usize,
    }

    impl Read for Flaky<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.interrupt = !self.interrupt;
            if self.interrupt {
                return Err(ErrorKind::Interrupted.into());
            }
            if self.read >= self.fail_at {
                return Err(std::io::Error::other("disk on fire"));
            }
            let n = buf.len().min(3).min(self.text.len() - self.read);
            buf[..n].copy_from_slice(&self.text[self.read..self.read + n]);
            self.read += n;
            Ok(n)
        }
    }

    #[test]
    fn interrupted_reads_are_retried_and_errors_reported() {
        let text = "one two three four five six seven eight nine ten";
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let flaky = |fail_at| Flaky {
            text: text.as_bytes(),
            interrupt: false,
            fail_at,
            read: 0,
        };
        let mut reader = ChunkReader::new(flaky(usize::MAX), &specials, 10);
        let mut joined = Vec::new();
        while let Some(chunk) = reader.next() {
            let chunk = chunk.unwrap();
            joined.extend_from_slice(&chunk.bytes);
            reader.recycle(chunk.bytes);
        }
        assert_eq!(joined, text.as_bytes());
        let mut failing = ChunkReader::new(flaky(20), &specials, 10);
        let error = failing.find_map(|r| r.err()).unwrap();
        assert_eq!(error.to_string(), "disk on fire");
    }

    #[test]
    fn empty_input_has_no_chunks() {
        assert!(chunks("", &[], 8).is_empty());
    }
}
