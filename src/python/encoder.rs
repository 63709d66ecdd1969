//! `bytepair._core.Encoder`: the engine's [`Encoder`] for Python, and the fast conversion of its ids to
//! a Python list ([`PyEncoder::to_list`]).
//!
//! Long calls (at least [`INTERRUPTIBLE_FROM`] bytes of text, and every `encode_file`) run with the GIL
//! released and stop on Ctrl-C; the ids of a failed call are freed before its exception is made.

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyIterator, PyList, PyString};

use super::errors::{alloc_err, run_attached, run_detached, to_py_err};
use super::interrupt::{run_interruptible, PyProgress, INTERRUPTIBLE_FROM};
use super::objects::{bytes, collect, int, list};
use super::strings::{push_utf8, utf8};
use crate::error::{try_reserve, try_vec};
use crate::huge_pages;
use crate::{encode_file, Dtype, EncodeFileOptions, Encoder, Error};

/// A vocabulary and merges ready to encode; immutable, so one instance serves many threads.
#[pyclass(frozen, name = "Encoder", module = "bytepair._core")]
pub(super) struct PyEncoder {
    pub(super) inner: Encoder,
    /// A Python int for each id below [`CACHED_INTS`], made once (see [`PyEncoder::to_list`]).
    ints: Vec<Py<PyAny>>,
}

/// `encode` keeps the GIL for texts shorter than this: they take microseconds, about what releasing
/// the GIL and taking it back costs (chat messages, one call each).
const KEEP_GIL_BELOW: usize = 4096;

/// Ids below this get a preallocated Python int: 2^17 covers the vocabularies people train (about
/// 4 MB of ints) without growing with an unusually large one.
const CACHED_INTS: u32 = 1 << 17;

impl PyEncoder {
    /// A Python list of `ids`. Python caches only the ints up to 256, so converting each id would
    /// allocate an int, and making the list would take longer than encoding the text. Filling a new
    /// list with new references to the preallocated ints, with the interpreter's inline reference
    /// counting, costs a few ns an id.
    fn to_list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let len = isize::try_from(ids.len())
            .map_err(|_| PyValueError::new_err("too many ids for a list"))?;
        let ints = &self.ints;
        // A long list adds references to the same few thousand ints over and over: count them in a
        // small array and add each int's count at the end, so that the loop writes to L2-sized counts
        // instead of to the ints themselves, scattered over megabytes. A u32 count cannot overflow in
        // a list of at most u32::MAX ids. Without room for the counts (out of memory), each reference
        // is added at once.
        let counted = ids.len() >= ints.len() && ids.len() <= u32::MAX as usize;
        let counts = match counted {
            true => try_vec(0u32, ints.len()).unwrap_or_default(),
            false => Vec::new(),
        };
        let mut counts = counts;
        // SAFETY: PyList_New returns a new reference (checked for NULL) to a list of `len` NULL slots,
        // `ob_item` pointing at them (non-NULL when `len` > 0). Each slot is written at most once, in
        // order, with a reference the list owns (as PyList_SET_ITEM would): a new int, or a cached int
        // whose reference count is raised by one for it, at once or, when counted, after the loop. If
        // an int cannot be made, the counted references are added before the list (with NULL in the
        // slots not reached) is dropped, so every reference it releases is one it owns. The GIL is
        // held throughout (we have `py`).
        unsafe {
            let list = Bound::from_owned_ptr_or_err(py, ffi::PyList_New(len))?;
            if ids.is_empty() {
                return Ok(list.cast_into_unchecked());
            }
            // The item array as a slice, so that its address is loaded once rather than per store.
            let items = std::slice::from_raw_parts_mut(
                (*list.as_ptr().cast::<ffi::PyListObject>()).ob_item,
                ids.len(),
            );
            huge_pages::advise(items.as_ptr().cast(), size_of_val(items));
            let mut failed = None;
            for (slot, &id) in items.iter_mut().zip(ids) {
                *slot = match ints.get(id as usize) {
                    Some(int) => {
                        match counts.get_mut(id as usize) {
                            Some(n) => *n += 1,
                            None => ffi::Py_INCREF(int.as_ptr()),
                        }
                        int.as_ptr()
                    }
                    None => match int(py, id as u64) {
                        Ok(int) => int.into_ptr(),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    },
                };
            }
            for (int, &n) in ints.iter().zip(&counts) {
                for _ in 0..n {
                    ffi::Py_INCREF(int.as_ptr());
                }
            }
            match failed {
                Some(e) => Err(e),
                None => Ok(list.cast_into_unchecked()),
            }
        }
    }
}

/// The element type of `bits` bits (16 or 32), or ValueError.
pub(super) fn dtype_of(bits: u32) -> PyResult<Dtype> {
    match bits {
        16 => Ok(Dtype::U16),
        32 => Ok(Dtype::U32),
        other => Err(PyValueError::new_err(format!(
            "dtype must be uint16 or uint32, not {other} bits"
        ))),
    }
}

#[pymethods]
impl PyEncoder {
    /// `vocab`: a list of (id, bytes); `merges`: a list of (bytes, bytes).
    #[new]
    fn new(
        py: Python<'_>,
        vocab: &Bound<'_, PyAny>,
        merges: &Bound<'_, PyAny>,
        special_tokens: Vec<String>,
    ) -> PyResult<Self> {
        // The bytes objects stay referenced by these vectors while the encoder reads them.
        let vocab: Vec<(u32, Bound<'_, PyBytes>)> =
            collect(vocab, "the vocabulary", |x| x.extract())?;
        let merges: Vec<(Bound<'_, PyBytes>, Bound<'_, PyBytes>)> =
            collect(merges, "the merges", |x| x.extract())?;
        let mut vocab_bytes = Vec::new();
        try_reserve(&mut vocab_bytes, vocab.len()).map_err(alloc_err("the vocabulary"))?;
        vocab_bytes.extend(vocab.iter().map(|(id, b)| (*id, b.as_bytes())));
        let mut merge_bytes = Vec::new();
        try_reserve(&mut merge_bytes, merges.len()).map_err(alloc_err("the merges"))?;
        merge_bytes.extend(merges.iter().map(|(a, b)| (a.as_bytes(), b.as_bytes())));
        let inner = run_detached(py, || {
            Encoder::new(&vocab_bytes, &merge_bytes, &special_tokens).map_err(to_py_err)
        })?;
        let cached = (inner.vocab_size() as u32).min(CACHED_INTS);
        let mut ints = Vec::new();
        try_reserve(&mut ints, cached as usize).map_err(alloc_err("the ints of the ids"))?;
        for id in 0..cached {
            ints.push(int(py, id as u64)?.unbind());
        }
        Ok(PyEncoder { inner, ints })
    }

    #[getter]
    fn vocab_size<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        int(py, self.inner.vocab_size() as u64)
    }

    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyList>> {
        let text = utf8(text)?;
        let encode = || self.inner.encode_to_vec(&text, None).map_err(to_py_err);
        let ids = if text.len() < KEEP_GIL_BELOW {
            run_attached(encode)?
        } else if text.len() < INTERRUPTIBLE_FROM {
            run_detached(py, encode)?
        } else {
            let progress = PyProgress::new(None);
            run_interruptible(py, &progress, || {
                self.inner
                    .encode_to_vec(&text, Some(&progress.cancelled))
                    .map_err(|e| progress.error(e))
            })?
        };
        // `text` (a UTF-8 copy unless the str is ASCII) lives until the list is made: freed before, its
        // megabytes would go back to malloc, which would serve the list's array from them and zero
        // them by hand (PyList_New's calloc), where fresh pages come zeroed.
        let list = self.to_list(py, &ids);
        drop(text);
        list
    }

    /// The batches of ids of the text of the str items of `items` (an iterable), concatenated: a
    /// [`PyStream`] that encodes about `batch` bytes of text at a time.
    fn stream(slf: Bound<'_, Self>, items: &Bound<'_, PyAny>, batch: usize) -> PyResult<PyStream> {
        Ok(PyStream {
            encoder: slf.unbind(),
            items: items.try_iter()?.unbind(),
            text: String::new(),
            batch: batch.max(1),
            next_try: batch.max(1),
            done: false,
        })
    }

    /// The ids of each str of the list `texts`, as a list of lists.
    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let strings: Vec<Bound<'py, PyString>> =
            collect(texts, "the texts", |t| Ok(t.cast_into()?))?;
        let texts = collect(texts, "the texts", |_| Ok(Cow::Borrowed("")))?;
        let mut texts = texts;
        for (slot, s) in texts.iter_mut().zip(&strings) {
            *slot = utf8(s)?;
        }
        let interruptible = texts.iter().map(|t| t.len()).sum::<usize>() >= INTERRUPTIBLE_FROM;
        let progress = PyProgress::new(None);
        let cancel = interruptible.then_some(&progress.cancelled);
        // On an error every text's ids are freed before the exception is made (it allocates).
        let encode_all = || {
            self.inner
                .encode_batch(&texts, num_threads, cancel)
                .map_err(|e| progress.error(e))
        };
        let batches = if interruptible {
            run_interruptible(py, &progress, encode_all)?
        } else {
            run_detached(py, encode_all)?
        };
        drop(texts);
        list(py, batches.len(), |i| {
            Ok(self.to_list(py, &batches[i])?.into_any())
        })
    }

    /// The bytes of the ids of the list `ids` concatenated; ValueError naming the first id with no
    /// token.
    fn decode_bytes<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let ids: Vec<i64> = collect(ids, "the ids", |x| x.extract())?;
        let decoded = run_detached(py, || {
            // The bytes are freed on an error before it becomes an exception, as in `encode`.
            let decode = || {
                let mut out = Vec::new();
                // At least a byte an id; more as needed.
                try_reserve(&mut out, ids.len()).map_err(|e| e.named("the decoded bytes"))?;
                let ids = ids
                    .iter()
                    .map(|&id| if id < 0 { u64::MAX } else { id as u64 });
                self.inner.decode(ids, &mut out).map(|()| out)
            };
            decode().map_err(|e| match e {
                Error::UnknownId(u64::MAX) => {
                    PyValueError::new_err("negative ids are not in the vocabulary")
                }
                e => to_py_err(e),
            })
        })?;
        drop(ids);
        bytes(py, &decoded)
    }

    #[pyo3(signature = (input_path, output_path, dtype_bits, num_threads=None, chunk_size=None, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn encode_file<'py>(
        &self,
        py: Python<'py>,
        input_path: PathBuf,
        output_path: PathBuf,
        dtype_bits: u32,
        num_threads: Option<usize>,
        chunk_size: Option<usize>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dtype = dtype_of(dtype_bits)?;
        let mut options = EncodeFileOptions::new(dtype);
        options.num_threads = num_threads;
        if let Some(size) = chunk_size {
            options.chunk_size = size;
        }
        let progress = PyProgress::new(progress);
        let tokens = run_interruptible(py, &progress, || {
            encode_file(&self.inner, &input_path, &output_path, &options, &progress)
                .map_err(|e| progress.error(e))
        })?;
        int(py, tokens)
    }
}

/// `encode_iterable`'s batches: an iterator of lists of ids, each the ids of the text gathered from the
/// items since the last batch, up to its last safe cut (all of it once the items run out). The text
/// after the cut is held back for the next batch, so the ids equal those of the whole text however the
/// items cut it ([`Encoder::encode_prefix`]).
///
/// The items are read and converted to UTF-8 here, into one buffer, rather than joined in Python: a
/// file gives a str per line, and a Python loop per line, a join per batch and a UTF-8 copy of the
/// joined text made streaming slower than encoding.
#[pyclass(name = "Stream", module = "bytepair._core")]
pub(super) struct PyStream {
    encoder: Py<PyEncoder>,
    items: Py<PyIterator>,
    /// Text gathered and not yet encoded: the held-back tail of the last batch, then what came since.
    text: String,
    /// Bytes of text a batch waits for.
    batch: usize,
    /// Encode once `text` holds this many bytes: `batch`, or twice what it held when the last batch
    /// could not cut it, so that a long text with no safe cut costs linear time, not quadratic.
    next_try: usize,
    /// The last batch was made.
    done: bool,
}

#[pymethods]
impl PyStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        if self.done {
            return Ok(None);
        }
        let mut items = self.items.bind(py).clone();
        let mut last = false;
        while self.text.len() < self.next_try {
            let Some(item) = items.next() else {
                last = true;
                break;
            };
            let item = item?;
            let Ok(item) = item.cast::<PyString>() else {
                let kind = item.get_type().name()?;
                return Err(PyTypeError::new_err(format!(
                    "encode_iterable needs str items, got {kind}"
                )));
            };
            push_utf8(item, &mut self.text)?;
        }
        let encoder = self.encoder.get();
        let text = self.text.as_str();
        let (ids, used) = run_detached(py, || {
            // The ids are freed on an error before it becomes an exception (which allocates).
            let encode = || {
                let mut ids = Vec::new();
                let used = encoder.inner.encode_prefix(text, last, &mut ids)?;
                Ok((ids, used))
            };
            encode().map_err(to_py_err)
        })?;
        let ids = encoder.to_list(py, &ids)?;
        self.next_try = match used {
            0 => self.text.len().saturating_mul(2),
            _ => self.batch,
        };
        self.text.drain(..used);
        // Memory a long text with no cut took is given back once it is encoded.
        if self.text.capacity() > 4 * self.batch.max(self.text.len()) {
            self.text.shrink_to(2 * self.batch.max(self.text.len()));
        }
        self.done = last;
        Ok(Some(ids))
    }
}
