//! Where the Python exceptions of the engine's errors come from: [`to_py_err`] maps each [`Error`] to
//! the exception a user expects, and [`run_detached`] keeps a Rust panic from crossing into Python.
//!
//! I/O errors become `OSError` with their errno (so Python picks `FileNotFoundError` and friends, and
//! names the path), out of memory `MemoryError`, an interruption `KeyboardInterrupt`, and the others
//! `ValueError`, each with the engine's message. A panic is a bug: it becomes a `RuntimeError` asking
//! for a report, never an abort or a `PanicException` (which escapes `except Exception`).

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{
    PyKeyboardInterrupt, PyMemoryError, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;

use crate::{AllocError, Error};

/// Converts an engine error into the Python exception a user expects.
pub(super) fn to_py_err(e: Error) -> PyErr {
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

/// A MemoryError for an allocation the binding makes, naming `what`.
pub(super) fn alloc_err(what: &'static str) -> impl Fn(AllocError) -> PyErr {
    move |e| to_py_err(e.named(what))
}

/// Runs `f` with the GIL released, turning a panic into a RuntimeError instead of an abort or a
/// `PanicException` (which derives from BaseException and escapes `except Exception`).
pub(super) fn run_detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> PyResult<T> + Send,
) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)))
        .unwrap_or_else(panic_error)
}

/// [`run_detached`] with the GIL kept, for work of a few microseconds, where releasing and taking it
/// back would cost more than other threads gain.
pub(super) fn run_attached<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(panic_error)
}

/// The RuntimeError of a caught panic.
fn panic_error<T>(panic: Box<dyn std::any::Any + Send>) -> PyResult<T> {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("unknown panic");
    Err(PyRuntimeError::new_err(format!(
        "bytepair internal error (please report it): {what}"
    )))
}
