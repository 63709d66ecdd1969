//! The one error type of the engine. Each variant carries what a user needs to act on it; the Python
//! binding maps I/O errors to `OSError` (with errno, so Python picks `FileNotFoundError` and friends) and
//! [`Error::OutOfMemory`] to `MemoryError`, and the others to `ValueError`, using the `Display` text
//! as the message.
//!
//! Out of memory is an error, not an abort: Rust's infallible allocations abort the process when they
//! fail (a Python interpreter under `RLIMIT_AS` died with its caller), and stable Rust cannot turn that
//! into a panic. So every allocation that grows with the input is made with `try_reserve` (or a
//! fallible constructor such as [`try_vec`]), and its failure comes back as an [`AllocError`], named by
//! the caller with what it was for.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// What went wrong, with what a user needs to act on it; its `Display` text is the message.
#[derive(Debug)]
pub enum Error {
    /// Opening, reading or writing `path` failed.
    Io {
        /// The path the caller gave.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// The input is not UTF-8.
    InvalidUtf8 {
        /// The input file.
        path: PathBuf,
        /// The first invalid byte, from the start of the file.
        offset: u64,
    },
    /// `vocab_size` cannot hold the 256 byte tokens and the special tokens.
    VocabTooSmall {
        /// The size asked for.
        vocab_size: usize,
        /// The smallest size that holds them.
        minimum: usize,
    },
    /// A special token is the empty string.
    EmptySpecialToken,
    /// A special token is longer than a special token may be.
    SpecialTokenTooLong {
        /// Its length in bytes.
        len: usize,
        /// The most bytes a special token may have.
        max: usize,
    },
    /// The caller's progress callback asked to stop (for example on Ctrl-C).
    Interrupted,
    /// A vocabulary or merges that cannot make a tokenizer; the text says why.
    InvalidVocab(String),
    /// An id that has no token, given to decode.
    UnknownId(u64),
    /// An id too large for the output type asked for.
    IdOutOfRange {
        /// The largest id of the part of the output that failed.
        id: u32,
        /// The NumPy name of the output type (`uint16`).
        dtype: &'static str,
    },
    /// The output named is the input file (by device and inode): writing it would destroy the input.
    OutputIsInput(PathBuf),
    /// An allocation failed.
    OutOfMemory {
        /// What the memory was for ("the ids").
        what: &'static str,
        /// The bytes asked for.
        bytes: usize,
        /// The length of the text it was for, when that says why it was large.
        text: Option<usize>,
    },
    /// A file whose name does not say what it holds (see [`crate::SourceKind::of`]).
    UnknownSourceType(PathBuf),
    /// A record of a source that cannot be counted (bad JSON, no text field, a text that is not a
    /// string or not UTF-8).
    BadRecord {
        /// Where the record is.
        at: RecordAt,
        /// What is wrong with it.
        why: String,
    },
    /// A compressed stream that is corrupt or ends before its end.
    CorruptStream {
        /// The compressed file.
        path: PathBuf,
        /// Its compression ("gzip", "zstd", "xz").
        format: &'static str,
        /// What the decoder said.
        why: String,
    },
    /// A file that is not Parquet, or whose footer or data cannot be decoded.
    BadParquet {
        /// The Parquet file.
        path: PathBuf,
        /// The first row that could not be read and its row group, when the footer was read.
        rows: Option<(u64, usize)>,
        /// What the decoder said.
        why: String,
    },
    /// A Parquet file without the text column, or whose text column is not strings.
    TextColumn {
        /// The Parquet file.
        path: PathBuf,
        /// What is wrong, naming the column.
        why: String,
    },
    /// Data that is not a counts file of this version: foreign, from a newer bytepair, or damaged.
    BadCountsFile {
        /// The file (or "pickled counts").
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// Counts that cannot be merged or trained on as asked; the text says why.
    InvalidCounts(String),
}

/// Where a record is, for its errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordAt {
    /// A line of a file, from 1.
    Line(PathBuf, u64),
    /// A row of a table (a Parquet file), from 0 as its readers number them.
    Row(PathBuf, u64),
    /// An item of a sequence of texts, from 0.
    Item(u64),
}

impl fmt::Display for RecordAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordAt::Line(path, line) => write!(f, "{}:{line}", path.display()),
            RecordAt::Row(path, row) => write!(f, "{}: row {row}", path.display()),
            RecordAt::Item(i) => write!(f, "item {i}"),
        }
    }
}

/// An allocation of `bytes` failed (the memory it asked for, not what the allocator rounds it to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError {
    /// The bytes asked for.
    pub bytes: usize,
}

impl AllocError {
    /// The error of an allocation of `n` values of type `T`.
    pub(crate) fn of<T>(n: usize) -> AllocError {
        AllocError {
            bytes: n.saturating_mul(size_of::<T>()),
        }
    }

    /// The engine error for this failure: memory for `what`.
    pub fn named(self, what: &'static str) -> Error {
        Error::OutOfMemory {
            what,
            bytes: self.bytes,
            text: None,
        }
    }

    /// The engine error for this failure: memory for `what` of a text of `text` bytes.
    pub fn of_text(self, what: &'static str, text: usize) -> Error {
        Error::OutOfMemory {
            what,
            bytes: self.bytes,
            text: Some(text),
        }
    }
}

/// Room for `additional` more values in `v`, or the error of that allocation (`Vec::reserve` would
/// abort the process instead). The error's size is what the vector asked for: it grows to at least
/// twice its capacity.
#[inline]
pub(crate) fn try_reserve<T>(
    v: &mut Vec<T>,
    additional: usize,
) -> std::result::Result<(), AllocError> {
    v.try_reserve(additional).map_err(|_| {
        let wanted = v.len().saturating_add(additional);
        AllocError::of::<T>(wanted.max(v.capacity().saturating_mul(2)))
    })
}

/// Pushes `value`, growing `v` fallibly when it is full: on the hot path, the one check `push` makes.
#[inline(always)]
pub(crate) fn try_push<T>(v: &mut Vec<T>, value: T) -> std::result::Result<(), AllocError> {
    if v.len() == v.capacity() {
        grow_one(v)?;
    }
    // SAFETY: `len < capacity` (checked, or made so by `grow_one`), so the slot at `len` is allocated
    // and unused; writing it and counting it in `len` is what `push` does.
    unsafe {
        v.as_mut_ptr().add(v.len()).write(value);
        v.set_len(v.len() + 1);
    }
    Ok(())
}

#[cold]
#[inline(never)]
fn grow_one<T>(v: &mut Vec<T>) -> std::result::Result<(), AllocError> {
    try_reserve(v, 1)
}

/// `vec![value; n]`, or the error of that allocation.
pub(crate) fn try_vec<T: Clone>(value: T, n: usize) -> std::result::Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| AllocError::of::<T>(n))?;
    v.resize(n, value);
    Ok(v)
}

/// `value` in a box, or the error of its allocation (`Box::new` aborts when memory runs out).
pub(crate) fn try_box<T>(value: T) -> std::result::Result<Box<T>, AllocError> {
    let layout = std::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Ok(Box::new(value));
    }
    // SAFETY: the layout is of a `T` of non-zero size; a non-null pointer from `alloc` is valid for
    // writing one `T`, and a box of it frees it with the same layout.
    unsafe {
        let ptr = std::alloc::alloc(layout).cast::<T>();
        if ptr.is_null() {
            return Err(AllocError::of::<T>(1));
        }
        ptr.write(value);
        Ok(Box::from_raw(ptr))
    }
}

/// A copy of `values`, or the error of its allocation.
pub(crate) fn try_copy<T: Copy>(values: &[T]) -> std::result::Result<Vec<T>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(values.len())
        .map_err(|_| AllocError::of::<T>(values.len()))?;
    v.extend_from_slice(values);
    Ok(v)
}

/// A human size: "15.0 MB", "512.0 KB", "16 bytes".
struct Size(usize);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            n if n >= 1_000_000 => write!(f, "{:.1} MB", n as f64 / 1e6),
            n if n >= 1_000 => write!(f, "{:.1} KB", n as f64 / 1e3),
            n => write!(f, "{n} bytes"),
        }
    }
}

/// The result of the engine's fallible operations.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// The error of reading `path` in chunks of about `chunk_size` bytes: a chunk that could not be
    /// allocated ([`crate::chunks::ChunkReader`] reports it as [`io::ErrorKind::OutOfMemory`]) is out
    /// of memory, anything else an I/O error.
    pub(crate) fn read(path: impl Into<PathBuf>, source: io::Error, chunk_size: usize) -> Error {
        match source.kind() {
            io::ErrorKind::OutOfMemory => Error::OutOfMemory {
                what: "a chunk of the input",
                bytes: chunk_size,
                text: None,
            },
            _ => Error::io(path, source),
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
            Error::OutOfMemory { what, bytes, text } => {
                write!(f, "could not allocate {} for {what}", Size(*bytes))?;
                match text {
                    Some(len) => write!(f, " of a {} text", Size(*len)),
                    None => Ok(()),
                }
            }
            Error::UnknownSourceType(path) => write!(
                f,
                "{}: unknown file type; a source file is .txt, .jsonl or .json (JSON lines), each \
                 possibly compressed (.gz, .zst, .xz), or .parquet",
                path.display()
            ),
            Error::BadRecord { at, why } => write!(f, "{at}: {why}"),
            Error::CorruptStream { path, format, why } => write!(
                f,
                "{}: corrupt or truncated {format} stream: {why}",
                path.display()
            ),
            Error::BadParquet {
                path,
                rows: None,
                why,
            } => write!(
                f,
                "{}: not a Parquet file, or a corrupt one ({why})",
                path.display()
            ),
            Error::BadParquet {
                path,
                rows: Some((row, group)),
                why,
            } => write!(
                f,
                "{}: rows from {row} (row group {group}) cannot be read: {why}",
                path.display()
            ),
            Error::TextColumn { path, why } => write!(f, "{}: {why}", path.display()),
            Error::BadCountsFile { name, why } => write!(f, "{name}: {why}"),
            Error::InvalidCounts(why) => write!(f, "{why}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impossible_allocation_is_an_error_naming_its_size() {
        // More than any address space holds: the allocator refuses it, and nothing aborts.
        let huge = 1 << 60;
        assert_eq!(try_vec(0u32, huge), Err(AllocError::of::<u32>(huge)));
        let mut v = vec![1u64, 2];
        assert!(try_reserve(&mut v, huge).is_err());
        assert_eq!(v, [1, 2]);
        let e = AllocError { bytes: 19_700_000 }.of_text("the ids", 4_900_000);
        assert_eq!(
            e.to_string(),
            "could not allocate 19.7 MB for the ids of a 4.9 MB text"
        );
        let e = AllocError { bytes: 524_288 }.named("the tables of the vocabulary");
        assert_eq!(
            e.to_string(),
            "could not allocate 524.3 KB for the tables of the vocabulary"
        );
    }
}
