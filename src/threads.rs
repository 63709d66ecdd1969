//! How many threads a call uses, and starting them without failing the call.
//!
//! A caller may ask for any number of threads; more than [`max_threads`] are never started, since they
//! add nothing but memory and scheduling (a million asked for would spawn threads for minutes). A
//! thread that cannot start (out of memory for its stack, or the process's thread limit) makes the work
//! run on fewer threads, down to the calling thread alone, rather than fail.
//!
//! Threads are plain scoped threads that live for one call, with nothing shared between calls. A
//! process forked while another thread is inside a call must be able to work, and a pool that keeps
//! process-wide state breaks such children (rayon's, through crossbeam's epoch lists, crashed them with
//! "double free or corruption").
//!
//! Invariant: every thread a call starts has ended when the call returns.

use std::num::NonZeroUsize;
use std::panic::resume_unwind;
use std::sync::{Condvar, Mutex, PoisonError};

/// How many threads may run at once here: the cores this process may use (CPU affinity and cgroup
/// quota included), at least 1.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// The most threads one call uses: four per core. More cannot make CPU-bound work faster; a few more
/// than the cores can help when reading a file waits on the disk.
pub fn max_threads() -> usize {
    4 * cores()
}

/// The threads a call uses for `num_threads`: every core when `None` or 0, and never more than
/// [`max_threads`].
pub fn thread_count(num_threads: Option<usize>) -> usize {
    match num_threads {
        Some(n) if n > 0 => n.min(max_threads()),
        _ => cores(),
    }
}

/// Runs `work` on `threads` threads at once, the calling thread among them, and returns what each
/// returned, the calling thread's first. Fewer run when not all can start; `work` shares out the work
/// itself (each call takes items until none is left).
pub(crate) fn run_on_threads<T: Send>(threads: usize, work: impl Fn() -> T + Sync) -> Vec<T> {
    let (work, gate) = (&work, &StartGate::default());
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads)
            .map_while(|_| {
                let helper = move || {
                    gate.enter();
                    work()
                };
                std::thread::Builder::new().spawn_scoped(scope, helper).ok()
            })
            .collect();
        gate.open(helpers.len());
        let mut results = Vec::with_capacity(helpers.len() + 1);
        results.push(work());
        for helper in helpers {
            results.push(helper.join().unwrap_or_else(|panic| resume_unwind(panic)));
        }
        results
    })
}

/// Holds new threads at their start until all have started. glibc allocates a thread's thread-local
/// storage for this library (with malloc) as the thread starts, and aborts the process ("cannot
/// allocate memory for thread-local data") when that fails: under a memory limit, work that threads
/// started earlier began meanwhile could take the memory it needed.
#[derive(Default)]
pub(crate) struct StartGate {
    /// Threads that entered, and whether the gate is open.
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl StartGate {
    /// In a new thread, first: counts it as started, then waits for [`Self::open`].
    pub(crate) fn enter(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 += 1;
        self.changed.notify_all();
        while !state.1 {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// In the thread that started `started` threads: waits until they all entered, then lets them go.
    pub(crate) fn open(&self, started: usize) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.0 < started {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.1 = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_capped_and_default_to_the_cores() {
        assert_eq!(thread_count(None), cores());
        assert_eq!(thread_count(Some(0)), cores());
        assert_eq!(thread_count(Some(1)), 1);
        assert_eq!(thread_count(Some(usize::MAX)), max_threads());
    }

    #[test]
    fn every_thread_works_and_the_caller_is_first() {
        let caller = std::thread::current().id();
        let ids = run_on_threads(3, || std::thread::current().id());
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[0], caller);
        assert!(ids[1] != caller && ids[2] != caller && ids[1] != ids[2]);
        assert_eq!(run_on_threads(1, || 7), [7]);
    }
}
