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
//!
//! Bad records are errors, or skipped and counted in the piece ([`Errors`]), as counting does. A reader
//! is used by one thread at a time but moves between threads.

use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};

use super::count::{Errors, MAX_KEPT_ERRORS};
use super::decompress::{self, Probe};
use super::jsonl::{JsonLines, Record};
use super::kind::{Format, SourceKind};
use crate::chunks::ChunkReader;
use crate::error::{try_push, try_reserve, AllocError, Error, RecordAt, Result};
use crate::input::open_input;
use crate::progress::Progress;
use crate::special::SpecialTokens;

/// Documents, or parts of documents, read from a source, in order.
#[derive(Debug, Default)]
pub struct Piece {
    /// The text, UTF-8 for records; a text file's chunk is checked by whoever encodes it.
    pub text: Vec<u8>,
    /// The end in `text` of each document, in order, when the piece holds whole documents.
    pub ends: Vec<usize>,
    /// For a chunk of a text file: where `text` starts in the (decompressed) file. Its documents are
    /// separated by the end-of-text token, and its last one goes on in the next piece.
    pub split: Option<u64>,
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
    pub fn push_document(&mut self, text: &[u8]) -> Result<()> {
        let oom = |e: AllocError| e.named("a piece of the documents");
        try_reserve(&mut self.text, text.len()).map_err(oom)?;
        self.text.extend_from_slice(text);
        try_push(&mut self.ends, self.text.len()).map_err(oom)
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

/// Opens the documents of the file `path` of kind `kind` (a Parquet file is refused: the Python layer
/// reads those). Fails when the file cannot be opened, naming it.
pub fn open_documents<'a>(
    path: &Path,
    kind: SourceKind,
    options: &DocumentOptions<'a>,
    progress: &dyn Progress,
) -> Result<Box<dyn DocumentReader + 'a>> {
    if kind.format == Format::Parquet {
        let why = "Parquet files are read by the bytepair Python package, not by the engine";
        return Err(Error::io(
            path,
            std::io::Error::new(ErrorKind::Unsupported, why),
        ));
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
                    let spent = std::mem::replace(&mut piece.text, chunk.bytes);
                    self.chunks.recycle(spent);
                    piece.split = Some(chunk.offset);
                }
                Some(Err(e)) => self.source.stream_error(e, piece)?,
                None => self.source.ended = true,
            }
        }
        piece.input_bytes = self.source.advance();
        Ok(self.source.ended)
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
        while !source.ended && piece.text.len() < source.chunk_size {
            match self.records.next_record() {
                Ok(Record::Text(text)) => piece.push_document(text.as_bytes())?,
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
