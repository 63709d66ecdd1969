//! Sources: corpora as they ship, and their pre-token counts.
//!
//! A source file's name says what it holds ([`kind`]: [`SourceKind::of`]): its format (`.txt`, JSON lines as
//! `.jsonl` or `.json`, `.parquet`), then optionally its compression (`.gz`, `.zst`, `.xz`). Every record,
//! and every file, is its own document: no pre-token spans two, exactly as if the documents were joined
//! by a special token.
//!
//! - [`decompress`]: a file through its decompressor, a corrupt or truncated stream an error naming it.
//! - [`jsonl`]: the text field of each line of a JSON lines file; [`json_text`] reads it in one pass
//!   where the line is as datasets write them.
//! - [`count`]: [`CorpusCounts`], and counting files ([`count_sources`]) and in-memory texts
//!   ([`count_texts`]) into them on all cores, strictly or skipping bad records ([`Errors`]).
//! - [`counts_file`]: the file [`CorpusCounts`] are saved in, and the form they move between processes in.
//! - [`documents`]: a file's documents in order, a [`Piece`] at a time, for encoding
//!   ([`open_documents`]).
//! - [`range`]: a byte range of an uncompressed text file counted on its own, cut at safe places
//!   ([`count_text_range`]), so that the parts of a large file can be counted apart and added up.
//!
//! - [`parquet`]: the text column of a Parquet file, a row group at a time, which counting and
//!   [`open_documents`] read as they read text files in chunks; [`parquet_row_groups`] for planners.
//!   [`pages`] reads a column chunk's page headers first, to refuse what the decoder cannot take safely.

mod count;
mod counts_file;
mod decompress;
mod documents;
mod json_text;
mod jsonl;
mod kind;
mod pages;
mod parquet;
mod range;

pub use count::{
    count_parquet_row_groups, count_sources, count_texts, CorpusCounts, Errors, SourceOptions,
    MAX_KEPT_ERRORS,
};
pub use documents::{open_documents, DocumentOptions, DocumentReader, Piece};
pub use kind::{Compression, Format, SourceKind};
pub use parquet::parquet_row_groups;
pub use range::count_text_range;
