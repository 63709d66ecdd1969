//! The Python binding, `bytepair._core`. The public API and its documentation are in
//! `python/bytepair/`; this module only converts types, releases the GIL around long work, turns
//! [`Error`] into Python exceptions, and keeps Rust panics from crossing into Python.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::encode::{ids_capacity, Encoder};
use crate::encode_file::{encode_file, Dtype};
use crate::error::Error;
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
        other => PyValueError::new_err(other.to_string()),
    }
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
fn pretokenize(py: Python<'_>, text: &str) -> PyResult<Vec<String>> {
    run_detached(py, || {
        Ok(crate::pretokenize::pretokenize(text)
            .map(str::to_string)
            .collect())
    })
}

type Vocab<'py> = Vec<Bound<'py, PyBytes>>;
type Merges<'py> = Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>;

/// What training found about its text: (distinct pre-tokens, bytes, tokens it encodes to: None unless
/// `count_tokens`).
type TrainStats = (usize, u64, Option<u64>);

/// Trains on files, each its own document; returns (vocab as a list of bytes indexed by id, merges as a
/// list of pairs, [`TrainStats`]).
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
) -> PyResult<(Vocab<'py>, Merges<'py>, TrainStats)> {
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
    let vocab: Vocab<'py> = trained.vocab.iter().map(|t| PyBytes::new(py, t)).collect();
    let merges = trained
        .merges
        .iter()
        .map(|&(a, b)| (vocab[a as usize].clone(), vocab[b as usize].clone()))
        .collect();
    let stats = (trained.pretokens, trained.bytes, trained.tokens);
    Ok((vocab, merges, stats))
}

/// The UTF-8 of `text`: in place when it is ASCII (CPython stores ASCII as is), else converted into
/// `buf` by [`crate::ucs`], which is several times faster than CPython's conversion and leaves no copy
/// inside the string. A lone surrogate raises the `UnicodeEncodeError` Python itself would.
fn utf8<'a>(text: &'a Bound<'_, PyString>, buf: &'a mut Vec<u8>) -> PyResult<&'a str> {
    #[cfg(not(any(Py_3_14, PyPy, GraalPy)))]
    // SAFETY: `text` is a str (its type says so) kept alive by the borrow, and CPython never changes a
    // str's characters once it is shared. READY (before 3.12) gives a legacy string its compact form;
    // after it KIND and DATA describe GET_LENGTH units of that width, which the slices cover exactly.
    // The units of an ASCII string are its UTF-8.
    unsafe {
        use crate::ucs::{to_utf8, Units};
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
            return Ok(std::str::from_utf8_unchecked(from_raw_parts(
                data.cast(),
                len,
            )));
        }
        let units = match ffi::PyUnicode_KIND(op) {
            ffi::PyUnicode_1BYTE_KIND => Units::Latin1(from_raw_parts(data.cast(), len)),
            ffi::PyUnicode_2BYTE_KIND => Units::Ucs2(from_raw_parts(data.cast(), len)),
            _ => Units::Ucs4(from_raw_parts(data.cast(), len)),
        };
        buf.clear();
        if to_utf8(units, buf).is_ok() {
            return Ok(std::str::from_utf8_unchecked(buf));
        }
    }
    // A surrogate (or an interpreter whose storage is not read here): Python's own conversion.
    let _ = buf;
    text.to_str()
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
        // SAFETY: PyList_New returns a new reference (checked for NULL) to a list of `len` NULL slots,
        // `ob_item` pointing at them (non-NULL when `len` > 0). Each slot is written exactly once,
        // before the list is used, with a reference the list owns (as PyList_SET_ITEM would):
        // a new int, or a cached int whose reference count is raised by one for it, at once or, when
        // counted, after the loop (which cannot exit early). The GIL is held throughout (we have `py`).
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
            crate::huge_pages::advise(items.as_ptr().cast(), size_of_val(items));
            let ints = &self.ints;
            // A long list adds references to the same few thousand ints over and over: count them in
            // a small array and add each int's count at the end, so that the loop writes to L2-sized
            // counts instead of to the ints themselves, scattered over megabytes (list building took
            // 57 -> 50 ms for 6.7M ids of prose, 79 -> 65 ms for 8.6M ids of CJK-heavy text). A u32
            // count cannot overflow in a list of at most u32::MAX ids.
            let counted = ids.len() >= ints.len() && ids.len() <= u32::MAX as usize;
            let mut counts = vec![0u32; if counted { ints.len() } else { 0 }];
            for (slot, &id) in items.iter_mut().zip(ids) {
                *slot = match ints.get(id as usize) {
                    Some(int) => {
                        match counts.get_mut(id as usize) {
                            Some(n) => *n += 1,
                            None => ffi::Py_INCREF(int.as_ptr()),
                        }
                        int.as_ptr()
                    }
                    None => {
                        let Ok(int) = id.into_pyobject(py);
                        int.into_ptr()
                    }
                };
            }
            // Nothing above can fail or return early, so every counted reference is added here.
            for (int, &n) in ints.iter().zip(&counts) {
                for _ in 0..n {
                    ffi::Py_INCREF(int.as_ptr());
                }
            }
            Ok(list.cast_into_unchecked())
        }
    }
}

#[pymethods]
impl PyEncoder {
    #[new]
    fn new(
        py: Python<'_>,
        vocab: Vec<(u32, Bound<'_, PyBytes>)>,
        merges: Vec<(Bound<'_, PyBytes>, Bound<'_, PyBytes>)>,
        special_tokens: Vec<String>,
    ) -> PyResult<Self> {
        let vocab = vocab
            .into_iter()
            .map(|(id, b)| (id, b.as_bytes().to_vec()))
            .collect();
        let merges: Vec<(Vec<u8>, Vec<u8>)> = merges
            .iter()
            .map(|(a, b)| (a.as_bytes().to_vec(), b.as_bytes().to_vec()))
            .collect();
        let inner = run_detached(py, || {
            Encoder::new(vocab, &merges, &special_tokens).map_err(to_py_err)
        })?;
        let cached = (inner.vocab_size() as u32).min(CACHED_INTS);
        let ints = (0..cached)
            .map(|id| {
                let Ok(int) = id.into_pyobject(py);
                int.into_any().unbind()
            })
            .collect();
        Ok(PyEncoder { inner, ints })
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut buf = Vec::new();
        let text = utf8(text, &mut buf)?;
        let new_ids = || {
            let ids: Vec<u32> = Vec::with_capacity(ids_capacity(text.len()));
            crate::huge_pages::advise(ids.as_ptr().cast(), ids.capacity() * 4);
            ids
        };
        let ids = if text.len() < INTERRUPTIBLE_FROM {
            run_detached(py, || {
                let mut ids = new_ids();
                self.inner.encode(text, &mut ids);
                Ok(ids)
            })?
        } else {
            let progress = PyProgress::new(None);
            run_interruptible(py, &progress, || {
                let mut ids = new_ids();
                self.inner
                    .encode_cancellable(text, &mut ids, &progress.cancelled)
                    .map_err(|e| progress.error(e))?;
                Ok(ids)
            })?
        };
        self.to_list(py, &ids)
    }

    /// Encodes the longest safely cut prefix of `text` (all of it when `last`); returns the ids and
    /// the rest of the text.
    fn encode_prefix<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        last: bool,
    ) -> PyResult<(Bound<'py, PyList>, String)> {
        let mut buf = Vec::new();
        let text = utf8(text, &mut buf)?;
        let (ids, rest) = run_detached(py, || {
            let mut ids = Vec::with_capacity(ids_capacity(text.len()));
            let used = self.inner.encode_prefix(text, last, &mut ids);
            Ok((ids, text[used..].to_string()))
        })?;
        Ok((self.to_list(py, &ids)?, rest))
    }

    #[pyo3(signature = (texts, num_threads=None))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
        num_threads: Option<usize>,
    ) -> PyResult<Vec<Bound<'py, PyList>>> {
        let interruptible = texts.iter().map(String::len).sum::<usize>() >= INTERRUPTIBLE_FROM;
        let progress = PyProgress::new(None);
        let encode_all = || {
            // Each thread takes the next text not yet taken, so a long text holds up only its thread.
            let next = AtomicUsize::new(0);
            let threads = thread_count(num_threads).min(texts.len());
            let encoded = run_on_threads(threads, || {
                let mut encoded = Vec::new();
                while !progress.cancelled() {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(text) = texts.get(i) else { break };
                    let mut ids = Vec::with_capacity(ids_capacity(text.len()));
                    if interruptible {
                        // Cancelled: the loop ends and the call raises below.
                        let _ = self
                            .inner
                            .encode_cancellable(text, &mut ids, &progress.cancelled);
                    } else {
                        self.inner.encode(text, &mut ids);
                    }
                    encoded.push((i, ids));
                }
                encoded
            });
            if progress.cancelled() {
                return Err(progress.error(Error::Interrupted));
            }
            let mut batches = vec![Vec::new(); texts.len()];
            for (i, ids) in encoded.into_iter().flatten() {
                batches[i] = ids;
            }
            Ok(batches)
        };
        let batches = if interruptible {
            run_interruptible(py, &progress, encode_all)?
        } else {
            run_detached(py, encode_all)?
        };
        batches.iter().map(|ids| self.to_list(py, ids)).collect()
    }

    /// The bytes of `ids` concatenated; ValueError naming the first id with no token.
    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = run_detached(py, || {
            let mut out = Vec::with_capacity(ids.len() * 4);
            let ids = ids
                .iter()
                .map(|&id| if id < 0 { u64::MAX } else { id as u64 });
            match self.inner.decode(ids, &mut out) {
                Ok(()) => Ok(out),
                Err(Error::UnknownId(u64::MAX)) => Err(PyValueError::new_err(
                    "negative ids are not in the vocabulary",
                )),
                Err(e) => Err(to_py_err(e)),
            }
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[pyo3(signature = (input_path, output_path, dtype_bits, num_threads=None, chunk_size=None, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn encode_file(
        &self,
        py: Python<'_>,
        input_path: PathBuf,
        output_path: PathBuf,
        dtype_bits: u32,
        num_threads: Option<usize>,
        chunk_size: Option<usize>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<u64> {
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
        let chunk_size = chunk_size.unwrap_or(crate::count::DEFAULT_CHUNK_SIZE);
        run_interruptible(py, &progress, || {
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
        })
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
    m.add("UNICODE_VERSION", crate::unicode_tables::UNICODE_VERSION)?;
    Ok(())
}
