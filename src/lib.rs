//! bytepair: byte-level BPE tokenizers, trained exactly as the reference does, and fast.
//!
//! The engine behind the `bytepair` Python package. The folders are its parts:
//!
//! - `pretokenize/`: the GPT-2 pre-tokenizer, a hand-written scanner equal to the `regex` pattern
//!   ([`pretokenize()`]).
//! - `train/`: counting pre-tokens over files on all cores, and choosing merges exactly as the
//!   reference does ([`train_files`], [`train_counts`]).
//! - `encode/`: text to ids and back, identical to tiktoken for the same ranks ([`Encoder`]); where a
//!   merge happens (`encode/merge.rs`); whole files to `.npy` arrays ([`encode_file`]).
//! - `python/` (feature `python`): the PyO3 binding, `bytepair._core`. It uses the public API below,
//!   plus `error.rs`'s fallible allocation helpers and `huge_pages.rs`; nothing else knows about Python.
//!
//! and the files beside them are what the parts share: `special.rs` (special tokens, matched
//! leftmost-longest before pre-tokenization), `chunks.rs` (where a file is cut so that each piece can
//! be processed alone), `input.rs` and `output.rs` (opening the files named by the user so that nothing
//! waits forever and nothing the user did not name is replaced), `ordered.rs` (work read in order, done
//! on threads and written in order: the pipeline of `encode_file` and `encode_dataset`), `threads.rs`
//! (how many threads a call starts), `progress.rs`, `error.rs` (the one error type, and fallible allocation), `bytes_map.rs`
//! (the byte-string map behind counting and encoding's lookups), `prefetch.rs` (loads started ahead of a
//! loop's reads), and `huge_pages.rs`.
//!
//! ```
//! use bytepair::{train_counts, count_text, PreTokenCounts, SpecialTokens, Silent};
//! let specials = SpecialTokens::new(&["<|endoftext|>"]).unwrap();
//! let mut counts = PreTokenCounts::default();
//! count_text("low lower lowest<|endoftext|>low", &specials, &mut counts).unwrap();
//! // A vocabulary of 259: the 256 bytes, two merges and the special token.
//! let trained = train_counts(&counts, 259, &specials, &Silent).unwrap();
//! // ("l", "o") and ("o", "w") both occur 4 times; the tie goes to the greater pair.
//! assert_eq!(trained.vocab[256], b"ow");
//! assert_eq!(trained.vocab[257], b"low");
//! assert_eq!(trained.vocab[258], b"<|endoftext|>");
//! ```

#![deny(missing_docs)]

mod bytes_map;
mod chunks;
mod encode;
mod error;
mod huge_pages;
mod input;
mod ordered;
mod output;
mod prefetch;
mod pretokenize;
mod progress;
mod shards;
mod sources;
mod special;
mod threads;
mod train;

#[cfg(any(feature = "python", test))]
mod python;

pub use chunks::DEFAULT_CHUNK_SIZE;
pub use encode::file::{encode_file, Dtype, EncodeFileOptions};
pub use encode::Encoder;
pub use error::{AllocError, Error, RecordAt, Result};
pub use pretokenize::{class_of, is_safe_cut, pretokenize, Class, PreTokens, UNICODE_VERSION};
pub use progress::{Phase, Progress, Silent};
pub use shards::{
    encode_dataset, DatasetInput, DatasetJob, DatasetOptions, DatasetSummary, Shard, ShardFile,
    ShardFormat, ShardInputs,
};
pub use sources::{
    count_parquet_row_groups, count_sources, count_text_range, count_texts, open_documents,
    parquet_row_groups, Compression, CorpusCounts, DocumentOptions, DocumentReader, Errors, Format,
    Piece, SourceKind, SourceOptions, MAX_KEPT_ERRORS,
};
pub use special::SpecialTokens;
pub use threads::{max_threads, thread_count};
pub use train::{
    count_file, count_files, count_text, encoded_length, train_counts, train_counts_owned,
    train_files, PreTokenCounts, TrainOptions, Trained,
};

/// An encoder is shared by the threads of one call and by a Python object used from many threads.
const _: fn() = || {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Encoder>();
};
