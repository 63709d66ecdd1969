//! Training's dealings with the memory system: loading what a loop will read a few steps ahead, and
//! giving freed memory back.
//!
//! Counting and merging are waits on memory: a lookup in a table of millions of keys, and a rewrite of
//! one word among millions, each miss the cache, one after another. Both loops know a few items ahead
//! where they will read, and start those loads early ([`crate::prefetch`]), so that several are in
//! flight at once.
//!
//! The words of millions of pre-tokens span far more 4 KB pages than the TLB maps, so each rewrite of a
//! word also walks the page tables, and a prefetch waits for that walk, so they are reserved on 2 MB
//! pages ([`crate::huge_pages::try_reserve`]), which one TLB entry each maps.
//!
//! glibc's `free` returns only the top of its heap to the system; memory freed below it stays resident
//! until malloc reuses it. Training frees large amounts in small and middle-sized blocks at a few moments
//! (the counts as the words replace them, the pairs a raised threshold drops), and without
//! [`return_freed_memory`] the process's resident size would keep them on top of what comes next.

/// Returns the free pages of the allocator's heaps to the system (glibc's `malloc_trim`; elsewhere
/// nothing). Costs a walk over the heap's free blocks: for the few moments above, not per allocation.
pub(super) fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer and only releases free memory of the allocator's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}
