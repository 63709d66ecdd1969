//! The one error type of the engine. Each variant carries what a user needs to act on it; the Python
//! binding maps I/O errors to `OSError` (with errno, so Python picks `FileNotFoundError` and friends) and
//! the others to `ValueError`, using the `Display` text as the message.

use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// Opening, reading or writing `path` failed.
    Io { path: PathBuf, source: io::Error },
    /// The input is not UTF-8: the first invalid byte is at `offset` (from the start of the file).
    InvalidUtf8 { path: PathBuf, offset: u64 },
    /// `vocab_size` cannot hold the 256 byte tokens and the special tokens.
    VocabTooSmall { vocab_size: usize, minimum: usize },
    /// A special token is the empty string.
    EmptySpecialToken,
    /// A special token longer than `max` bytes (see [`crate::special::MAX_SPECIAL_TOKEN_LEN`]).
    SpecialTokenTooLong { len: usize, max: usize },
    /// The caller's progress callback asked to stop (for example on Ctrl-C).
    Interrupted,
    /// A vocabulary or merges that cannot make a tokenizer; the text says why.
    InvalidVocab(String),
    /// An id that has no token, given to decode.
    UnknownId(u64),
    /// An id too large for the output type asked for.
    IdOutOfRange { id: u32, dtype: &'static str },
    /// The output named is the input file (by device and inode): writing it would destroy the input.
    OutputIsInput(PathBuf),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::InvalidUtf8 { path, offset } => write!(
                f,
                "{}: invalid UTF-8 at byte offset {offset}; the input must be UTF-8 text",
                path.display()
            ),
            Error::VocabTooSmall {
                vocab_size,
                minimum,
            } => write!(
                f,
                "vocab_size {vocab_size} is too small: the 256 byte tokens and the special tokens \
                 need at least {minimum}"
            ),
            Error::EmptySpecialToken => write!(f, "a special token must not be the empty string"),
            Error::SpecialTokenTooLong { len, max } => write!(
                f,
                "a special token of {len} bytes is longer than the {max} bytes a special token may have"
            ),
            Error::Interrupted => write!(f, "interrupted"),
            Error::InvalidVocab(why) => write!(f, "invalid vocabulary: {why}"),
            Error::UnknownId(id) => write!(f, "id {id} is not in the vocabulary"),
            Error::IdOutOfRange { id, dtype } => {
                write!(
                    f,
                    "id {id} does not fit in {dtype}; use a wider dtype (uint32)"
                )
            }
            Error::OutputIsInput(path) => write!(
                f,
                "{}: the output is the input file; writing it would destroy the input",
                path.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
