//! Progress reports from long operations, and the way to stop them.
//!
//! The engine calls [`Progress::report`] between units of work (a chunk read, a batch of merges). An
//! implementation may show a bar, and may return an error to stop the work: the Python binding returns
//! `Error::Interrupted` when Ctrl-C is pending, which is how a long `train_bpe` stays interruptible.

use crate::error::Result;

/// What is being reported on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Reading and counting pre-tokens; units are bytes of input.
    Count,
    /// Choosing merges; units are merges.
    Merge,
    /// Encoding a file; units are bytes of input.
    Encode,
}

/// Receives progress and may stop the work by returning an error, which the operation then returns.
pub trait Progress: Sync {
    /// `done` of `total` units of `phase` are done; an error stops the work with that error.
    fn report(&self, phase: Phase, done: u64, total: u64) -> Result<()>;

    /// Encoding a dataset: `done` of `total` bytes of input read (`total` is 0 when unknown), and the
    /// documents and tokens written so far; an error stops the work. Reports [`Phase::Encode`] unless
    /// overridden.
    fn encoded(&self, done: u64, total: u64, documents: u64, tokens: u64) -> Result<()> {
        let _ = (documents, tokens);
        self.report(Phase::Encode, done, total.max(done))
    }

    /// Whether the work was asked to stop (then the next report fails): for waits that have nothing
    /// to report, such as a FIFO waiting for its writer (`open_input`).
    fn cancelled(&self) -> bool {
        false
    }
}

/// Reports nowhere and never stops.
pub struct Silent;

impl Progress for Silent {
    fn report(&self, _: Phase, _: u64, _: u64) -> Result<()> {
        Ok(())
    }
}
