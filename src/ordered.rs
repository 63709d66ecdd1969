//! Work read in order, done on worker threads, and written in order: the pipeline of `encode_file` and
//! `encode_dataset`.
//!
//! Each worker takes the reader (one at a time), reads the next item, which gets the next sequence
//! number, lets the reader go, and works on the item; the calling thread writes the results in
//! sequence. So reading overlaps the work (a worker reads while the others work), and no worker waits
//! for the slowest item of a batch. A worker reads an item only within `window` items of the next one
//! to write, which bounds memory however uneven the items and however slow the writing.
//!
//! Invariants: results are written in sequence, so the output is the same whatever the threads; at
//! most `window` items are between reading and writing; the error returned is the first in sequence
//! (nothing is read after an item that failed to read, nothing written after a result that failed).

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::error::{try_reserve, Result};
use crate::threads::StartGate;

/// What the workers do: read items in order (serially), then work on each (in parallel).
pub(crate) trait OrderedWork: Sync {
    /// What is read, one worker at a time.
    type Reader: Send;
    /// A worker's own buffers and caches, kept from item to item.
    type Worker: Default;
    /// One item as read.
    type Item;
    /// One item's result, on its way to the writer.
    type Done: Send;

    /// Reads the next item (`worker` may hand back buffers of its last item); None at the end. An
    /// error is the last item.
    fn read(
        &self,
        reader: &mut Self::Reader,
        worker: &mut Self::Worker,
    ) -> Option<Result<Self::Item>>;

    /// Works on `item` into `out` (an output buffer written before, or empty).
    fn work(&self, item: Self::Item, worker: &mut Self::Worker, out: Vec<u8>)
        -> Result<Self::Done>;
}

/// The calling thread's side: takes the results in sequence.
pub(crate) trait OrderedSink<D> {
    /// Writes `done`, the next result in sequence, and returns its output buffer for a next item.
    fn write(&mut self, done: D) -> Result<Vec<u8>>;

    /// Called after each write, once the workers were given room for one more item: for progress
    /// reports, which then do not hold the workers back; an error stops the work.
    fn written(&mut self) -> Result<()>;
}

/// The reader and where reading is.
struct Reading<R> {
    reader: R,
    /// The sequence number of the next item.
    next: u64,
    /// Set at the end of the input, after an item that failed to read, and when the writer stops.
    stop: bool,
}

/// Results on their way to the writer.
struct Queue<D> {
    /// At most one per item in flight, in any order: a vector reserved for `window` never grows (a
    /// channel or an ordered map allocated as items went by, and an allocation that fails there
    /// aborts the process).
    done: Vec<(u64, Result<D>)>,
    /// Workers that may still add to `done`.
    workers: usize,
    /// Output buffers written, for the next items: at most one per item in flight.
    spare_out: Vec<Vec<u8>>,
}

/// What the threads share.
struct Shared<'w, W: OrderedWork> {
    work: &'w W,
    reading: Mutex<Reading<W::Reader>>,
    queue: Mutex<Queue<W::Done>>,
    /// Results written (updated under `room_lock`).
    written: AtomicU64,
    room_lock: Mutex<()>,
    /// Signalled when a result was written or the work stopped.
    room: Condvar,
    /// Signalled when an item was done or a worker ended.
    ready: Condvar,
    window: u64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Counts a worker out when it ends, by returning or by panicking, and wakes the writer.
struct WorkerDone<'s, 'w, W: OrderedWork>(&'s Shared<'w, W>);

impl<W: OrderedWork> Drop for WorkerDone<'_, '_, W> {
    fn drop(&mut self) {
        lock(&self.0.queue).workers -= 1;
        self.0.ready.notify_all();
    }
}

impl<W: OrderedWork> Shared<'_, W> {
    /// Stops the reading, and wakes the workers that wait for room.
    fn stop(&self) {
        lock(&self.reading).stop = true;
        let _room = lock(&self.room_lock);
        self.room.notify_all();
    }

    /// Reads the next item, once fewer than `window` wait to be written, and works on it; None at the
    /// end of the input or once stopped.
    fn next(&self, worker: &mut W::Worker) -> Option<(u64, Result<W::Done>)> {
        let (seq, item) = loop {
            let mut reading = lock(&self.reading);
            if reading.stop {
                return None;
            }
            let seq = reading.next;
            if seq >= self.written.load(Ordering::Acquire) + self.window {
                drop(reading);
                let mut room = lock(&self.room_lock);
                while seq >= self.written.load(Ordering::Acquire) + self.window
                    && !lock(&self.reading).stop
                {
                    room = self.room.wait(room).unwrap_or_else(PoisonError::into_inner);
                }
                continue;
            }
            let Some(item) = self.work.read(&mut reading.reader, worker) else {
                drop(reading);
                self.stop();
                return None;
            };
            reading.next += 1;
            reading.stop |= item.is_err();
            break (seq, item);
        };
        let done = item.and_then(|item| {
            let out = lock(&self.queue).spare_out.pop().unwrap_or_default();
            self.work.work(item, worker, out)
        });
        Some((seq, done))
    }
}

/// Reads every item of `reader` with `work`, on `threads` worker threads (fewer when not all can
/// start; with none, the calling thread reads and works), and writes the results in sequence into
/// `sink`, with at most `window` items between reading and writing. Returns the first error in
/// sequence, from reading, working or writing; a worker's panic reaches the caller.
pub(crate) fn run_ordered<W: OrderedWork>(
    work: &W,
    reader: W::Reader,
    threads: usize,
    window: usize,
    sink: &mut dyn OrderedSink<W::Done>,
) -> Result<()> {
    let queue_oom = |e: crate::AllocError| e.named("the queue of chunks");
    let (mut done, mut spare_out) = (Vec::new(), Vec::new());
    try_reserve(&mut done, window).map_err(queue_oom)?;
    try_reserve(&mut spare_out, window).map_err(queue_oom)?;
    let shared = Shared {
        work,
        reading: Mutex::new(Reading {
            reader,
            next: 0,
            stop: false,
        }),
        queue: Mutex::new(Queue {
            done,
            workers: 0,
            spare_out,
        }),
        written: AtomicU64::new(0),
        room_lock: Mutex::new(()),
        room: Condvar::new(),
        ready: Condvar::new(),
        window: window as u64,
    };
    let gate = StartGate::default();
    std::thread::scope(|scope| {
        let shared = &shared;
        let mut workers = Vec::new();
        // Room reserved for as many workers as asked for (a few): pushing cannot allocate.
        try_reserve(&mut workers, threads).map_err(queue_oom)?;
        for _ in 0..threads {
            lock(&shared.queue).workers += 1;
            let gate = &gate;
            let started = crate::threads::spawn_scoped(scope, move || {
                let _done = WorkerDone(shared);
                gate.enter();
                let mut worker = W::Worker::default();
                let work = || {
                    while let Some(done) = shared.next(&mut worker) {
                        // Room reserved: at most `window` items are between written and read.
                        lock(&shared.queue).done.push(done);
                        shared.ready.notify_all();
                    }
                };
                // A panic would leave its item unwritten and the writer waiting for it: stop
                // everyone, then let the panic reach the caller through `join`.
                if let Err(panic) = catch_unwind(AssertUnwindSafe(work)) {
                    shared.stop();
                    resume_unwind(panic);
                }
            });
            match started {
                Ok(worker) => workers.push(worker),
                // Out of memory for a stack, or at the process's thread limit: the workers that
                // started do the work.
                Err(_) => {
                    lock(&shared.queue).workers -= 1;
                    break;
                }
            }
        }
        gate.open(workers.len());
        // With no worker at all, this thread works on each item before writing it.
        let mut alone = workers.is_empty().then(W::Worker::default);
        // The result to write next, in sequence: errors too are taken in sequence, so the one returned
        // is the first. None when every worker has ended and no result is left.
        let next_in_order = |written: u64| -> Option<Result<W::Done>> {
            if let Some(worker) = &mut alone {
                return shared.next(worker).map(|(_, done)| done);
            }
            let mut queue = lock(&shared.queue);
            loop {
                if let Some(at) = queue.done.iter().position(|&(seq, _)| seq == written) {
                    return Some(queue.done.swap_remove(at).1);
                }
                if queue.workers == 0 {
                    return None;
                }
                queue = shared
                    .ready
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        // A panic of the writer too stops the workers first: those waiting for room would otherwise
        // wait forever, and the scope for them.
        let result = catch_unwind(AssertUnwindSafe(|| write_all(shared, next_in_order, sink)));
        // On an error, workers stop at their next item.
        shared.stop();
        for worker in workers {
            if let Err(panic) = worker.join() {
                resume_unwind(panic);
            }
        }
        result.unwrap_or_else(|panic| resume_unwind(panic))
    })
}

/// Writes the results in sequence into `sink`, making room for one more item after each.
fn write_all<W: OrderedWork>(
    shared: &Shared<'_, W>,
    mut next_in_order: impl FnMut(u64) -> Option<Result<W::Done>>,
    sink: &mut dyn OrderedSink<W::Done>,
) -> Result<()> {
    let mut written = 0;
    while let Some(done) = next_in_order(written) {
        let out = sink.write(done?)?;
        written += 1;
        {
            let _room = lock(&shared.room_lock);
            shared.written.store(written, Ordering::Release);
            shared.room.notify_all();
        }
        lock(&shared.queue).spare_out.push(out);
        sink.written()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::time::Duration;

    /// Reads the numbers below `len`, as fast as it can, and counts the reads.
    struct Numbers {
        len: u64,
        read: AtomicU64,
    }

    impl OrderedWork for Numbers {
        type Reader = u64;
        type Worker = ();
        type Item = u64;
        type Done = u64;

        fn read(&self, next: &mut u64, _: &mut ()) -> Option<Result<u64>> {
            (*next < self.len).then(|| {
                *next += 1;
                self.read.fetch_add(1, Ordering::SeqCst);
                Ok(*next - 1)
            })
        }

        fn work(&self, item: u64, _: &mut (), _: Vec<u8>) -> Result<u64> {
            Ok(item)
        }
    }

    /// A slow writer that checks the order, and the most items read but not yet written.
    struct SlowSink<'a> {
        numbers: &'a Numbers,
        written: u64,
        most_in_flight: u64,
        fail_at: Option<u64>,
    }

    impl SlowSink<'_> {
        fn new(numbers: &Numbers, fail_at: Option<u64>) -> SlowSink<'_> {
            SlowSink {
                numbers,
                written: 0,
                most_in_flight: 0,
                fail_at,
            }
        }
    }

    impl OrderedSink<u64> for SlowSink<'_> {
        fn write(&mut self, done: u64) -> Result<Vec<u8>> {
            assert_eq!(done, self.written, "written in sequence");
            std::thread::sleep(Duration::from_millis(2));
            let read = self.numbers.read.load(Ordering::SeqCst);
            self.most_in_flight = self.most_in_flight.max(read - self.written);
            self.written += 1;
            if self.fail_at == Some(done) {
                return Err(Error::Interrupted);
            }
            Ok(Vec::new())
        }

        fn written(&mut self) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_slow_writer_holds_the_readers_to_the_window() {
        for (threads, window) in [(0, 1), (1, 2), (4, 8), (3, 1)] {
            let numbers = Numbers {
                len: 200,
                read: AtomicU64::new(0),
            };
            let mut sink = SlowSink::new(&numbers, None);
            run_ordered(&numbers, 0, threads, window, &mut sink).unwrap();
            assert_eq!(sink.written, 200);
            assert!(
                sink.most_in_flight <= window as u64,
                "{threads} threads, window {window}: {} items read ahead of the writer",
                sink.most_in_flight
            );
        }
    }

    /// Panics on writing item `at`.
    struct PanickingSink(u64);

    impl OrderedSink<u64> for PanickingSink {
        fn write(&mut self, done: u64) -> Result<Vec<u8>> {
            if done == self.0 {
                resume_unwind(Box::new("the writer's panic, on purpose"));
            }
            Ok(Vec::new())
        }

        fn written(&mut self) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_panic_in_writing_reaches_the_caller_rather_than_leave_the_workers_waiting() {
        let numbers = Numbers {
            len: 1000,
            read: AtomicU64::new(0),
        };
        // Window 2: the workers are soon waiting for room that the writer will never make.
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            let _ = run_ordered(&numbers, 0, 3, 2, &mut PanickingSink(5));
        }));
        let message = panicked.unwrap_err();
        assert_eq!(
            message.downcast_ref::<&str>(),
            Some(&"the writer's panic, on purpose")
        );
        assert!(numbers.read.load(Ordering::SeqCst) <= 5 + 2);
    }

    #[test]
    fn an_error_in_writing_stops_the_reading() {
        let numbers = Numbers {
            len: 1000,
            read: AtomicU64::new(0),
        };
        let mut sink = SlowSink::new(&numbers, Some(10));
        let err = run_ordered(&numbers, 0, 3, 6, &mut sink).unwrap_err();
        assert!(matches!(err, Error::Interrupted), "{err}");
        assert_eq!(sink.written, 11);
        assert!(numbers.read.load(Ordering::SeqCst) <= 11 + 6);
    }
}
