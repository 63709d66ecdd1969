//! The Python binding, `bytepair._core`. The public API and its documentation are in
//! `python/bytepair/`; this module only converts types, releases the GIL around long work, turns
//! [`Error`] into Python exceptions, and keeps Rust panics from crossing into Python.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::error::Error;
use crate::progress::{Phase, Progress};
use crate::train::{train_file, TrainOptions};

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

/// Reports progress to an optional Python callable `callback(phase, done, total)` and stops the work
/// when Ctrl-C is pending or the callback raises; the Python exception is kept to be re-raised.
struct PyProgress {
    callback: Option<Py<PyAny>>,
    raised: Mutex<Option<PyErr>>,
}

impl PyProgress {
    fn new(callback: Option<Py<PyAny>>) -> PyProgress {
        PyProgress {
            callback,
            raised: Mutex::new(None),
        }
    }

    /// The Python exception that stopped the work, if any, else `e` converted.
    fn error(&self, e: Error) -> PyErr {
        let raised = self.raised.lock().unwrap_or_else(|p| p.into_inner()).take();
        match (e, raised) {
            (Error::Interrupted, Some(err)) => err,
            (e, _) => to_py_err(e),
        }
    }
}

impl Progress for PyProgress {
    fn report(&self, phase: Phase, done: u64, total: u64) -> crate::error::Result<()> {
        Python::attach(|py| {
            let result = py.check_signals().and_then(|()| match &self.callback {
                Some(cb) => {
                    let name = match phase {
                        Phase::Count => "count",
                        Phase::Merge => "merge",
                    };
                    cb.call1(py, (name, done, total)).map(drop)
                }
                None => Ok(()),
            });
            result.map_err(|err| {
                self.raised
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(err);
                Error::Interrupted
            })
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

/// Trains on a file; returns (vocab as a list of bytes indexed by id, merges as a list of pairs).
#[pyfunction]
#[pyo3(signature = (input_path, vocab_size, special_tokens, num_threads=None, chunk_size=None, progress=None))]
fn train_bpe<'py>(
    py: Python<'py>,
    input_path: PathBuf,
    vocab_size: usize,
    special_tokens: Vec<String>,
    num_threads: Option<usize>,
    chunk_size: Option<usize>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Vocab<'py>, Merges<'py>)> {
    let mut options = TrainOptions::new(vocab_size);
    options.special_tokens = special_tokens;
    options.num_threads = num_threads;
    if let Some(size) = chunk_size {
        options.chunk_size = size;
    }
    let progress = PyProgress::new(progress);
    let trained = run_detached(py, || {
        train_file(&input_path, &options, &progress).map_err(|e| progress.error(e))
    })?;
    let vocab: Vocab<'py> = trained.vocab.iter().map(|t| PyBytes::new(py, t)).collect();
    let merges = trained
        .merges
        .iter()
        .map(|&(a, b)| (vocab[a as usize].clone(), vocab[b as usize].clone()))
        .collect();
    Ok((vocab, merges))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(train_bpe, m)?)?;
    Ok(())
}
