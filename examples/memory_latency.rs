//! The machine's latency of dependent loads, at working sets from L2's size to far past L3's, on 4 KB
//! pages and on 2 MB pages (where the kernel grants them):
//!
//!     cargo run --release --example memory_latency
//!
//! The encoder's large tables (the vocabulary, the pair ranks, the workers' table of pieces) are read
//! at random, so its speed against a peer's depends on what a load that misses costs on the machine
//! at the time; a host whose other tenants fill the shared L3 or its memory bus moves the ratios. Run
//! it beside a benchmark and keep its lines with the benchmark's figures.

use std::time::Instant;

/// A random cyclic permutation of `n` slots (Sattolo's algorithm): following it from any slot visits
/// every slot once, each load's address depending on the load before.
fn cycle(next: &mut [usize], seed: &mut u64) {
    for (i, slot) in next.iter_mut().enumerate() {
        *slot = i;
    }
    for i in (1..next.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        next.swap(i, (*seed % i as u64) as usize);
    }
}

/// Nanoseconds a load over `bytes` of memory, on 2 MB pages when `huge`.
fn latency(bytes: usize, huge: bool, seed: &mut u64) -> f64 {
    let mut next: Vec<usize> = Vec::with_capacity(bytes / 8);
    if huge {
        advise_huge_pages(next.as_ptr() as usize, bytes);
    }
    next.resize(bytes / 8, 0);
    cycle(&mut next, seed);
    let steps = (next.len() * 4).clamp(2_000_000, 20_000_000);
    let (mut at, start) = (0, Instant::now());
    for _ in 0..steps {
        at = next[at];
    }
    let ns = start.elapsed().as_secs_f64() * 1e9 / steps as f64;
    std::hint::black_box(at);
    ns
}

/// `MADV_HUGEPAGE` on the whole 4 KB pages of `len` bytes at `ptr`, before their first write (which
/// is when the kernel picks their size); advice only.
fn advise_huge_pages(ptr: usize, len: usize) {
    #[cfg(target_os = "linux")]
    {
        let (start, end) = (ptr.next_multiple_of(4096), (ptr + len) / 4096 * 4096);
        if end > start {
            // SAFETY: the range lies inside this process's allocation, and the advice does not change
            // its contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len);
}

fn main() {
    let mut seed = 0x2545_F491_4F6C_DD1D;
    for mb in [0.25, 4.0, 24.0, 256.0] {
        let bytes = (mb * (1 << 20) as f64) as usize;
        let small = latency(bytes, false, &mut seed);
        let huge = latency(bytes, true, &mut seed);
        println!("{mb:>6} MB: {small:6.1} ns a load on 4 KB pages, {huge:6.1} ns on 2 MB pages");
    }
}
