//! The documents of a source file, read a piece at a time for encoding ([`open_documents`]).
//!
//! Counting only needs the pre-tokens of a file, in any order; encoding needs its documents, in order,
//! and where each ends. A reader hands out [`Piece`]s of a few megabytes, in order, which threads can
//! encode independently:
//!
//! - a text file, compressed or not, in chunks cut at safe places ([`crate::chunks`]), as `encode_file`
//!   reads it. Its documents are separated by the end-of-text special token, which the encoder finds
//!   as it encodes the chunk ([`Piece::split`]); a document may span chunks.
//! - a JSON lines file, compressed or not, records until the piece holds a chunk's worth of text, each
//!   record a document ([`Piece::ends`]).
//! - a Parquet file likewise, rows of its text column, row group after row group.
//!
//! Bad records are errors, or skipped and counted in the piece ([`Errors`]), as counting does. A reader
//! is used by one thread at a time but moves between threads.

use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::count::{Errors, MAX_KEPT_ERRORS};
use super::decompress::{self, Probe};
use super::jsonl::{JsonLines, Record};
use super::kind::{Format, SourceKind};
use super::parquet::{ParquetText, TextBatch, TextBatches};
use crate::chunks::ChunkReader;
use crate::error::{try_push, try_reserve, AllocError, Error, RecordAt, Result};
use crate::input::open_input;
use crate::progress::Progress;
use crate::special::SpecialTokens;

/// Documents, or parts of documents, read from a source, in order.
#[derive(Debug, Default)]
pub struct Piece {
    /// The text: whole documents, each pushed as a `str` by [`Self::push_document`], or a chunk of a
    /// text file ([`Self::set_chunk`]), checked by whoever encodes it.
    text: Vec<u8>,
    /// The end in `text` of each document, in order, when the piece holds whole documents.
    ends: Vec<usize>,
    /// For a chunk of a text file: where `text` starts in the (decompressed) file. Its documents are
    /// separated by the end-of-text token, and its last one goes on in the next piece.
    split: Option<u64>,
    /// Bytes of the source read for this piece (compressed, as on disk), for progress.
    pub input_bytes: u64,
    /// Bad records skipped ([`Errors::Skip`]), and the messages of the first of them.
    pub skipped: u64,
    /// At most [`MAX_KEPT_ERRORS`] messages.
    pub skip_messages: Vec<String>,
}

impl Piece {
    /// Empties the piece, keeping its buffers.
    pub fn clear(&mut self) {
        self.text.clear();
        self.ends.clear();
        self.split = None;
        self.input_bytes = 0;
        self.skipped = 0;
        self.skip_messages.clear();
    }

    /// Appends `text` as a whole document; fails when memory runs out.
    pub fn push_document(&mut self, text: &str) -> Result<()> {
        let oom = |e: AllocError| e.named("a piece of the documents");
        try_reserve(&mut self.text, text.len()).map_err(oom)?;
        self.text.extend_from_slice(text.as_bytes());
        try_push(&mut self.ends, self.text.len()).map_err(oom)
    }

    /// Makes the piece the chunk `bytes` of a text file, which starts at `offset` in the file; returns
    /// the buffer it held.
    fn set_chunk(&mut self, bytes: Vec<u8>, offset: u64) -> Vec<u8> {
        self.ends.clear();
        self.split = Some(offset);
        std::mem::replace(&mut self.text, bytes)
    }

    /// The bytes of text the piece holds.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// For a chunk of a text file: its bytes (not yet checked to be UTF-8), and where it starts in the
    /// file.
    pub fn chunk(&self) -> Option<(&[u8], u64)> {
        self.split.map(|offset| (&self.text[..], offset))
    }

    /// The documents, in order, when the piece holds whole documents (none for a chunk of a text file).
    /// They are not checked again: each was a `str` when pushed, and their UTF-8 check (where the
    /// reader made one, with the record's offset in its message) cost 2% of encoding a dataset when
    /// the workers repeated it.
    pub fn documents(&self) -> impl Iterator<Item = &str> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| {
            let bytes = &self.text[start..end];
            debug_assert!(std::str::from_utf8(bytes).is_ok());
            // SAFETY: `text` and `ends` change only through `push_document`, which appends a whole
            // `str` and its end, `set_chunk`, which leaves no ends, and `clear`; so each range between
            // two ends is one pushed `str`.
            unsafe { std::str::from_utf8_unchecked(bytes) }
        })
    }

    /// Counts the bad record `e` as skipped.
    pub fn skip(&mut self, e: &Error) {
        self.skipped += 1;
        if self.skip_messages.len() < MAX_KEPT_ERRORS {
            self.skip_messages.push(e.to_string());
        }
    }
}

/// A source's documents, a piece at a time.
pub trait DocumentReader: Send {
    /// Fills `piece` (emptied first) with the next documents, and returns whether the source has
    /// ended: then `piece` holds its last documents, or none.
    fn read(&mut self, piece: &mut Piece) -> Result<bool>;
}

/// How to read the documents of source files.
#[derive(Clone, Copy, Debug)]
pub struct DocumentOptions<'a> {
    /// The special tokens, which text files are never cut inside.
    pub specials: &'a SpecialTokens,
    /// The field of JSON lines records that holds the text.
    pub text_field: &'a str,
    /// Whether a bad record is an error or skipped.
    pub errors: Errors,
    /// About how many bytes of text a piece holds (see [`crate::DEFAULT_CHUNK_SIZE`]).
    pub chunk_size: usize,
}

/// Opens the documents of the file `path` of kind `kind`. Fails when the file cannot be opened, naming
/// it, and when a Parquet file has no string column `options.text_field`; a file that is not Parquet
/// is an error, or in skip mode a reader of no documents that skips it.
pub fn open_documents<'a>(
    path: &Path,
    kind: SourceKind,
    options: &DocumentOptions<'a>,
    progress: &dyn Progress,
) -> Result<Box<dyn DocumentReader + 'a>> {
    if kind.format == Format::Parquet {
        let skip = options.errors == Errors::Skip;
        let (text, skipped) = match ParquetText::open(path, options.text_field) {
            Ok(text) => (Some(Arc::new(text)), None),
            Err(e @ Error::BadParquet { .. }) if skip => {
                let size = std::fs::metadata(path).map_or(0, |m| m.len());
                (None, Some((e, size)))
            }
            Err(e) => return Err(e),
        };
        return Ok(Box::new(ParquetDocuments {
            text,
            skipped,
            group: 0,
            batches: None,
            pending: None,
            errors: options.errors,
            chunk_size: options.chunk_size,
        }));
    }
    let file = open_input(path, progress)?;
    let (reader, probe) = decompress::open(file, kind.compression);
    let source = Source {
        path: path.to_path_buf(),
        probe,
        reported: 0,
        errors: options.errors,
        chunk_size: options.chunk_size,
        ended: false,
    };
    Ok(match kind.format {
        Format::Txt => Box::new(TextDocuments {
            chunks: ChunkReader::new(reader, options.specials, options.chunk_size),
            source,
        }),
        _ => Box::new(JsonDocuments {
            records: JsonLines::new(reader, options.text_field),
            source,
        }),
    })
}

/// What both readers keep of their file.
struct Source {
    path: PathBuf,
    probe: Probe,
    /// Bytes of the file read up to the last piece.
    reported: u64,
    errors: Errors,
    chunk_size: usize,
    ended: bool,
}

impl Source {
    /// The bytes of the file read since the last piece.
    fn advance(&mut self) -> u64 {
        let read = self.probe.file_bytes();
        let new = read - self.reported;
        self.reported = read;
        new
    }

    /// An error reading the decompressed text: a corrupt stream ends the file, skipped and counted
    /// in `piece` ([`Errors::Skip`]); anything else is the error.
    fn stream_error(&mut self, e: std::io::Error, piece: &mut Piece) -> Result<()> {
        let e = self.probe.error(&self.path, e, self.chunk_size);
        match e {
            Error::CorruptStream { .. } if self.errors == Errors::Skip => {
                piece.skip(&e);
                self.ended = true;
                Ok(())
            }
            e => Err(e),
        }
    }
}

/// A text file in chunks.
struct TextDocuments<'s> {
    chunks: ChunkReader<'s, Box<dyn Read + Send>>,
    source: Source,
}

impl DocumentReader for TextDocuments<'_> {
    fn read(&mut self, piece: &mut Piece) -> Result<bool> {
        piece.clear();
        if !self.source.ended {
            match self.chunks.next() {
                Some(Ok(chunk)) => {
                    let spent = piece.set_chunk(chunk.bytes, chunk.offset);
                    self.chunks.recycle(spent);
                }
                Some(Err(e)) => self.source.stream_error(e, piece)?,
                None => self.source.ended = true,
            }
        }
        piece.input_bytes = self.source.advance();
        Ok(self.source.ended)
    }
}

/// A Parquet file, rows a piece at a time.
struct ParquetDocuments {
    /// The file, or None when it is skipped whole.
    text: Option<Arc<ParquetText>>,
    /// The error of a file skipped whole, and its size, until reported.
    skipped: Option<(Error, u64)>,
    /// The row group being read, or the next.
    group: usize,
    batches: Option<TextBatches>,
    /// A batch read but not all put in pieces, and its next row.
    pending: Option<(TextBatch, usize)>,
    errors: Errors,
    chunk_size: usize,
}

impl ParquetDocuments {
    /// Damaged data at `e`: the rest of the row group skipped and counted in `piece`
    /// ([`Errors::Skip`]), or the error.
    fn damaged(&mut self, e: Error, piece: &mut Piece, text: &ParquetText) -> Result<()> {
        match e {
            Error::BadParquet { .. } if self.errors == Errors::Skip => {
                piece.skip(&e);
                self.end_group(piece, text);
                Ok(())
            }
            e => Err(e),
        }
    }

    /// Moves on to the next row group, the one read counted in `piece`'s input bytes.
    fn end_group(&mut self, piece: &mut Piece, text: &ParquetText) {
        piece.input_bytes += text.share(self.group);
        self.group += 1;
        self.batches = None;
        self.pending = None;
    }
}

impl DocumentReader for ParquetDocuments {
    fn read(&mut self, piece: &mut Piece) -> Result<bool> {
        piece.clear();
        if let Some((e, size)) = self.skipped.take() {
            piece.skip(&e);
            piece.input_bytes = size;
        }
        let Some(text) = self.text.clone() else {
            return Ok(true);
        };
        while piece.text_len() < self.chunk_size {
            if let Some((batch, next)) = &mut self.pending {
                while *next < batch.len() && piece.text_len() < self.chunk_size {
                    match batch.text(*next) {
                        Ok(row) => piece.push_document(row)?,
                        Err(e) if self.errors == Errors::Skip => piece.skip(&e),
                        Err(e) => return Err(e),
                    }
                    *next += 1;
                }
                if *next == batch.len() {
                    self.pending = None;
                }
                continue;
            }
            if let Some(batches) = &mut self.batches {
                match batches.next_batch() {
                    Ok(Some(batch)) => self.pending = Some((batch, 0)),
                    Ok(None) => self.end_group(piece, &text),
                    Err(e) => self.damaged(e, piece, &text)?,
                }
                continue;
            }
            if self.group == text.row_groups() {
                break;
            }
            match text.batches(self.group, self.chunk_size) {
                Ok(batches) => self.batches = Some(batches),
                Err(e) => self.damaged(e, piece, &text)?,
            }
        }
        Ok(self.group == text.row_groups())
    }
}

/// A JSON lines file, records a piece at a time.
struct JsonDocuments {
    records: JsonLines<Box<dyn Read + Send>>,
    source: Source,
}

impl DocumentReader for JsonDocuments {
    fn read(&mut self, piece: &mut Piece) -> Result<bool> {
        piece.clear();
        let source = &mut self.source;
        while !source.ended && piece.text_len() < source.chunk_size {
            match self.records.next_record() {
                Ok(Record::Text(text)) => piece.push_document(text)?,
                Ok(Record::Bad(why)) => {
                    let at = RecordAt::Line(source.path.clone(), self.records.line());
                    let e = Error::BadRecord { at, why };
                    match source.errors {
                        Errors::Strict => return Err(e),
                        Errors::Skip => piece.skip(&e),
                    }
                }
                Ok(Record::End) => source.ended = true,
                Err(e) if e.kind() == ErrorKind::OutOfMemory => {
                    let wanted = AllocError::of::<u8>(self.records.wanted());
                    return Err(wanted.named("a line of the input"));
                }
                Err(e) => source.stream_error(e, piece)?,
            }
        }
        piece.input_bytes = source.advance();
        Ok(source.ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;

    /// Every piece of `reader`, to its end.
    fn pieces(mut reader: Box<dyn DocumentReader + '_>) -> Result<Vec<Piece>> {
        let mut all = Vec::new();
        loop {
            let mut piece = Piece::default();
            let ended = reader.read(&mut piece)?;
            all.push(piece);
            if ended {
                return Ok(all);
            }
        }
    }

    #[test]
    fn a_parquet_file_s_rows_come_in_order_a_piece_of_about_the_chunk_size_at_a_time() {
        let path =
            std::env::temp_dir().join(format!("bytepair-docs-{}.parquet", std::process::id()));
        let texts: Vec<String> = (0..30)
            .map(|i| format!("document {i} {}", "y".repeat(i)))
            .collect();
        let mut rows: Vec<Option<&str>> = texts.iter().map(|t| Some(t.as_str())).collect();
        rows[17] = None;
        crate::sources::parquet::tests::write_parquet(&path, &rows, 8);
        let specials = SpecialTokens::new::<&str>(&[]).unwrap();
        let kind = SourceKind::of(&path).unwrap();
        let options = |errors| DocumentOptions {
            specials: &specials,
            text_field: "text",
            errors,
            chunk_size: 100,
        };
        let strict = options(Errors::Strict);
        let reader = open_documents(&path, kind, &strict, &Silent).unwrap();
        let e = pieces(reader).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!("{}: row 17: the text is null", path.display())
        );
        let skip = options(Errors::Skip);
        let all = pieces(open_documents(&path, kind, &skip, &Silent).unwrap()).unwrap();
        let mut documents = Vec::new();
        for piece in &all {
            assert!(
                piece.text_len() < 100 + 50,
                "a piece stops at the first row past 100 bytes"
            );
            documents.extend(piece.documents().map(str::to_string));
        }
        let expected: Vec<String> = rows.iter().flatten().map(|t| t.to_string()).collect();
        assert_eq!(documents, expected);
        assert_eq!(all.iter().map(|p| p.skipped).sum::<u64>(), 1);
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(all.iter().map(|p| p.input_bytes).sum::<u64>(), size);
        std::fs::write(&path, b"not parquet").unwrap();
        let all = pieces(open_documents(&path, kind, &skip, &Silent).unwrap()).unwrap();
        assert_eq!((all.len(), all[0].skipped, all[0].input_bytes), (1, 1, 11));
        assert!(open_documents(&path, kind, &strict, &Silent).is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
