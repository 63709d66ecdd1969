//! `bytepair._core.PreTokenCounts`: the engine's [`CorpusCounts`] for Python, with the entry points
//! that count into it (files, row groups of Parquet files, batches of `str`) and the one that trains on
//! it.
//! `bytepair.PreTokenCounts` subclasses it with the documented API (`python/bytepair/counting.py`).
//!
//! Counting releases the GIL. A counts object is borrowed for the whole call, so another thread using
//! the same object meanwhile gets a `RuntimeError` from PyO3 rather than a race; the Python layer gives
//! each of its threads counts of their own and merges them.

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::errors::{run_detached, to_py_err};
use super::functions::trained_to_py;
use super::interrupt::{run_interruptible, PyProgress};
use super::objects::{bytes, int, list, str_list, string, tuple};
use super::strings::utf8;
use crate::error::try_reserve;
use crate::{
    count_parquet_row_groups, count_sources, count_text_range, count_texts, encoded_length,
    thread_count, train_counts, train_counts_owned, Compression, CorpusCounts, Error, Errors,
    Format, PreTokenCounts, RecordAt, SourceKind, SourceOptions, SpecialTokens, DEFAULT_CHUNK_SIZE,
};

/// Pre-token counts with their totals, mergeable and saved compactly.
#[pyclass(name = "PreTokenCounts", module = "bytepair._core", subclass)]
pub(super) struct PyPreTokenCounts {
    inner: CorpusCounts,
    /// The special tokens last counted with, as given, and their matcher, kept for the next batch.
    specials: Option<(Vec<String>, SpecialTokens)>,
    /// The pre-tokens `_count_texts` counted, a set a thread, not yet added (`_add_kept`).
    kept: Vec<PreTokenCounts>,
}

impl PyPreTokenCounts {
    /// The matcher of `tokens`, built once for a run of batches with the same tokens.
    fn specials(&mut self, tokens: Vec<String>) -> PyResult<SpecialTokens> {
        match &self.specials {
            Some((given, specials)) if *given == tokens => Ok(specials.clone()),
            _ => {
                let specials = SpecialTokens::new(&tokens).map_err(to_py_err)?;
                self.specials = Some((tokens, specials.clone()));
                Ok(specials)
            }
        }
    }

    /// Adds `counted` (made with `self.specials`) to these counts.
    fn absorb(&mut self, counted: crate::Result<CorpusCounts>) -> PyResult<()> {
        let counted = counted.map_err(to_py_err)?;
        self.inner.update_owned(counted).map_err(to_py_err)
    }
}

/// The kind of a source file from its (format, compression), as `source_kind` gives them.
pub(super) fn kind_of(format: &str, compression: Option<&str>) -> PyResult<SourceKind> {
    let format = match format {
        "txt" => Format::Txt,
        "jsonl" => Format::JsonLines,
        "parquet" => Format::Parquet,
        other => return Err(PyValueError::new_err(format!("no format {other:?}"))),
    };
    let compression = match compression {
        None => Compression::None,
        Some("gzip") => Compression::Gzip,
        Some("zstd") => Compression::Zstd,
        Some("xz") => Compression::Xz,
        Some(other) => return Err(PyValueError::new_err(format!("no compression {other:?}"))),
    };
    Ok(SourceKind {
        format,
        compression,
    })
}

/// "strict" or "skip", as the engine takes it.
pub(super) fn errors_mode(skip: bool) -> Errors {
    if skip {
        Errors::Skip
    } else {
        Errors::Strict
    }
}

#[pymethods]
impl PyPreTokenCounts {
    #[new]
    fn new() -> PyResult<Self> {
        Ok(PyPreTokenCounts {
            inner: CorpusCounts::new().map_err(to_py_err)?,
            specials: None,
            kept: Vec::new(),
        })
    }

    /// Adds the counts of `other` (which may be these counts themselves).
    fn update(slf: &Bound<'_, Self>, other: &Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let copy = match slf.is(other) {
            true => Some(slf.borrow().inner.clone()),
            false => None,
        };
        let other = match copy {
            Some(_) => None,
            None => Some(other.borrow()),
        };
        let theirs = copy.as_ref().or(other.as_ref().map(|o| &o.inner));
        let theirs = theirs.expect("one of the two is set");
        let mut this = slf.borrow_mut();
        let mine = &mut this.inner;
        run_detached(py, || mine.update(theirs).map_err(to_py_err))
    }

    fn __len__(&self) -> usize {
        self.inner.pretokens().len()
    }

    /// The count of the pre-token `piece` (0 when it never occurred).
    fn __getitem__(&self, piece: &[u8]) -> u64 {
        self.inner.pretokens().get(piece)
    }

    /// Same pre-tokens and counts, totals and special tokens (in any order).
    fn __eq__(&self, other: PyRef<'_, Self>) -> bool {
        self.inner == other.inner
    }

    fn total(&self) -> u64 {
        self.inner.total()
    }

    #[getter]
    fn bytes(&self) -> u64 {
        self.inner.pretokens().bytes()
    }

    #[getter]
    fn documents(&self) -> u64 {
        self.inner.documents()
    }

    #[getter]
    fn skipped(&self) -> u64 {
        self.inner.skipped()
    }

    #[getter]
    fn special_occurrences(&self) -> u64 {
        self.inner.pretokens().special_occurrences()
    }

    /// The special tokens the text was split at, or None before anything was counted.
    #[getter]
    fn special_tokens<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.inner.special_tokens() {
            Some(tokens) => Ok(str_list(py, tokens)?.into_any()),
            None => Ok(py.None().into_bound(py)),
        }
    }

    #[getter]
    fn skipped_errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        str_list(py, self.inner.skipped_errors())
    }

    /// The `n` most common pre-tokens (all when None) as (bytes, count), most common first, ties in
    /// byte order.
    #[pyo3(signature = (n=None))]
    fn most_common<'py>(&self, py: Python<'py>, n: Option<usize>) -> PyResult<Bound<'py, PyList>> {
        let n = n.unwrap_or(usize::MAX);
        let common = run_detached(py, || self.inner.most_common(n).map_err(to_py_err))?;
        list(py, common.len(), |i| {
            let (piece, count) = &common[i];
            Ok(tuple(py, [bytes(py, piece)?.into_any(), int(py, *count)?])?.into_any())
        })
    }

    /// Drops the pre-tokens counted fewer than `min_count` times.
    fn _retain_at_least(&mut self, py: Python<'_>, min_count: u64) -> PyResult<()> {
        let inner = &mut self.inner;
        run_detached(py, || inner.retain_at_least(min_count).map_err(to_py_err))
    }

    /// The counts file of these counts.
    fn _to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let data = run_detached(py, || self.inner.to_bytes().map_err(to_py_err))?;
        bytes(py, &data)
    }

    /// Replaces these counts with those of the counts file `data`, whose errors start with `name`.
    fn _load_bytes(&mut self, py: Python<'_>, data: &[u8], name: &str) -> PyResult<()> {
        self.inner = run_detached(py, || {
            CorpusCounts::from_bytes(data, name).map_err(to_py_err)
        })?;
        Ok(())
    }

    /// The transfer form of these counts: what pickling moves between processes.
    fn _to_transfer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let data = run_detached(py, || self.inner.to_transfer().map_err(to_py_err))?;
        bytes(py, &data)
    }

    /// Adds the counts of the transfer form `data`, whose errors start with `name`, to these counts.
    fn _add_transfer(&mut self, py: Python<'_>, data: &[u8], name: &str) -> PyResult<()> {
        let inner = &mut self.inner;
        run_detached(py, || {
            inner.update_from_transfer(data, name).map_err(to_py_err)
        })
    }

    /// Counts `files`, each (path, format, compression) as `source_kind` gives them, into these counts.
    #[pyo3(signature = (files, special_tokens, text_field, skip, num_threads=None, chunk_size=None, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn _count_files(
        &mut self,
        py: Python<'_>,
        files: Vec<(PathBuf, String, Option<String>)>,
        special_tokens: Vec<String>,
        text_field: &str,
        skip: bool,
        num_threads: Option<usize>,
        chunk_size: Option<usize>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let mut kinds = Vec::new();
        try_reserve(&mut kinds, files.len()).map_err(super::errors::alloc_err("the files"))?;
        for (path, format, compression) in files {
            kinds.push((path, kind_of(&format, compression.as_deref())?));
        }
        let files = kinds;
        let specials = self.specials(special_tokens)?;
        let progress = PyProgress::new(progress);
        let options = SourceOptions {
            specials: &specials,
            text_field,
            errors: errors_mode(skip),
            chunk_size: chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE),
            threads: thread_count(num_threads),
        };
        let counted = run_interruptible(py, &progress, || {
            count_sources(&files, &options, &progress).map_err(|e| progress.error(e))
        })?;
        self.absorb(Ok(counted))
    }

    /// Counts the row groups `start..end` of the Parquet file `path` (`count_parquet_row_groups`) into
    /// these counts.
    #[pyo3(signature = (path, start, end, special_tokens, text_field, skip, num_threads=None))]
    #[allow(clippy::too_many_arguments)]
    fn _count_row_groups(
        &mut self,
        py: Python<'_>,
        path: PathBuf,
        start: usize,
        end: usize,
        special_tokens: Vec<String>,
        text_field: &str,
        skip: bool,
        num_threads: Option<usize>,
    ) -> PyResult<()> {
        let specials = self.specials(special_tokens)?;
        let progress = PyProgress::new(None);
        let options = SourceOptions {
            specials: &specials,
            text_field,
            errors: errors_mode(skip),
            chunk_size: DEFAULT_CHUNK_SIZE,
            threads: thread_count(num_threads),
        };
        let counted = run_interruptible(py, &progress, || {
            count_parquet_row_groups(&path, start..end, &options, &progress)
                .map_err(|e| progress.error(e))
        })?;
        self.absorb(Ok(counted))
    }

    /// Counts the part of the uncompressed text file `path` between the first safe cuts at or after
    /// the byte offsets `start` and `end` (`count_text_range`) into these counts.
    #[pyo3(signature = (path, start, end, special_tokens, progress=None))]
    fn _count_range(
        &mut self,
        py: Python<'_>,
        path: PathBuf,
        start: u64,
        end: u64,
        special_tokens: Vec<String>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let specials = self.specials(special_tokens)?;
        let progress = PyProgress::new(progress);
        let counted = run_interruptible(py, &progress, || {
            count_text_range(&path, start, end, &specials, DEFAULT_CHUNK_SIZE, &progress)
                .map_err(|e| progress.error(e))
        })?;
        self.absorb(Ok(counted))
    }

    /// Counts the list `texts` of str, each a document: the documents and skipped items into these
    /// counts, the pre-tokens into counts kept for the next batch, added to these by `_add_kept`
    /// (`count_texts`); `first` is the index of the first in the caller's sequence, for messages.
    #[pyo3(signature = (texts, first, special_tokens, skip, num_threads=None))]
    fn _count_texts(
        &mut self,
        py: Python<'_>,
        texts: &Bound<'_, PyList>,
        first: u64,
        special_tokens: Vec<String>,
        skip: bool,
        num_threads: Option<usize>,
    ) -> PyResult<()> {
        // The str objects stay referenced by the list while their UTF-8 is read.
        let mut items: Vec<Bound<'_, PyAny>> = Vec::new();
        try_reserve(&mut items, texts.len()).map_err(super::errors::alloc_err("the texts"))?;
        items.extend(texts.iter());
        let mut utf8s: Vec<std::result::Result<Cow<'_, str>, String>> = Vec::new();
        try_reserve(&mut utf8s, items.len()).map_err(super::errors::alloc_err("the texts"))?;
        for (i, item) in items.iter().enumerate() {
            let Ok(text) = item.cast::<PyString>() else {
                let kind = item.get_type().name()?;
                return Err(PyTypeError::new_err(format!(
                    "item {} is {kind}, not str: an iterable of documents must give str",
                    first + i as u64
                )));
            };
            utf8s.push(utf8(text).map_err(|e| e.value(py).to_string()));
        }
        let specials = self.specials(special_tokens)?;
        let options = SourceOptions {
            specials: &specials,
            text_field: "",
            errors: errors_mode(skip),
            chunk_size: DEFAULT_CHUNK_SIZE,
            threads: thread_count(num_threads),
        };
        let kept = &mut self.kept;
        let counted = run_detached(py, || {
            let text = |i: usize| match &utf8s[i] {
                Ok(text) => Ok(&**text),
                Err(why) => Err(Error::BadRecord {
                    at: RecordAt::Item(first + i as u64),
                    why: why.clone(),
                }),
            };
            Ok(count_texts(utf8s.len(), text, &options, kept))
        })?;
        self.absorb(counted)
    }

    /// Adds the pre-tokens `_count_texts` counted to these counts.
    fn _add_kept(&mut self, py: Python<'_>) -> PyResult<()> {
        let kept = std::mem::take(&mut self.kept);
        let counts = &mut self.inner;
        run_detached(py, || counts.add_kept(kept).map_err(to_py_err))
    }

    /// Trains a vocabulary of `vocab_size` on these counts, split at `special_tokens` (which must be
    /// those counted with); returns what `train_bpe` returns. With `consume`, the counts are taken
    /// (this object is left empty) and freed as training makes its words: `train_bpe`'s own counts.
    #[pyo3(signature = (vocab_size, special_tokens, progress=None, count_tokens=false, consume=false))]
    fn _train<'py>(
        &mut self,
        py: Python<'py>,
        vocab_size: usize,
        special_tokens: Vec<String>,
        progress: Option<Py<PyAny>>,
        count_tokens: bool,
        consume: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let specials = SpecialTokens::new(&special_tokens).map_err(to_py_err)?;
        self.inner
            .check_training_tokens(&specials)
            .map_err(to_py_err)?;
        let progress = PyProgress::new(progress);
        let taken = match consume {
            true => {
                let empty = CorpusCounts::new().map_err(to_py_err)?;
                Some(std::mem::replace(&mut self.inner, empty).into_pretokens())
            }
            false => None,
        };
        let counts = &self.inner;
        let trained = run_interruptible(py, &progress, || {
            let trained = match taken {
                Some(taken) => {
                    train_counts_owned(taken, vocab_size, &specials, count_tokens, &progress)
                }
                None => train_counts(counts.pretokens(), vocab_size, &specials, &progress)
                    .and_then(|mut trained| {
                        if count_tokens {
                            trained.tokens =
                                encoded_length(counts.pretokens(), &trained, &specials)?;
                        }
                        Ok(trained)
                    }),
            };
            trained.map_err(|e| progress.error(e))
        })?;
        trained_to_py(py, &trained)
    }
}

/// The kind of the source file `path` from its name: (format, compression or None), or ValueError.
#[pyfunction]
pub(super) fn source_kind<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyTuple>> {
    let kind = SourceKind::of(&path).map_err(to_py_err)?;
    let format = match kind.format {
        Format::Txt => "txt",
        Format::JsonLines => "jsonl",
        Format::Parquet => "parquet",
    };
    let compression = match kind.compression.name() {
        Some(name) => string(py, name)?,
        None => py.None().into_bound(py),
    };
    tuple(py, [string(py, format)?, compression])
}

/// The rows of each row group of the Parquet file `path` (`parquet_row_groups`).
#[pyfunction]
pub(super) fn parquet_row_groups(py: Python<'_>, path: PathBuf) -> PyResult<Vec<u64>> {
    run_detached(py, || crate::parquet_row_groups(&path).map_err(to_py_err))
}
