//! The Python binding, `bytepair._core`. The public API and its documentation are in
//! `python/bytepair/`; this module only converts types, releases the GIL around long work, turns
//! [`Error`] into Python exceptions, and keeps Rust panics from crossing into Python.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use std::borrow::Cow;

use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::encode::file::{encode_file, Dtype};
use crate::encode::Encoder;
use crate::error::{try_reserve, AllocError, Error};
use crate::progress::{Phase, Progress};
use crate::threads::{max_threads, run_on_threads, thread_count};
use crate::train::{train_files, TrainOptions};

/// Converts an engine error into the Python exception a user expects.
fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::Io { path, source } => match source.raw_os_error() {
            // OSError(errno, strerror, filename) makes Python pick the subclass (FileNotFoundError,
            // IsADirectoryError, PermissionError, ...) and format "[Errno 2] ...: 'path'".
            Some(errno) => {
                let text = source.to_string();
                let strerror = text.split(" (os error").next().unwrap_or(&text).to_string();
                PyOSError::new_err((errno, strerror, path.display().to_string()))
            }
            None => PyOSError::new_err(format!("{}: {source}", path.display())),
        },
        Error::Interrupted => PyKeyboardInterrupt::new_err("interrupted"),
        e @ Error::OutOfMemory { .. } => PyMemoryError::new_err(e.to_string()),
        other => PyValueError::new_err(other.to_string()),
    }
}

// Python objects are made here with the C API and checked, never with PyO3's `new` and conversions of
// return values, which panic when the interpreter cannot allocate (PyO3 prints the panic on stderr and
// raises PanicException): out of memory must be a MemoryError. Lists and tuples are filled in place,
// and one dropped before it is full frees the items it has (its empty slots are NULL).

/// A Python int.
fn int(py: Python<'_>, value: u64) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: a new reference or NULL with an exception set, which `from_owned_ptr_or_err` takes.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromUnsignedLongLong(value)) }
}

/// A Python str of `text`.
fn string<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: as in `int`; the pointer and length describe `text`, valid UTF-8.
    unsafe {
        let (ptr, len) = (text.as_ptr().cast(), text.len() as ffi::Py_ssize_t);
        Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_FromStringAndSize(ptr, len))
    }
}

/// A Python bytes of `bytes`.
fn bytes<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, bytes.len(), |buf| {
        buf.copy_from_slice(bytes);
        Ok(())
    })
}

/// A Python list of `len` items from `item(i)`, or the first error it gives.
fn list<'py>(
    py: Python<'py>,
    len: usize,
    mut item: impl FnMut(usize) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let size =
        ffi::Py_ssize_t::try_from(len).map_err(|_| PyMemoryError::new_err("list too long"))?;
    // SAFETY: PyList_New gives a new reference to a list of `len` NULL slots (checked for NULL).
    // PyList_SET_ITEM stores into slot i < len the reference `into_ptr` hands over. A list dropped with
    // slots still NULL is freed correctly (list_dealloc skips NULL items).
    unsafe {
        let list = Bound::from_owned_ptr_or_err(py, ffi::PyList_New(size))?;
        for i in 0..len {
            ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, item(i)?.into_ptr());
        }
        Ok(list.cast_into_unchecked())
    }
}

/// A Python tuple of `items`.
fn tuple<'py, const N: usize>(
    py: Python<'py>,
    items: [Bound<'py, PyAny>; N],
) -> PyResult<Bound<'py, PyTuple>> {
    // SAFETY: as in `list`, for a tuple of N slots, each set once.
    unsafe {
        let tuple = Bound::from_owned_ptr_or_err(py, ffi::PyTuple_New(N as ffi::Py_ssize_t))?;
        for (i, item) in items.into_iter().enumerate() {
            ffi::PyTuple_SET_ITEM(tuple.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr());
        }
        Ok(tuple.cast_into_unchecked())
    }
}

/// A MemoryError for an allocation the binding makes, naming `what`.
fn alloc_err(what: &'static str) -> impl Fn(AllocError) -> PyErr {
    move |e| to_py_err(e.named(what))
}

/// Runs `f` with the GIL released, turning a panic into a RuntimeError instead of an abort or a
/// `PanicException` (which derives from BaseException and escapes `except Exception`).
fn run_detached<T: Send>(py: Python<'_>, f: impl FnOnce() -> PyResult<T> + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)))
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(PyRuntimeError::new_err(format!(
                "bytepair internal error (please report it): {what}"
            )))
        })
}

/// How often the calling thread looks for a pending Ctrl-C while the engine works.
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Runs `f` (long work that reports to `progress`) on a helper thread while the calling thread, with
/// the GIL released, checks for pending signals every [`SIGNAL_POLL`] and cancels `progress` when one
/// raises. Python runs signal handlers only on the main thread, and the engine reports from worker
/// threads, so the engine cannot check for Ctrl-C itself: before this, `encode_file` ran to the end of
/// the file after Ctrl-C. The work then stops at its next report (a chunk, or 50 ms of merging).
///
/// When the helper thread cannot start (no memory for its stack, or the process's thread limit), the
/// work runs on the calling thread, and Ctrl-C waits for it.
fn run_interruptible<T: Send>(
    py: Python<'_>,
    progress: &PyProgress,
    f: impl FnOnce() -> PyResult<T> + Send,
) -> PyResult<T> {
    run_detached(py, || {
        let caller = thread::current();
        // Taken by the helper thread, or back here when it did not start.
        let work = Mutex::new(Some(f));
        let take = || work.lock().unwrap_or_else(|p| p.into_inner()).take();
        thread::scope(|scope| {
            let started = thread::Builder::new().spawn_scoped(scope, || {
                // Wakes the caller when the work ends, by returning or by panicking.
                let _wake = WakeOnDrop(caller);
                take().map(|f| f())
            });
            let Ok(worker) = started else {
                // The thread's closure was dropped unrun, so the work is still in `work`.
                return match take() {
                    Some(f) => f(),
                    None => unreachable!("work that did not start was taken"),
                };
            };
            while !worker.is_finished() {
                thread::park_timeout(SIGNAL_POLL);
                if let Err(err) = Python::attach(|py| py.check_signals()) {
                    progress.cancel(err);
                }
            }
            let Some(result) = worker.join().unwrap_or_else(|panic| resume_unwind(panic)) else {
                unreachable!("a thread that started took the work");
            };
            // Ctrl-C that came after the work's last report: the signal was consumed, so raise it.
            match progress.take_raised() {
                Some(err) if result.is_ok() => Err(err),
                _ => result,
            }
        })
    })
}

struct WakeOnDrop(thread::Thread);

impl Drop for WakeOnDrop {
    fn drop(&mut self) {
        self.0.unpark();
    }
}

/// `encode` and `encode_batch` of at least this many bytes of text run on a helper thread while the
/// calling thread watches for Ctrl-C ([`run_interruptible`]), and stop within a block of
/// [`Encoder::encode_cancellable`]: 100 MB of "x" made Ctrl-C wait 6.5 s. Shorter calls end within
/// milliseconds anyway, and skip the helper thread.
const INTERRUPTIBLE_FROM: usize = 1 << 20;

/// Reports progress to an optional Python callable `callback(phase, done, total)` and stops the work
/// when it is cancelled (Ctrl-C, see [`run_interruptible`]) or the callback raises; the Python exception
/// is kept to be re-raised.
struct PyProgress {
    callback: Option<Py<PyAny>>,
    /// Shared with the engine's encoder ([`Encoder::encode_cancellable`]).
    cancelled: Arc<AtomicBool>,
    raised: Mutex<Option<PyErr>>,
}

impl PyProgress {
    fn new(callback: Option<Py<PyAny>>) -> PyProgress {
        PyProgress {
            callback,
            cancelled: Arc::new(AtomicBool::new(false)),
            raised: Mutex::new(None),
        }
    }

    /// Makes the next report stop the work with `err` (the first error given wins).
    fn cancel(&self, err: PyErr) {
        self.raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(err);
        self.cancelled.store(true, Ordering::Relaxed);
    }

    fn take_raised(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The Python exception that stopped the work, if any, else `e` converted.
    fn error(&self, e: Error) -> PyErr {
        match (e, self.take_raised()) {
            (Error::Interrupted, Some(err)) => err,
            (e, _) => to_py_err(e),
        }
    }
}

impl Progress for PyProgress {
    fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    fn report(&self, phase: Phase, done: u64, total: u64) -> crate::error::Result<()> {
        if self.cancelled() {
            return Err(Error::Interrupted);
        }
        let Some(callback) = &self.callback else {
            return Ok(());
        };
        let name = match phase {
            Phase::Count => "count",
            Phase::Merge => "merge",
            Phase::Encode => "encode",
        };
        Python::attach(|py| callback.call1(py, (name, done, total)).map(drop)).map_err(|err| {
            self.cancel(err);
            Error::Interrupted
        })
    }
}

/// The GPT-2 pre-tokens of `text`, as a list of str.
#[pyfunction]
fn pretokenize<'py>(py: Python<'py>, text: &Bound<'py, PyString>) -> PyResult<Bound<'py, PyList>> {
    let text = utf8(text)?;
    let text: &str = &text;
    let pieces = run_detached(py, || {
        let mut pieces = Vec::new();
        for piece in crate::pretokenize::pretokenize(text) {
            crate::error::try_push(&mut pieces, piece).map_err(alloc_err("the pre-tokens"))?;
        }
        Ok(pieces)
    })?;
    list(py, pieces.len(), |i| string(py, pieces[i]))
}

/// Trains on files, each its own document; returns (vocab as a list of bytes indexed by id, merges as a
/// list of pairs, (distinct pre-tokens, bytes, tokens it encodes to: None unless `count_tokens`)).
#[pyfunction]
#[pyo3(signature = (input_paths, vocab_size, special_tokens, num_threads=None, chunk_size=None, progress=None, count_tokens=false))]
#[allow(clippy::too_many_arguments)]
fn train_bpe<'py>(
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

/// The UTF-8 of `text`: in place when it is ASCII (CPython stores ASCII as is), else converted by
/// [`crate::python::strings`], which is several times faster than CPython's conversion and leaves no copy inside the
/// string. A lone surrogate raises the `UnicodeEncodeError` Python itself would; MemoryError when the
/// copy cannot be allocated.
fn utf8<'a>(text: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    #[cfg(not(any(Py_3_14, PyPy, GraalPy)))]
    // SAFETY: `text` is a str (its type says so) kept alive by the borrow, and CPython never changes a
    // str's characters once it is shared. READY (before 3.12) gives a legacy string its compact form;
    // after it KIND and DATA describe GET_LENGTH units of that width, which the slices cover exactly.
    // The units of an ASCII string are its UTF-8, and `to_utf8` writes only UTF-8 into `buf`.
    unsafe {
        use crate::python::strings::{to_utf8, Units};
        use std::slice::from_raw_parts;
        let op = text.as_ptr();
        #[cfg(not(Py_3_12))]
        if ffi::PyUnicode_READY(op) != 0 {
            return Err(PyErr::fetch(text.py()));
        }
        let (data, len) = (
            ffi::PyUnicode_DATA(op),
            ffi::PyUnicode_GET_LENGTH(op) as usize,
        );
        if ffi::PyUnicode_IS_ASCII(op) != 0 {
            return Ok(Cow::Borrowed(std::str::from_utf8_unchecked(
                from_raw_parts(data.cast(), len),
            )));
        }
        let units = match ffi::PyUnicode_KIND(op) {
            ffi::PyUnicode_1BYTE_KIND => Units::Latin1(from_raw_parts(data.cast(), len)),
            ffi::PyUnicode_2BYTE_KIND => Units::Ucs2(from_raw_parts(data.cast(), len)),
            _ => Units::Ucs4(from_raw_parts(data.cast(), len)),
        };
        let mut buf = Vec::new();
        try_reserve(&mut buf, units.max_utf8_len())
            .map_err(|e| to_py_err(e.of_text("the UTF-8 copy", len)))?;
        if to_utf8(units, &mut buf).is_ok() {
            return Ok(Cow::Owned(String::from_utf8_unchecked(buf)));
        }
    }
    // A surrogate (or an interpreter whose storage is not read here): Python's own conversion.
    text.to_str().map(Cow::Borrowed)
}

/// A vocabulary and merges ready to encode; immutable, so one instance serves many threads.
#[pyclass(frozen, name = "Encoder", module = "bytepair._core")]
struct PyEncoder {
    inner: Encoder,
    /// A Python int for each id below [`CACHED_INTS`], made once (see [`PyEncoder::to_list`]).
    ints: Vec<Py<PyAny>>,
}

/// Ids below this get a preallocated Python int: 2^17 covers the vocabularies people train (about
/// 4 MB of ints) without growing with an unusually large one.
const CACHED_INTS: u32 = 1 << 17;

impl PyEncoder {
    /// A Python list of `ids`. Python caches only the ints up to 256, so converting each id allocates
    /// an int, and the list of a 20 MB text took longer than encoding it (about 48 ns an id, 6.7M ids;
    /// encode() ran at 33 MB/s where the engine runs at 71). Filling a new list with new references to
    /// the preallocated ints, with the interpreter's inline reference counting, costs a few ns an id.
    fn to_list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let len = isize::try_from(ids.len())
            .map_err(|_| PyValueError::new_err("too many ids for a list"))?;
        let ints = &self.ints;
        // A long list adds references to the same few thousand ints over and over: count them in a
        // small array and add each int's count at the end, so that the loop writes to L2-sized counts
        // instead of to the ints themselves, scattered over megabytes (list building took 57 -> 50 ms
        // for 6.7M ids of prose, 79 -> 65 ms for 8.6M ids of CJK-heavy text). A u32 count cannot
        // overflow in a list of at most u32::MAX ids. Without room for the counts (out of memory), each
        // reference is added at once.
        let counted = ids.len() >= ints.len() && ids.len() <= u32::MAX as usize;
        let counts = match counted {
            true => crate::error::try_vec(0u32, ints.len()).unwrap_or_default(),
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
            crate::python::huge_pages::advise(items.as_ptr().cast(), size_of_val(items));
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

/// The ids of `text` in a new vector, encoded so that setting `cancel` stops it when given. On an error
/// the vector is freed before the caller turns the error into a Python exception (which allocates):
/// out of memory, that memory is what the exception needs.
fn encode_vec(
    encoder: &Encoder,
    text: &str,
    cancel: Option<&Arc<AtomicBool>>,
) -> crate::error::Result<Vec<u32>> {
    let mut ids: Vec<u32> = Vec::new();
    // As much as the encoder reserves (one id per byte), here so that it can be advised.
    try_reserve(&mut ids, text.len()).map_err(|e| e.of_text("the ids", text.len()))?;
    crate::python::huge_pages::advise(ids.as_ptr().cast(), ids.capacity() * 4);
    match cancel {
        Some(cancel) => encoder.encode_cancellable(text, &mut ids, cancel)?,
        None => encoder.encode(text, &mut ids)?,
    }
    Ok(ids)
}

/// The items of `seq` (a list or tuple) of length `len`, each made by `item`, in a vector reserved
/// fallibly: PyO3's extraction of a `Vec` reserves with `Vec::with_capacity`, which aborts the process
/// when it fails.
fn collect<'py, T>(
    seq: &Bound<'py, PyAny>,
    what: &'static str,
    mut item: impl FnMut(Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    let mut items = Vec::new();
    try_reserve(&mut items, seq.len()?).map_err(alloc_err(what))?;
    for x in seq.try_iter()? {
        items.push(item(x?)?);
    }
    Ok(items)
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
                encode_vec(&self.inner, &text, None).map_err(to_py_err)
            })?
        } else {
            let progress = PyProgress::new(None);
            run_interruptible(py, &progress, || {
                encode_vec(&self.inner, &text, Some(&progress.cancelled))
                    .map_err(|e| progress.error(e))
            })?
        };
        // `text` (a UTF-8 copy unless the str is ASCII) lives until the list is made: freed before, its
        // megabytes went back to malloc, which then served the list's array from them and zeroed them
        // by hand (PyList_New's calloc: 17M instructions for 1.6M ids), where fresh pages come zeroed.
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
            // The ids are freed on an error before it becomes an exception, as in `encode_vec`.
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
        let encode_all = || {
            // A slot per text, filled by the thread that takes the text (allocated once: each thread
            // collecting its own would grow vectors as it went).
            let mut batches: Vec<Mutex<Vec<u32>>> = Vec::new();
            try_reserve(&mut batches, texts.len()).map_err(alloc_err("the ids of the texts"))?;
            batches.extend(texts.iter().map(|_| Mutex::new(Vec::new())));
            // The error of the first text that failed, and which text it was.
            let first_error: Mutex<Option<(usize, Error)>> = Mutex::new(None);
            // Each thread takes the next text not yet taken, so a long text holds up only its thread.
            let next = AtomicUsize::new(0);
            let threads = thread_count(num_threads).min(texts.len());
            run_on_threads(threads, || {
                while !progress.cancelled() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(text) = texts.get(i) else { break };
                    match encode_vec(&self.inner, text, cancel) {
                        Ok(ids) => *batches[i].lock().unwrap_or_else(PoisonError::into_inner) = ids,
                        // Cancelled: the loop ends and the call raises below.
                        Err(Error::Interrupted) => {}
                        Err(e) => {
                            let mut first =
                                first_error.lock().unwrap_or_else(PoisonError::into_inner);
                            if first.as_ref().is_none_or(|&(at, _)| i < at) {
                                *first = Some((i, e));
                            }
                        }
                    }
                }
            });
            // Raised once every text's ids are freed (the exception allocates).
            let first_error = first_error
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner);
            if progress.cancelled() || first_error.is_some() {
                drop(batches);
                let e = first_error.map_or(Error::Interrupted, |(_, e)| e);
                return Err(progress.error(e));
            }
            Ok(batches)
        };
        let mut batches = if interruptible {
            run_interruptible(py, &progress, encode_all)?
        } else {
            run_detached(py, encode_all)?
        };
        drop(texts);
        list(py, batches.len(), |i| {
            let ids = batches[i].get_mut().unwrap_or_else(PoisonError::into_inner);
            Ok(self.to_list(py, ids)?.into_any())
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
            // The bytes are freed on an error before it becomes an exception, as in `encode_vec`.
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
        let dtype = match dtype_bits {
            16 => Dtype::U16,
            32 => Dtype::U32,
            other => {
                return Err(PyValueError::new_err(format!(
                    "dtype must be uint16 or uint32, not {other} bits"
                )))
            }
        };
        let progress = PyProgress::new(progress);
        let chunk_size = chunk_size.unwrap_or(crate::train::count::DEFAULT_CHUNK_SIZE);
        let tokens = run_interruptible(py, &progress, || {
            encode_file(
                &self.inner,
                &input_path,
                &output_path,
                dtype,
                num_threads,
                chunk_size,
                &progress,
            )
            .map_err(|e| progress.error(e))
        })?;
        int(py, tokens)
    }
}

/// The most threads a call starts; more asked for are capped to this (see `crate::threads`).
#[pyfunction(name = "max_threads")]
fn py_max_threads() -> usize {
    max_threads()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_max_threads, m)?)?;
    m.add_class::<PyEncoder>()?;
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(train_bpe, m)?)?;
    m.add("UNICODE_VERSION", crate::pretokenize::UNICODE_VERSION)?;
    Ok(())
}
