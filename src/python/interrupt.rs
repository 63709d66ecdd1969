//! Long work that Ctrl-C can stop: [`run_interruptible`] runs the engine on a helper thread while the
//! calling thread watches for signals, and [`PyProgress`] reports to a Python callback and carries the
//! cancellation (and the Python exception that caused it) to the engine.
//!
//! Invariant: a Python exception raised by the callback or by a signal handler is the one the call
//! raises, whatever error the engine stopped with.

use std::panic::resume_unwind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use pyo3::prelude::*;

use super::errors::{run_detached, to_py_err};
use crate::{Error, Phase, Progress};

/// How often the calling thread looks for a pending Ctrl-C while the engine works.
const SIGNAL_POLL: Duration = Duration::from_millis(20);

/// Runs `f` (long work that reports to `progress`) on a helper thread while the calling thread, with
/// the GIL released, checks for pending signals every [`SIGNAL_POLL`] and cancels `progress` when one
/// raises. Python runs signal handlers only on the main thread, and the engine reports from worker
/// threads, so the engine cannot check for Ctrl-C itself (without this, `encode_file` would run to the
/// end of the file after Ctrl-C). The work then stops at its next report (a chunk, or 50 ms of
/// merging).
///
/// When the helper thread cannot start (no memory for its stack, or the process's thread limit), the
/// work runs on the calling thread, and Ctrl-C waits for it.
pub(super) fn run_interruptible<T: Send>(
    py: Python<'_>,
    progress: &PyProgress,
    f: impl FnOnce() -> PyResult<T> + Send,
) -> PyResult<T> {
    run_detached(py, || {
        let caller = thread::current();
        // Taken by the helper thread, or back here when it did not start.
        let work = Mutex::new(Some(f));
        let take = || work.lock().unwrap_or_else(|p| p.into_inner()).take();
        let done = &AtomicBool::new(false);
        thread::scope(|scope| {
            let started = crate::threads::spawn_scoped(scope, || {
                // Wakes the caller when the work ends, by returning or by panicking.
                let _wake = WakeOnDrop { caller, done };
                take().map(|f| f())
            });
            let Ok(worker) = started else {
                // The thread's closure was dropped unrun, so the work is still in `work`.
                return match take() {
                    Some(f) => f(),
                    None => unreachable!("work that did not start was taken"),
                };
            };
            // `done`, not `worker.is_finished()`: the thread is not finished yet when it wakes the
            // caller, and the caller woken then would sleep a whole poll more (20 ms a call).
            while !done.load(Ordering::Acquire) {
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

/// Tells the caller that the work has ended, and wakes it.
struct WakeOnDrop<'a> {
    caller: thread::Thread,
    done: &'a AtomicBool,
}

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        self.caller.unpark();
    }
}

/// `encode` and `encode_batch` of at least this many bytes of text run on a helper thread while the
/// calling thread watches for Ctrl-C ([`run_interruptible`]), and stop within a block of
/// [`crate::Encoder::encode_cancellable`]: a long text of one letter keeps the encoder busy for
/// seconds. Shorter calls end within milliseconds anyway, and skip the helper thread.
pub(super) const INTERRUPTIBLE_FROM: usize = 1 << 20;

/// Reports progress to an optional Python callable `callback(phase, done, total)` and stops the work
/// when it is cancelled (Ctrl-C, see [`run_interruptible`]) or the callback raises; the Python exception
/// is kept to be re-raised.
pub(super) struct PyProgress {
    callback: Option<Py<PyAny>>,
    /// Shared with the engine's encoder ([`crate::Encoder::encode_cancellable`]).
    pub(super) cancelled: Arc<AtomicBool>,
    raised: Mutex<Option<PyErr>>,
}

impl PyProgress {
    pub(super) fn new(callback: Option<Py<PyAny>>) -> PyProgress {
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

    /// Keeps `err` to be raised by the call, without stopping the work: for an error of a Python
    /// reader of documents, which the engine reports as [`Error::Interrupted`] in its place in the input
    /// (the work before it finishes first).
    pub(super) fn keep(&self, err: PyErr) {
        self.raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(err);
    }

    fn take_raised(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The Python exception that stopped the work, if any, else `e` converted.
    pub(super) fn error(&self, e: Error) -> PyErr {
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

    fn report(&self, phase: Phase, done: u64, total: u64) -> crate::Result<()> {
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

    /// Calls the callback with `("encode", done, total, documents, tokens)`.
    fn encoded(&self, done: u64, total: u64, documents: u64, tokens: u64) -> crate::Result<()> {
        if self.cancelled() {
            return Err(Error::Interrupted);
        }
        let Some(callback) = &self.callback else {
            return Ok(());
        };
        let args = ("encode", done, total, documents, tokens);
        Python::attach(|py| callback.call1(py, args).map(drop)).map_err(|err| {
            self.cancel(err);
            Error::Interrupted
        })
    }
}
