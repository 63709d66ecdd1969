//! The Python binding, `bytepair._core` (feature `python`): converts types, releases the GIL around
//! long work, turns the engine's errors into Python exceptions, and keeps Rust panics from crossing
//! into Python. The public Python API and its documentation are in `python/bytepair/`.
//!
//! - [`errors`]: where Python exceptions come from (engine errors and panics).
//! - [`interrupt`]: Ctrl-C and progress callbacks during long work.
//! - [`dataset`]: `encode_dataset`, documents from files and Python iterators into token shards.
//! - [`encoder`]: the `Encoder` class; [`ids`]: the ids of a call for NumPy, without a list;
//!   [`functions`]: `pretokenize`, `train_bpe`, `max_threads`.
//! - [`objects`] and [`strings`]: Python values to and from Rust, without aborting when memory runs out.
//!
//! The binding uses the engine through the crate's public API (`lib.rs`), plus two internals: the
//! fallible allocation helpers of `crate::error`, and `crate::huge_pages` for the lists of ids and the
//! UTF-8 copies of strings. `cargo test` builds the part of [`strings`] that does not call into Python
//! too (the module is compiled for tests without the feature), so that its tests run without linking a
//! Python library.

#[cfg(feature = "python")]
mod counts;
#[cfg(feature = "python")]
mod dataset;
#[cfg(feature = "python")]
mod encoder;
#[cfg(feature = "python")]
mod errors;
#[cfg(feature = "python")]
mod functions;
#[cfg(feature = "python")]
mod ids;
#[cfg(feature = "python")]
mod interrupt;
#[cfg(feature = "python")]
mod objects;
mod strings;

/// The extension module: the `Encoder` class, the functions, and `UNICODE_VERSION`.
#[cfg(feature = "python")]
#[pyo3::pymodule]
fn _core(m: &pyo3::Bound<'_, pyo3::types::PyModule>) -> pyo3::PyResult<()> {
    use pyo3::prelude::*;
    m.add_function(wrap_pyfunction!(functions::py_max_threads, m)?)?;
    m.add_class::<encoder::PyEncoder>()?;
    m.add_class::<encoder::PyStream>()?;
    m.add_class::<ids::Ids>()?;
    m.add_class::<counts::PyPreTokenCounts>()?;
    m.add_function(wrap_pyfunction!(counts::source_kind, m)?)?;
    m.add_function(wrap_pyfunction!(counts::parquet_row_groups, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::encode_dataset_py, m)?)?;
    m.add_function(wrap_pyfunction!(functions::pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(functions::train_bpe, m)?)?;
    m.add("UNICODE_VERSION", crate::UNICODE_VERSION)?;
    Ok(())
}
