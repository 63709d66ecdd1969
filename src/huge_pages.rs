//! Asking the kernel to back large, freshly allocated buffers with 2 MB pages: the ids of one text
//! ([`crate::Encoder::encode_to_vec`]), the workers' tables of pieces and training's words
//! ([`try_reserve`]), and in the binding the ids of `encode_to_numpy`, the array of a Python list of
//! ids and the UTF-8 copy of a `str`.
//!
//! Encoding a large text into a Python list writes several times its size in memory that was never
//! touched before: the ids (4 bytes each) and the list's array of pointers (8 bytes an id). With 4 KB
//! pages that is a page fault per 4 KB, each of which traps into the kernel, zeroes a page and maps it.
//! Linux's transparent huge pages serve a region marked `MADV_HUGEPAGE` with one fault per 2 MB (the
//! default `madvise` mode only does so for regions that ask). A buffer that stays on 4 KB pages can
//! have them mapped a stretch at a time instead ([`populate`]). Elsewhere this does nothing.

use crate::error::AllocError;

/// Buffers smaller than this are left alone: they span few pages, and may share them with other data.
pub const HUGE_BUFFER: usize = 4 << 20;

/// Marks the whole 4 KB pages of `len` bytes at `ptr` for huge pages. Advice only: it cannot fail in a
/// way that matters (an old kernel or one without transparent huge pages keeps 4 KB pages), and it
/// never changes the bytes.
pub fn advise(ptr: *const u8, len: usize) {
    if len >= HUGE_BUFFER {
        madvise_whole_pages(ptr, len, MADV_HUGEPAGE);
    }
}

/// Room for `n` more items in `v`, backed by huge pages where the kernel allows them (advice given
/// before the pages are first written, which is when the kernel picks their size).
pub(crate) fn try_reserve<T>(v: &mut Vec<T>, n: usize) -> Result<(), AllocError> {
    crate::error::try_reserve(v, n)?;
    advise(v.as_ptr().cast(), v.capacity() * size_of::<T>());
    Ok(())
}

/// Asks the kernel to map the whole 4 KB pages of `len` bytes at `ptr` at once (`MADV_POPULATE_WRITE`),
/// before they are written: one call instead of a page fault per page, for a buffer that stays on 4 KB
/// pages. Advice only, as [`advise`]: a kernel without it (before 5.14) faults the pages in as they
/// are written, and the bytes never change. Only the binding has a buffer that stays on 4 KB pages.
#[cfg(feature = "python")]
pub fn populate(ptr: *const u8, len: usize) {
    madvise_whole_pages(ptr, len, MADV_POPULATE_WRITE);
}

#[cfg(target_os = "linux")]
use libc::MADV_HUGEPAGE;
#[cfg(all(target_os = "linux", feature = "python"))]
use libc::MADV_POPULATE_WRITE;
#[cfg(not(target_os = "linux"))]
const MADV_HUGEPAGE: i32 = 0;
#[cfg(all(not(target_os = "linux"), feature = "python"))]
const MADV_POPULATE_WRITE: i32 = 0;

/// `madvise(advice)` on the 4 KB pages that lie wholly within `len` bytes at `ptr`, if any; nothing
/// elsewhere than Linux.
fn madvise_whole_pages(ptr: *const u8, len: usize, advice: i32) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = (ptr as usize).next_multiple_of(PAGE);
        let end = (ptr as usize + len) / PAGE * PAGE;
        if end > start {
            // SAFETY: both pieces of advice only change how the kernel maps pages of this process's
            // own mapping, [start, end) lies inside the caller's allocation, and neither changes
            // its contents.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, advice);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, len, advice);
}
