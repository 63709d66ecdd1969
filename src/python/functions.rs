//! The module's functions: `pretokenize`, `train_bpe` and `max_threads`.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use super::errors::{alloc_err, run_detached};
use super::interrupt::{run_interruptible, PyProgress};
use super::objects::{bytes, int, list, str_list, tuple};
use super::strings::utf8;
use crate::error::try_push;
use crate::{max_threads, train_files, TrainOptions, Trained};

/// The GPT-2 pre-tokens of `text`, as a list of str.
#[pyfunction]
pub(super) fn pretokenize<'py>(
    py: Python<'py>,
    text: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyList>> {
    let text = utf8(text)?;
    let text: &str = &text;
    let pieces = run_detached(py, || {
        let mut pieces = Vec::new();
        for piece in crate::pretokenize(text) {
            try_push(&mut pieces, piece).map_err(alloc_err("the pre-tokens"))?;
        }
        Ok(pieces)
    })?;
    str_list(py, &pieces)
}

/// Trains on files, each its own document; returns (vocab as a list of bytes indexed by id, merges as a
/// list of pairs, (distinct pre-tokens, bytes, tokens it encodes to: None unless `count_tokens`)).
#[pyfunction]
#[pyo3(signature = (input_paths, vocab_size, special_tokens, num_threads=None, chunk_size=None, progress=None, count_tokens=false))]
#[allow(clippy::too_many_arguments)]
pub(super) fn train_bpe<'py>(
    py: Python<'py>,
    input_paths: Vec<PathBuf>,
    vocab_size: usize,
    special_tokens: Vec<String>,
    num_threads: Option<usize>,
    chunk_size: Option<usize>,
    progress: Option<Py<PyAny>>,
    count_tokens: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let mut options = TrainOptions::new(vocab_size);
    options.special_tokens = special_tokens;
    options.count_tokens = count_tokens;
    options.num_threads = num_threads;
    if let Some(size) = chunk_size {
        options.chunk_size = size;
    }
    let progress = PyProgress::new(progress);
    let trained = run_interruptible(py, &progress, || {
        train_files(&input_paths, &options, &progress).map_err(|e| progress.error(e))
    })?;
    trained_to_py(py, &trained)
}

/// What training returns to Python: (vocab as a list of bytes indexed by id, merges as a list of pairs
/// of bytes, (distinct pre-tokens, bytes, tokens the text encodes to or None)).
pub(super) fn trained_to_py<'py>(
    py: Python<'py>,
    trained: &Trained,
) -> PyResult<Bound<'py, PyTuple>> {
    let vocab = list(py, trained.vocab.len(), |i| {
        Ok(bytes(py, &trained.vocab[i])?.into_any())
    })?;
    let merges = list(py, trained.merges.len(), |i| {
        let (a, b) = trained.merges[i];
        let token = |id: u32| vocab.get_item(id as usize);
        Ok(tuple(py, [token(a)?, token(b)?])?.into_any())
    })?;
    let tokens = match trained.tokens {
        Some(tokens) => int(py, tokens)?,
        None => py.None().into_bound(py),
    };
    let stats = [
        int(py, trained.pretokens as u64)?,
        int(py, trained.bytes)?,
        tokens,
    ];
    let stats = tuple(py, stats)?.into_any();
    tuple(py, [vocab.into_any(), merges.into_any(), stats])
}

/// The most threads a call starts; more asked for are capped to this (see [`max_threads`]).
#[pyfunction(name = "max_threads")]
pub(super) fn py_max_threads() -> usize {
    max_threads()
}
