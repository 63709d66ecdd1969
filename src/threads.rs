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
//! Every thread is started with [`spawn_scoped`], which a `fork()` in another thread waits for: glibc
//! cannot fork while a thread is being started (see [`spawn_scoped`]).
//!
//! Invariant: every thread a call starts has ended when the call returns.

use std::io;
use std::num::NonZeroUsize;
use std::panic::resume_unwind;
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread::{Scope, ScopedJoinHandle};

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
                spawn_scoped(scope, helper).ok()
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

/// Starts a scoped thread, as `std::thread::Builder::spawn_scoped` does, while no other thread of
/// this process forks.
///
/// glibc's `pthread_create` reuses the stack of a thread that ended, and first frees the blocks of
/// thread-local storage that the old thread allocated in libraries loaded with `dlopen` (this one),
/// after taking the stack off its cache and without a lock. A `fork()` by another thread in that
/// moment gives the child the stack back in its cache with pointers to blocks already freed, and the
/// child's first threads free them again: "free(): invalid pointer", "double free or corruption". A
/// `pthread_atfork` handler makes `fork()` wait until the threads being started here have started.
///
/// A thread is not started when the address space has no room for all it needs ([`room_for_a_thread`]):
/// the caller runs the work on fewer threads instead.
pub(crate) fn spawn_scoped<'scope, T: Send + 'scope>(
    scope: &'scope Scope<'scope, '_>,
    f: impl FnOnce() -> T + Send + 'scope,
) -> io::Result<ScopedJoinHandle<'scope, T>> {
    room_for_a_thread()?;
    let _starting = fork_guard::Starting::enter();
    std::thread::Builder::new()
        .stack_size(THREAD_STACK)
        .spawn_scoped(scope, f)
}

/// The stack of each thread started here: Rust's default, set so that [`room_for_a_thread`] knows it.
const THREAD_STACK: usize = 2 << 20;

/// Whether the address space has room for a new thread, when it is limited (`RLIMIT_AS`); an
/// `OutOfMemory` error when not.
///
/// A new thread must allocate before any code of ours runs in it: its thread-local storage for this
/// library (loaded with `dlopen`), glibc's cache of small blocks, the list of its thread-locals'
/// destructors. glibc aborts the process when those fail ("cannot allocate memory for thread-local
/// data", "failed to register TLS destructor", or Rust's "memory allocation failed"), and nothing can
/// catch that. They fail when the thread's stack fitted under the limit and they do not: glibc gives
/// a thread its own malloc arena at its first allocation, which reserves 128 MiB (64 MiB, aligned to
/// its size), and without one every allocation is a mapping of its own. So a thread starts only when
/// its stack, an arena and a margin fit; under a tighter limit the calling thread, whose arena
/// exists, does the work, and a failed allocation there is a `MemoryError`.
///
/// The room is probed with a mapping that reserves nothing and is unmapped at once; another thread of
/// the process could take the room between the probe and the start, which only a lock around every
/// allocation of the process could prevent.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn room_for_a_thread() -> io::Result<()> {
    /// What glibc maps for a new arena: twice its 64 MiB heap, of which it keeps an aligned half.
    const ARENA_RESERVE: usize = 128 << 20;
    /// Beyond the stack and the arena: the stack's guard page and what the start allocates before an
    /// arena exists, with room to spare.
    const START_MARGIN: usize = 1 << 20;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to write.
    let limited = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY;
    if !limited {
        return Ok(());
    }
    let len = THREAD_STACK + ARENA_RESERVE + START_MARGIN;
    // SAFETY: a new private mapping without access or backing store, unmapped below before anything
    // can use it.
    let probe = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if probe == libc::MAP_FAILED {
        return Err(io::Error::from(io::ErrorKind::OutOfMemory));
    }
    // SAFETY: `probe` is the mapping of `len` bytes made above, which nothing else refers to.
    unsafe { libc::munmap(probe, len) };
    Ok(())
}

/// The probe is for glibc's arenas; elsewhere a thread starts, or fails to, as the platform has it.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn room_for_a_thread() -> io::Result<()> {
    Ok(())
}

#[cfg(unix)]
mod fork_guard {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Once;
    use std::time::Duration;

    /// Threads being started now.
    static STARTING: AtomicUsize = AtomicUsize::new(0);
    /// Forks under way (more than one when threads fork at once).
    static FORKING: AtomicUsize = AtomicUsize::new(0);
    static REGISTER: Once = Once::new();

    /// Counts a thread being started while alive; created only while no fork is under way.
    pub(super) struct Starting(());

    impl Starting {
        pub(super) fn enter() -> Starting {
            REGISTER.call_once(|| {
                // SAFETY: the handlers are functions of this library, which Python never unloads.
                // Without them (ENOMEM) threads start as before, open to the race.
                unsafe {
                    libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(in_child));
                }
            });
            loop {
                // Sequentially consistent on both sides: either `before_fork` sees this thread in
                // STARTING and waits, or this thread sees the fork and backs off.
                STARTING.fetch_add(1, SeqCst);
                if FORKING.load(SeqCst) == 0 {
                    return Starting(());
                }
                STARTING.fetch_sub(1, SeqCst);
                while FORKING.load(SeqCst) != 0 {
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        }
    }

    impl Drop for Starting {
        fn drop(&mut self) {
            STARTING.fetch_sub(1, SeqCst);
        }
    }

    /// In the forking thread, before the fork: waits until the threads being started have started
    /// (a `pthread_create` takes microseconds); no new one starts until the fork is over.
    extern "C" fn before_fork() {
        FORKING.fetch_add(1, SeqCst);
        while STARTING.load(SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    extern "C" fn after_fork() {
        FORKING.fetch_sub(1, SeqCst);
    }

    /// The child has one thread: no fork and no start is under way there (a thread that was backing
    /// off in the parent may have left its count in STARTING).
    extern "C" fn in_child() {
        FORKING.store(0, SeqCst);
        STARTING.store(0, SeqCst);
    }
}

#[cfg(not(unix))]
mod fork_guard {
    pub(super) struct Starting(());

    impl Starting {
        pub(super) fn enter() -> Starting {
            Starting(())
        }
    }
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
