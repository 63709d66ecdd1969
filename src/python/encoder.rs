//! `bytepair._core.Encoder`: the engine's [`Encoder`] for Python, and the fast conversion of its ids to
//! a Python list: a text of 4,096 characters or more is converted, encoded and stored in the list a
//! block at a time ([`PyEncoder::encode_into_list`]); shorter ones, and vocabularies with ids past the
//! cached ints, go through a vector of ids ([`PyEncoder::to_list`]). `encode_to_numpy` makes no list:
//! the same blocks fill a vector that NumPy reads in place ([`Ids`]).
//!
//! Long calls (at least [`INTERRUPTIBLE_FROM`] bytes of text, and every `encode_file`) run with the GIL
//! released and stop on Ctrl-C; the ids of a failed call are freed before its exception is made.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyIterator, PyList, PyString};

use super::errors::{alloc_err, run_attached, run_detached, to_py_err};
use super::ids::Ids;
use super::interrupt::{run_interruptible, PyProgress, INTERRUPTIBLE_FROM};
use super::objects::{bytes, collect, int, list};
use super::strings::{push_utf8, utf8, utf8_blocks, BlockError, Utf8Blocks};
use crate::error::{try_copy, try_reserve, try_vec, AllocError};
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

/// `encode` converts and encodes a `str` this many characters at a time (see
/// [`PyEncoder::encode_into_list`]): a block, its UTF-8 and its ids stay in the CPU's cache.
const BLOCK_CHARS: usize = 1 << 18;

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
            // Written once, in order: its pages mapped at once (see `huge_pages`).
            if size_of_val(items) >= huge_pages::HUGE_BUFFER {
                huge_pages::populate(items.as_ptr().cast(), size_of_val(items));
            }
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
            add_counted_references(ints, &counts);
            match failed {
                Some(e) => Err(e),
                None => Ok(list.cast_into_unchecked()),
            }
        }
    }
}

impl PyEncoder {
    /// The list of the ids of `text` (`blocks`), made without a vector of its ids or a UTF-8 copy of
    /// its text: with the GIL released, a block of [`BLOCK_CHARS`] characters is converted, encoded
    /// ([`Encoder::encode_blocks`]) and its ids stored in the list's array while all three are still
    /// in the CPU's cache, so that the array is the only memory the call writes that was never touched
    /// before. Every id must have a cached int, and the text at most `u32::MAX` bytes of UTF-8 (the
    /// counts of [`ListItems`]).
    fn encode_into_list<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        blocks: Utf8Blocks<'_>,
    ) -> PyResult<Bound<'py, PyList>> {
        let chars = blocks.len();
        // References are counted per int only for lists likely as long as the ints are many: the counts
        // are zeroed and read back whole, a fixed cost that a short list's own items do not repay.
        let counted = chars / 4 >= self.ints.len();
        // Room for an id per character, more than nearly any text needs, so that the array is not
        // reallocated on the way (pages never written cost no memory). It stays on 4 KB pages: on 2 MB
        // pages, encoding 200 MB of C into a list took twice as long in some processes, the kernel
        // zeroing each huge page at a small fraction of its usual speed.
        let mut items = ListItems::new(chars + 16, counted.then_some(self.ints.len()), chars)?;
        let ints = &self.ints[..];
        self.encode_in_blocks(py, text, blocks, &mut Vec::new(), |ids| {
            items.push(ids, ints)?;
            ids.clear();
            Ok(())
        })?;
        items.into_list(py, ints)
    }

    /// Encodes `text` (`blocks`) a block of [`BLOCK_CHARS`] characters at a time with the GIL
    /// released ([`Encoder::encode_blocks`]), appending the ids of each stretch to `out` and then
    /// handing `out` to `sink`; from
    /// [`INTERRUPTIBLE_FROM`] bytes on, Ctrl-C stops it. A character UTF-8 cannot hold raises the
    /// `UnicodeEncodeError` Python's own conversion would.
    fn encode_in_blocks(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyString>,
        mut blocks: Utf8Blocks<'_>,
        out: &mut Vec<u32>,
        mut sink: impl FnMut(&mut Vec<u32>) -> Result<(), Stop> + Send,
    ) -> PyResult<()> {
        let text_len = blocks.max_utf8_len();
        let mut encode = |cancel: Option<&Arc<AtomicBool>>| {
            self.inner.encode_blocks(
                text_len,
                cancel,
                |buf| Ok(blocks.next(BLOCK_CHARS, buf)?),
                &mut *out,
                &mut sink,
            )
        };
        if text_len < INTERRUPTIBLE_FROM {
            run_detached(py, || Ok(encode(None)))?.map_err(|stop| stop.into_py_err(text, to_py_err))
        } else {
            let progress = PyProgress::new(None);
            run_interruptible(py, &progress, || Ok(encode(Some(&progress.cancelled))))?
                .map_err(|stop| stop.into_py_err(text, |e| progress.error(e)))
        }
    }

    /// The ids of `text`, of [`KEEP_GIL_BELOW`] bytes or more, in a vector
    /// ([`Encoder::encode_to_vec`]), with the GIL released, and stopped by Ctrl-C from
    /// [`INTERRUPTIBLE_FROM`] bytes on. Shorter texts take [`Encoder::encode_then`] instead.
    fn encode_utf8(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        if text.len() < INTERRUPTIBLE_FROM {
            run_detached(py, || {
                self.inner.encode_to_vec(text, None).map_err(to_py_err)
            })
        } else {
            let progress = PyProgress::new(None);
            run_interruptible(py, &progress, || {
                self.inner
                    .encode_to_vec(text, Some(&progress.cancelled))
                    .map_err(|e| progress.error(e))
            })
        }
    }

    /// The ids of `text` in an [`Ids`] buffer, for `numpy.frombuffer`: no Python int and no list, so
    /// that a caller who wants an array pays only for encoding. A text of [`KEEP_GIL_BELOW`] characters
    /// or more is converted and encoded a block at a time, as [`Self::encode`] does.
    fn encode_ids(&self, py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Ids> {
        if let Some(blocks) = utf8_blocks(text)? {
            let chars = blocks.len();
            if chars >= KEEP_GIL_BELOW {
                // Room for the most ids the text can have (one per byte of UTF-8), reserved at once:
                // pages never written cost no memory, and a vector grown as ids come was copied
                // whenever malloc had served it from its heap rather than from a mapping of its own.
                let mut ids: Vec<u32> = Vec::new();
                try_reserve(&mut ids, blocks.max_utf8_len())
                    .map_err(|e| to_py_err(e.of_text(IDS, chars)))?;
                // Encoded in place: the ids are written once, into the array NumPy will read, its
                // pages mapped a block ahead on 4 KB pages (`Encoder::encode_blocks`).
                self.encode_in_blocks(py, text, blocks, &mut ids, |_| Ok(()))?;
                return Ok(Ids::new(ids));
            }
        }
        let text = utf8(text)?;
        if text.len() < KEEP_GIL_BELOW {
            // Copied out of the scratch's buffer at their exact size: no vector reserved for one id
            // per byte and then shrunk.
            let ids = run_attached(|| {
                let ids = self.inner.encode_then(&text, try_copy).map_err(to_py_err)?;
                ids.map_err(|e| to_py_err(e.of_text(IDS, text.len())))
            })?;
            return Ok(Ids::new(ids));
        }
        Ok(Ids::new(self.encode_utf8(py, &text)?))
    }
}

/// Why [`PyEncoder::encode_into_list`] stopped.
enum Stop {
    Engine(Error),
    /// The text holds a character UTF-8 cannot hold.
    NotUtf8,
}

impl From<Error> for Stop {
    fn from(e: Error) -> Stop {
        Stop::Engine(e)
    }
}

impl From<BlockError> for Stop {
    fn from(e: BlockError) -> Stop {
        match e {
            BlockError::Alloc(e) => Stop::Engine(e.named("the UTF-8 of the text")),
            BlockError::NotUtf8 => Stop::NotUtf8,
        }
    }
}

impl Stop {
    /// The exception: the engine's error as `engine` makes it, or the `UnicodeEncodeError` that
    /// Python's own conversion of `text` raises.
    fn into_py_err(self, text: &Bound<'_, PyString>, engine: impl FnOnce(Error) -> PyErr) -> PyErr {
        match self {
            Stop::Engine(e) => engine(e),
            Stop::NotUtf8 => match text.to_str() {
                Err(e) => e,
                Ok(_) => PyValueError::new_err("the text changed while it was encoded"),
            },
        }
    }
}

/// What the ids of a call ([`ListItems`], or the vector of [`Ids`]) are called in out-of-memory errors.
const IDS: &str = "the ids";

/// The item array of a list being filled with the GIL released: borrowed pointers to the cached ints,
/// whose references are added when the list is made ([`Self::into_list`]), from counts per int for a
/// long list, else item by item. Dropped before that (an error), the array is freed and no reference
/// was taken.
struct ListItems {
    /// `cap` slots from `PyMem_Malloc`, the first `len` written; null only after `into_list`.
    ptr: *mut *mut ffi::PyObject,
    len: usize,
    cap: usize,
    /// The characters of the text, named in out-of-memory errors.
    text_len: usize,
    /// The references to add to each cached int (at most `u32::MAX` ids, one per byte of text), or
    /// empty when they are added item by item.
    counts: Vec<u32>,
}

// SAFETY: the array is only written by the thread that holds the `ListItems`, and allocated and freed
// with the GIL held (PyMem's allocator requires it, whichever thread takes it).
unsafe impl Send for ListItems {}

impl ListItems {
    /// Room for `cap` items, and counts for `counted` cached ints if given, for a text of `text_len`
    /// characters (named in the error). The GIL must be held.
    fn new(cap: usize, counted: Option<usize>, text_len: usize) -> PyResult<ListItems> {
        let named = |e: AllocError| to_py_err(e.of_text(IDS, text_len));
        let counts = try_vec(0u32, counted.unwrap_or(0)).map_err(named)?;
        let cap = cap.max(1);
        // SAFETY: called with the GIL held (PyMem_Malloc's requirement); the size is checked.
        let ptr = match cap.checked_mul(size_of::<*mut ffi::PyObject>()) {
            Some(bytes) => unsafe { ffi::PyMem_Malloc(bytes) },
            None => std::ptr::null_mut(),
        };
        if ptr.is_null() {
            return Err(named(AllocError::of::<*mut ffi::PyObject>(cap)));
        }
        let ptr = ptr.cast();
        Ok(ListItems {
            ptr,
            len: 0,
            cap,
            text_len,
            counts,
        })
    }

    /// Appends the ints of `ids`, growing the array (with the GIL taken for it) by half again.
    fn push(&mut self, ids: &[u32], ints: &[Py<PyAny>]) -> Result<(), Stop> {
        let len = self.len + ids.len();
        if len > self.cap {
            let cap = len.max(self.cap + self.cap / 2);
            let bytes = cap.checked_mul(size_of::<*mut ffi::PyObject>());
            // SAFETY: `ptr` came from PyMem_Malloc or PyMem_Realloc and is not freed; the GIL is held
            // for the call. On failure (null) the old array is left as it was.
            let grown = Python::attach(|_| unsafe {
                bytes.map_or(std::ptr::null_mut(), |bytes| {
                    ffi::PyMem_Realloc(self.ptr.cast(), bytes)
                })
            });
            if grown.is_null() {
                let e = AllocError::of::<*mut ffi::PyObject>(cap);
                return Err(Stop::Engine(e.of_text(IDS, self.text_len)));
            }
            (self.ptr, self.cap) = (grown.cast(), cap);
        }
        // SAFETY: slots `self.len..len` lie within the `cap` allocated ones.
        let slots = unsafe { std::slice::from_raw_parts_mut(self.ptr.add(self.len), ids.len()) };
        // The array is fresh memory on 4 KB pages (see `encode_into_list`): its pages mapped a block
        // at a time took `encode` on 20 MB of prose from 127 to 131 MB/s.
        if self.cap * size_of::<*mut ffi::PyObject>() >= huge_pages::HUGE_BUFFER {
            huge_pages::populate(slots.as_ptr().cast(), size_of_val(slots));
        }
        // Every id has a cached int (`encode_into_list`'s precondition).
        if self.counts.is_empty() {
            for (slot, &id) in slots.iter_mut().zip(ids) {
                *slot = ints[id as usize].as_ptr();
            }
        } else {
            for (slot, &id) in slots.iter_mut().zip(ids) {
                *slot = ints[id as usize].as_ptr();
                self.counts[id as usize] += 1;
            }
        }
        self.len = len;
        Ok(())
    }

    /// The list that owns the array: a reference to each item is added, and the array is shrunk
    /// to its items. The GIL must be held (we have `py`).
    fn into_list<'py>(
        mut self,
        py: Python<'py>,
        ints: &[Py<PyAny>],
    ) -> PyResult<Bound<'py, PyList>> {
        // SAFETY: PyList_New(0) returns a new reference (checked) to an empty list with no array,
        // which is given ours: `len` slots written with borrowed pointers to cached ints, a reference
        // to each of which is added here first (counted per int, or item by item), so that the list
        // owns every item. The array came from PyMem_Malloc/Realloc, as a list's array must
        // (list_dealloc frees it with PyMem_Free), and `ptr` is nulled so that `drop` leaves it to the
        // list.
        unsafe {
            let list = Bound::from_owned_ptr_or_err(py, ffi::PyList_New(0))?;
            if self.len == 0 {
                return Ok(list.cast_into_unchecked());
            }
            if self.cap > self.len {
                let shrunk =
                    ffi::PyMem_Realloc(self.ptr.cast(), self.len * size_of::<*mut ffi::PyObject>());
                if !shrunk.is_null() {
                    (self.ptr, self.cap) = (shrunk.cast(), self.len);
                }
            }
            add_counted_references(ints, &self.counts);
            if self.counts.is_empty() {
                for &item in std::slice::from_raw_parts(self.ptr, self.len) {
                    ffi::Py_INCREF(item);
                }
            }
            let raw = list.as_ptr().cast::<ffi::PyListObject>();
            (*raw).ob_item = self.ptr;
            (*raw).allocated = self.cap as isize;
            (*raw).ob_base.ob_size = self.len as isize;
            self.ptr = std::ptr::null_mut();
            Ok(list.cast_into_unchecked())
        }
    }
}

impl Drop for ListItems {
    fn drop(&mut self) {
        // SAFETY: the array came from PyMem_Malloc/Realloc and holds no references; the GIL is held
        // for PyMem_Free (taken if this thread does not hold it already).
        if !self.ptr.is_null() {
            let ptr = self.ptr.cast();
            Python::attach(|_| unsafe { ffi::PyMem_Free(ptr) });
        }
    }
}

/// Adds `counts[i]` references to the `i`-th of `ints`: the references a list's items, counted per
/// int, take (see [`PyEncoder::to_list`]). The GIL must be held.
fn add_counted_references(ints: &[Py<PyAny>], counts: &[u32]) {
    for (int, &n) in ints.iter().zip(counts) {
        for _ in 0..n {
            // SAFETY: each int is alive (the encoder holds it) and the GIL is held.
            unsafe { ffi::Py_INCREF(int.as_ptr()) };
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
        if self.ints.len() == self.inner.vocab_size() {
            if let Some(blocks) = utf8_blocks(text)? {
                if blocks.len() >= KEEP_GIL_BELOW && blocks.max_utf8_len() <= u32::MAX as usize {
                    return self.encode_into_list(py, text, blocks);
                }
            }
        }
        let text = utf8(text)?;
        if text.len() < KEEP_GIL_BELOW {
            return run_attached(|| {
                let list = self.inner.encode_then(&text, |ids| self.to_list(py, ids));
                list.map_err(to_py_err)?
            });
        }
        let ids = self.encode_utf8(py, &text)?;
        // `text` (a UTF-8 copy unless the str is ASCII) lives until the list is made: freed before, its
        // megabytes would go back to malloc, which would serve the list's array from them and zero
        // them by hand (PyList_New's calloc), where fresh pages come zeroed.
        let list = self.to_list(py, &ids);
        drop(text);
        list
    }

    /// The ids of `text` as a NumPy `uint32` array (`Tokenizer.encode_to_numpy`): `numpy.frombuffer`
    /// over an [`Ids`], without a copy; TypeError for anything but a str. `frombuffer` and the dtype
    /// are looked up once: a short text's call costs about what `encode`'s does.
    fn encode_to_numpy<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        static FROMBUFFER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        static UINT32: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let Ok(text) = text.cast::<PyString>() else {
            let kind = text.get_type().name()?;
            return Err(PyTypeError::new_err(format!(
                "encode_to_numpy takes a str, not {kind}"
            )));
        };
        let frombuffer = FROMBUFFER.import(py, "numpy", "frombuffer")?;
        let uint32 = UINT32.import(py, "numpy", "uint32")?;
        let ids = Bound::new(py, self.encode_ids(py, text)?)?;
        frombuffer.call1((ids, uint32))
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
