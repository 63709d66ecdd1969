//! Token shards: a dataset's documents encoded into files that training reads directly.
//!
//! - [`writer`]: one shard's two files (the ids, and where each document starts) in one of three
//!   layouts ([`ShardFormat`]: Megatron-LM's indexed dataset, nanoGPT's raw `.bin`, NumPy arrays),
//!   written under temporary names and renamed into place only when whole.
//! - [`dataset`]: [`encode_dataset`], the documents of many inputs encoded on all cores into shards,
//!   the same bytes whatever the threads.

mod dataset;
mod writer;

pub use dataset::{
    encode_dataset, DatasetInput, DatasetJob, DatasetOptions, DatasetSummary, ShardInputs,
};
pub use writer::{Shard, ShardFile, ShardFormat};
