//! `bytepair._core.Encoder`: the engine's [`Encoder`] for Python, and the fast conversion of its ids to
//! a Python list ([`PyEncoder::to_list`]).
//!
//! Long calls (at least [`INTERRUPTIBLE_FROM`] bytes of text, and every `encode_file`) run with the GIL
//! released and stop on Ctrl-C; the ids of a failed call are freed before its exception is made.

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::errors::{alloc_err, run_detached, to_py_err};
use super::interrupt::{run_interruptible, PyProgress, INTERRUPTIBLE_FROM};
use super::objects::{bytes, collect, int, list, string, tuple};
use super::strings::utf8;
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
        let ids = if text.len() < INTERRUPTIBLE_FROM {
            run_detached(py, || {
                self.inner.encode_to_vec(&text, None).map_err(to_py_err)
            })?
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

    /// Encodes the longest safely cut prefix of `text` (all of it when `last`); returns the ids and
    /// the rest of the text.
    fn encode_prefix<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        last: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let text = utf8(text)?;
        let text: &str = &text;
        let (ids, used) = run_detached(py, || {
            // The ids are freed on an error before it becomes an exception (which allocates).
            let encode = || {
                let mut ids = Vec::new();
                let used = self.inner.encode_prefix(text, last, &mut ids)?;
                Ok((ids, used))
            };
            encode().map_err(to_py_err)
        })?;
        let ids = self.to_list(py, &ids)?;
        let rest = string(py, &text[used..])?;
        tuple(py, [ids.into_any(), rest])
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
