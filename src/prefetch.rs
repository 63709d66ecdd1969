//! [`prefetch`]: loading a cache line a loop will read a few steps ahead.
//!
//! Counting, merging and encoding look keys up in tables of megabytes, and each lookup that misses the
//! caches waits on memory. A loop that knows where it will read before it reads there (a batch of
//! pieces, the next words, a second table asked after a first) starts those loads early, so that
//! several are in flight at once instead of one after another.

/// Asks the CPU to start loading the cache line at `p` (x86-64; elsewhere nothing).
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing into the program and cannot fault, whatever `p`.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
