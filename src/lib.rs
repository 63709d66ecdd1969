//! bytepair: byte-level BPE tokenizers, trained exactly as the reference does and fast.
//!
//! The engine behind the `bytepair` Python package. Its parts, one concept a module:
//!
//! - [`pretokenize`]: the GPT-2 pre-tokenizer, a hand-written scanner equal to the `regex` pattern.
//! - `boundaries`: the scanner's fast path, the piece boundaries of 64 bytes of ASCII at once.
//! - [`special`]: special tokens, matched leftmost-longest before pre-tokenization.
//! - [`chunks`]: reading a file in pieces cut where cutting cannot change the result.
//! - [`input`]: opening an input file without waiting forever (a FIFO without a writer).
//! - [`threads`]: how many threads a call starts, capped, and fewer when they cannot start.
//! - [`count`]: counting pre-tokens over those pieces on all cores.
//! - [`train`] and [`queue`]: choosing merges incrementally, ties to the greatest pair of byte strings.
//! - [`encode`]: text to ids and back, identical to tiktoken for the same ranks.
//! - `long_merge`: the encoder's merge loop for long pre-tokens, O(n log n) where the short one is quadratic.
//! - `pairs`: which adjacent tokens merge, and at which rank, for the encoder's merge loop.
//! - [`bytes_map`]: the byte-string map behind counting and encoding's lookups.
//! - [`recent`]: the encoder's small cache of recently seen pre-tokens.
//! - `scratch`: the encoder's per-thread caches, kept between calls.
//! - [`encode_file`]: whole files to `.npy` arrays of ids, on all cores, in bounded memory.
//! - [`npy_writer`]: the `.npy` output of `encode_file`, whose header is written last.
//! - [`output`]: opening that output so that nothing but what the user named is ever replaced.
//! - [`huge_pages`]: 2 MB pages for the large buffers of one call.
//! - [`ucs`]: Python's string storage (Latin-1, UCS-2, UCS-4) to UTF-8.
//! - `py` (feature `python`): the PyO3 binding; nothing else knows about Python.
//!
//! ```
//! use bytepair::{train_counts, count_text, PreTokenCounts, SpecialTokens, Silent};
//! let specials = SpecialTokens::new(&["<|endoftext|>"]).unwrap();
//! let mut counts = PreTokenCounts::default();
//! count_text("low lower lowest<|endoftext|>low", &specials, &mut counts).unwrap();
//! let trained = train_counts(&counts, 2, &specials, &Silent).unwrap();
//! // ("l", "o") and ("o", "w") both occur 4 times; the tie goes to the greater pair.
//! assert_eq!(trained.vocab[256], b"ow");
//! assert_eq!(trained.vocab[257], b"low");
//! assert_eq!(trained.vocab[258], b"<|endoftext|>");
//! ```

pub mod bytes_map;
pub mod chunks;
pub mod encode;
pub mod error;
pub mod input;
pub mod output;
pub mod pretokenize;
pub mod progress;
pub mod special;
pub mod threads;
pub mod train;

#[cfg(any(feature = "python", test))]
mod python;

pub use encode::Encoder;
pub use error::{Error, Result};
pub use pretokenize::{pretokenize, PreTokens};
pub use progress::{Phase, Progress, Silent};
pub use special::SpecialTokens;
pub use train::count::{count_file, count_files, count_text, PreTokenCounts};
pub use train::{train_counts, train_files, TrainOptions, Trained};
