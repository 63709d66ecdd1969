//! Counting a byte range of an uncompressed text file on its own ([`count_text_range`]): the parts of
//! one large file counted by different processes or machines, whose counts add up to the file's.
//!
//! A part is given by nominal offsets, which need not fall anywhere in particular; each end moves to
//! the first safe cut at or after it ([`cut_at_or_after`]: the same rule as [`crate::chunks`], a piece
//! boundary whatever follows that no special token straddles). The cut depends only on the file and
//! the offset, so the part ending at an offset and the part starting there agree on where it is, and
//! parts from offsets `0 = o_0 < o_1 < ... < o_n = size` cover the file exactly once (a part between two
//! offsets with no safe cut between them is empty). Counting is exact at any safe cut, so the parts'
//! counts add up to the whole file's; the part that starts at 0 counts the file's one document.
//!
//! Memory: one chunk being counted, plus a block while a cut is searched for.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use super::count::CorpusCounts;
use crate::chunks::{lookahead, next_safe_cut, ChunkReader};
use crate::error::{Error, Result};
use crate::input::open_input;
use crate::progress::{Phase, Progress};
use crate::special::SpecialTokens;
use crate::train::{count_text, PreTokenCounts};

/// The bytes read at a time while searching for a cut.
const SEARCH_BLOCK: u64 = 1 << 16;

/// The first safe cut at or after `offset` of `file`, whose size is `size`: 0 for 0, and `size` when
/// no safe cut comes between `offset` and the end.
pub fn cut_at_or_after(
    file: &mut File,
    offset: u64,
    size: u64,
    specials: &SpecialTokens,
) -> io::Result<u64> {
    if offset == 0 || offset >= size {
        return Ok(offset.min(size));
    }
    // A cut looks back at the character before it and at any special token that could straddle it,
    // and as far ahead.
    let look = lookahead(specials);
    let mut start = offset.saturating_sub(look as u64);
    let mut from = (offset - start) as usize;
    let mut buffer = Vec::new();
    file.seek(SeekFrom::Start(start))?;
    loop {
        let read = file.by_ref().take(SEARCH_BLOCK).read_to_end(&mut buffer)? as u64;
        let end = read < SEARCH_BLOCK || start + buffer.len() as u64 >= size;
        let to = if end {
            buffer.len()
        } else {
            buffer.len().saturating_sub(look)
        };
        if let Some(cut) = next_safe_cut(&buffer, specials, from, to) {
            return Ok(start + cut as u64);
        }
        if end {
            return Ok(size.min(start + buffer.len() as u64));
        }
        // Keep what the next positions look back at.
        let drop = to.saturating_sub(look);
        buffer.drain(..drop);
        start += drop as u64;
        from = to - drop;
    }
}

/// Counts the part of the uncompressed text file `path` between the first safe cuts at or after
/// `start` and `end` (see the module docs), split at `specials`, read in chunks of about `chunk_size`
/// bytes; `progress` is told the bytes counted.
///
/// Fails when the file cannot be read, on invalid UTF-8 (naming the file and the offset from its
/// start), when memory runs out, or when `progress` asks to stop.
pub fn count_text_range(
    path: &Path,
    start: u64,
    end: u64,
    specials: &SpecialTokens,
    chunk_size: usize,
    progress: &dyn Progress,
) -> Result<CorpusCounts> {
    let mut file = open_input(path, progress)?;
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let cut = |file: &mut File, at: u64| {
        cut_at_or_after(file, at, size, specials).map_err(|e| Error::io(path, e))
    };
    let from = cut(&mut file, start)?;
    let to = cut(&mut file, end.max(start))?;
    file.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io(path, e))?;
    let mut chunks = ChunkReader::new(file.take(to - from), specials, chunk_size);
    let mut counts = PreTokenCounts::new()?;
    let mut done = 0;
    while let Some(chunk) = chunks.next() {
        let chunk = chunk.map_err(|e| Error::read(path, e, chunk_size))?;
        let text = simdutf8::compat::from_utf8(&chunk.bytes).map_err(|e| Error::InvalidUtf8 {
            path: path.to_path_buf(),
            offset: from + chunk.offset + e.valid_up_to() as u64,
        })?;
        count_text(text, specials, &mut counts)?;
        done += chunk.bytes.len() as u64;
        progress.report(Phase::Count, done, to - from)?;
        chunks.recycle(chunk.bytes);
    }
    let documents = u64::from(start == 0);
    Ok(CorpusCounts::from_parts(
        counts,
        documents,
        0,
        specials.tokens().to_vec(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;
    use crate::sources::{count_sources, Errors, SourceKind, SourceOptions};
    use std::path::PathBuf;

    fn file_with(name: &str, text: &[u8]) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("bytepair-range-{}-{name}.txt", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn whole(path: &Path, specials: &SpecialTokens) -> CorpusCounts {
        let options = SourceOptions {
            specials,
            text_field: "text",
            errors: Errors::Strict,
            chunk_size: 7,
            threads: 1,
        };
        let kind = SourceKind::of(path).unwrap();
        count_sources(&[(path, kind)], &options, &Silent).unwrap()
    }

    #[test]
    fn parts_at_any_offsets_add_up_to_the_file() {
        let text = "The cat  sat.\n\nOn the mat<|eot|> and\u{3000}then 日本 x<|eot|><|eot|>  y\n";
        let specials = SpecialTokens::new(&["<|eot|>"]).unwrap();
        let path = file_with("parts", text.as_bytes());
        let expected = whole(&path, &specials);
        let size = text.len() as u64;
        for step in 1..=size {
            let mut total = CorpusCounts::new().unwrap();
            let mut at = 0;
            while at < size {
                let next = (at + step).min(size);
                let part = count_text_range(&path, at, next, &specials, 5, &Silent).unwrap();
                total.update(&part).unwrap();
                at = next;
            }
            assert_eq!(total, expected, "parts of {step} bytes");
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_cut_is_the_first_safe_one_at_or_after_the_offset() {
        let specials = SpecialTokens::new(&["<|e|>"]).unwrap();
        // A block of text with no safe cut, longer than a search block, then one.
        let mut text = vec![b'x'; SEARCH_BLOCK as usize * 2 + 3];
        text.extend_from_slice(b"<|e|> y z");
        let path = file_with("cut", &text);
        let mut file = File::open(&path).unwrap();
        let size = text.len() as u64;
        let cut = |file: &mut File, at| cut_at_or_after(file, at, size, &specials).unwrap();
        let first_space = text.iter().position(|&b| b == b' ').unwrap() as u64;
        assert_eq!(cut(&mut file, 0), 0);
        assert_eq!(cut(&mut file, 1), first_space);
        assert_eq!(cut(&mut file, first_space), first_space);
        assert_eq!(cut(&mut file, first_space + 1), first_space + 2);
        assert_eq!(cut(&mut file, size - 1), size);
        assert_eq!(cut(&mut file, size + 5), size);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn invalid_utf8_is_named_at_its_offset_in_the_file() {
        let specials = SpecialTokens::new(&[] as &[&str]).unwrap();
        let path = file_with("utf8", b"one two three \xff four");
        let e = count_text_range(&path, 5, 100, &specials, 4, &Silent).unwrap_err();
        assert!(matches!(e, Error::InvalidUtf8 { offset: 14, .. }), "{e}");
        std::fs::remove_file(path).unwrap();
    }
}
