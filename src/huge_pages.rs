//! How large buffers get their pages: 2 MB pages for the tables read at random ([`try_reserve`]: the
//! workers' tables of pieces, training's words), and 4 KB pages mapped ahead a stretch at a time for
//! the buffers written once, in order ([`MapAhead`] and [`populate_spare`] where the final length is
//! not known, [`populate`] where it is: the ids of a text, the array of a Python list of ids, the UTF-8
//! copy of a `str`).
//!
//! A table read at random over megabytes misses the TLB on 4 KB pages (`encode_file` ran 5% slower on
//! C, and 7% on prose even with the pages mapped ahead, with the workers' tables on them), and lives for
//! a whole call or longer, so the cost of its first touch is paid once. A buffer written in order misses the TLB little, but its pages are new on every
//! call: on 4 KB pages each is a fault, a trap into the kernel that zeroes and maps it, unless they are
//! mapped a stretch at a time beforehand (`MADV_POPULATE_WRITE`, one call for many pages). Such a
//! buffer stays off 2 MB pages: a 2 MB page is a whole free block of memory, and in a virtual machine
//! that reports free memory to its host (virtio-balloon's free page reporting, common in clouds) the
//! host has taken back exactly the free blocks of 2 MB and more, so the first write of each such page
//! waits for the host to map it again. On this project's VM, 28 MB written on 2 MB pages took 5 ms
//! in a fresh process and 70-80 ms once the process had used some memory, against 14-18 ms on 4 KB
//! pages and 11-15 ms mapped ahead; `encode_to_numpy` on 20 MB of prose after another 20 MB ran 1.4x
//! as fast with its ids mapped ahead as on 2 MB pages (`benchmarks/README.md`, thirty-sixth session).
//! Elsewhere than Linux this does nothing.

use crate::error::AllocError;

/// Buffers smaller than this are left alone: they span few pages, and may share them with other data.
pub const HUGE_BUFFER: usize = 4 << 20;

/// Marks the whole 4 KB pages of `len` bytes at `ptr` for huge pages. Advice only: it cannot fail in a
/// way that matters (an old kernel or one without transparent huge pages keeps 4 KB pages), and it
/// never changes the bytes.
fn advise(ptr: *const u8, len: usize) {
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
/// are written, and the bytes never change.
pub fn populate(ptr: *const u8, len: usize) {
    madvise_whole_pages(ptr, len, MADV_POPULATE_WRITE);
}

/// Maps the pages of the next `n` items of `v`'s spare room at once ([`populate`]), when `v`'s room is
/// of [`HUGE_BUFFER`] bytes or more: for a buffer written in order whose final length is not known,
/// called before each stretch with about the items the stretch will write, so that few pages are
/// mapped and never written.
pub(crate) fn populate_spare<T>(v: &Vec<T>, n: usize) {
    if let Some(bytes) = spare_to_map(v.len(), v.capacity(), size_of::<T>(), n) {
        populate(v.as_ptr().wrapping_add(v.len()).cast(), bytes);
    }
}

/// A buffer written a stretch at a time, in order, whose pages are mapped before each stretch
/// ([`populate_spare`]): as many items as the last stretch wrote, and half again (none before the first).
#[derive(Default)]
pub(crate) struct MapAhead {
    last: usize,
}

impl MapAhead {
    /// Maps the pages the next stretch of `v` will likely take, runs `write` (which appends that
    /// stretch), and keeps how many items it appended.
    pub(crate) fn write<T, R>(
        &mut self,
        v: &mut Vec<T>,
        write: impl FnOnce(&mut Vec<T>) -> R,
    ) -> R {
        populate_spare(v, self.last + self.last / 2);
        let before = v.len();
        let written = write(v);
        self.last = v.len().saturating_sub(before);
        written
    }
}

/// The bytes past the end of `len` items of `size` bytes that [`populate_spare`] maps for `n` more, in
/// room for `capacity`: none for a buffer under [`HUGE_BUFFER`], and never past the room.
fn spare_to_map(len: usize, capacity: usize, size: usize, n: usize) -> Option<usize> {
    (capacity * size >= HUGE_BUFFER).then(|| n.min(capacity - len) * size)
}

#[cfg(target_os = "linux")]
use libc::MADV_HUGEPAGE;
#[cfg(target_os = "linux")]
use libc::MADV_POPULATE_WRITE;
#[cfg(not(target_os = "linux"))]
const MADV_HUGEPAGE: i32 = 0;
#[cfg(not(target_os = "linux"))]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spare_room_mapped_is_the_next_items_within_the_room_of_a_large_buffer() {
        let room = HUGE_BUFFER / 4;
        assert_eq!(spare_to_map(1000, room, 4, 300), Some(1200));
        assert_eq!(
            spare_to_map(room - 10, room, 4, 300),
            Some(40),
            "never past the room"
        );
        assert_eq!(spare_to_map(room, room, 4, 300), Some(0));
        assert_eq!(
            spare_to_map(0, room - 1, 4, 300),
            None,
            "a buffer under HUGE_BUFFER"
        );
        assert_eq!(
            spare_to_map(0, HUGE_BUFFER, 1, usize::MAX),
            Some(HUGE_BUFFER)
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod linux_tests {
    use super::*;

    const PAGE: usize = 4096;

    /// Whether the 4 KB page that holds `at` is mapped in (`mincore`).
    fn resident(at: *const u8) -> bool {
        let page = (at as usize) / PAGE * PAGE;
        let mut state = 0u8;
        // SAFETY: `page` is page-aligned, inside a mapping of this process (the caller's buffer), and
        // `mincore` writes one byte for the one page asked about.
        let done = unsafe { libc::mincore(page as *mut libc::c_void, PAGE, &mut state) };
        assert_eq!(done, 0, "mincore");
        state & 1 == 1
    }

    /// Whether this kernel maps pages ahead at all (`MADV_POPULATE_WRITE` came with Linux 5.14).
    fn kernel_populates() -> bool {
        let mut probe: Vec<u8> = Vec::with_capacity(2 * PAGE);
        let page = (probe.as_mut_ptr() as usize).next_multiple_of(PAGE);
        // SAFETY: the page lies within `probe`'s allocation; the advice does not change its bytes.
        unsafe { libc::madvise(page as *mut libc::c_void, PAGE, MADV_POPULATE_WRITE) == 0 }
    }

    #[test]
    fn the_whole_pages_asked_for_are_mapped_and_no_others() {
        if !kernel_populates() {
            return;
        }
        const LEN: usize = 64 * PAGE;
        // SAFETY: a new private anonymous mapping, unmapped below; nothing else uses it.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        let base = map.cast::<u8>().cast_const();
        // From the middle of page 10 to the middle of page 30: pages 11 to 29 lie wholly within.
        populate(base.wrapping_add(10 * PAGE + 100), 20 * PAGE);
        let mapped: Vec<bool> = (0..64)
            .map(|p| resident(base.wrapping_add(p * PAGE)))
            .collect();
        let expected: Vec<bool> = (0..64).map(|p| (11..30).contains(&p)).collect();
        // SAFETY: pages 11 to 29 of the mapping, readable; mapped already, so reading them after
        // `mincore` changes nothing it saw.
        let zero = unsafe { std::slice::from_raw_parts(base.wrapping_add(11 * PAGE), 19 * PAGE) }
            .iter()
            .all(|&b| b == 0);
        // SAFETY: the mapping made above, of `LEN` bytes.
        unsafe { libc::munmap(map, LEN) };
        assert_eq!(mapped, expected);
        assert!(zero, "the bytes are unchanged");
    }

    #[test]
    fn each_stretch_has_half_again_the_last_ones_items_mapped_before_it() {
        if !kernel_populates() {
            return;
        }
        let mut ids: Vec<u32> = Vec::with_capacity(4 << 20);
        let mut ahead = MapAhead::default();
        let at = |v: &Vec<u32>, i: usize| v.as_ptr().wrapping_add(i).cast::<u8>();
        // A first stretch of 100,000 items; the second has the pages of the next 150,000 mapped.
        // (Whether pages past them are mapped depends on what malloc served the room from; the
        // test of `populate` on a mapping of its own checks that no others are.)
        ahead.write(&mut ids, |v| v.resize(100_000, 1));
        ahead.write(&mut ids, |v| {
            assert!((100_000 + 1024..250_000 - 1024)
                .step_by(1024)
                .all(|i| resident(at(v, i))));
            v.resize(120_000, 2);
        });
        assert_eq!(ids.len(), 120_000);
        assert!(
            ids[..100_000].iter().all(|&id| id == 1) && ids[100_000..].iter().all(|&id| id == 2)
        );
    }

    #[test]
    fn the_pages_of_a_vectors_next_items_are_mapped() {
        if !kernel_populates() {
            return;
        }
        let mut ids: Vec<u32> = Vec::with_capacity(4 << 20);
        ids.extend_from_slice(&[7; 1000]);
        populate_spare(&ids, 300_000);
        let at = |i: usize| ids.as_ptr().wrapping_add(i).cast::<u8>();
        assert!((1000 + 1024..1000 + 299_000)
            .step_by(1024)
            .all(|i| resident(at(i))));
        assert_eq!(ids, [7; 1000], "the items written are unchanged");
    }
}
