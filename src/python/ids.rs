//! `bytepair._core.Ids`: token ids that Python reads in place through the buffer protocol, so that
//! `numpy.frombuffer(ids, numpy.uint32)` is an array of them without a copy (`encode_to_numpy`).
//!
//! A list of ids costs a pointer and a reference count per id, in memory the call touches for the
//! first time; an array costs the 4 bytes the engine wrote. The array keeps the `Ids` alive (its
//! `base`), and the memory is freed with the last of them.
//!
//! Invariants: the memory is that of a `Vec<u32>` given up by it (pointer, length, capacity) and taken
//! back only when the object is freed; Rust never reads or writes it in between, so that the buffer can
//! be exported writable (NumPy arrays are writable by default) without Rust holding a reference that
//! writes through it would break.

use std::ffi::c_int;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use pyo3::ffi;
use pyo3::prelude::*;

/// The ids of one call, exported as a writable buffer of native-endian `uint32`s (bytes, format `B`:
/// `numpy.frombuffer` is given the dtype).
#[pyclass(frozen, name = "Ids", module = "bytepair._core")]
pub(super) struct Ids {
    ptr: NonNull<u32>,
    len: usize,
    cap: usize,
}

// SAFETY: `Ids` owns its memory alone (no Rust reference to it exists), like the `Vec<u32>` it was;
// what Python does with the exported buffer is Python's, as for a bytearray.
unsafe impl Send for Ids {}
// SAFETY: as above; the object's fields never change.
unsafe impl Sync for Ids {}

impl Ids {
    /// Takes `ids` over, shrunk to its length: the engine reserves for the most ids a text can have
    /// (one per byte), and an array a caller keeps should not hold that.
    pub(super) fn new(mut ids: Vec<u32>) -> Ids {
        // Shrinking moves no data for a large block (glibc remaps it) and needs no new memory.
        ids.shrink_to_fit();
        let mut ids = ManuallyDrop::new(ids);
        Ids {
            ptr: NonNull::new(ids.as_mut_ptr()).unwrap_or(NonNull::dangling()),
            len: ids.len(),
            cap: ids.capacity(),
        }
    }
}

impl Drop for Ids {
    fn drop(&mut self) {
        // SAFETY: the parts of the vector `new` gave up, not used since (no buffer can outlive the
        // object: each export holds a reference to it).
        drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.cap) });
    }
}

#[pymethods]
impl Ids {
    /// The buffer protocol: the ids' bytes, writable, with this object as the owner.
    ///
    /// # Safety
    ///
    /// `view` is the `Py_buffer` the interpreter passes to `bf_getbuffer`.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        let bytes = (this.len * size_of::<u32>()) as ffi::Py_ssize_t;
        // SAFETY: PyBuffer_FillInfo fills `view` for a one-dimensional buffer of bytes at `ptr`
        // (allocated and alive while `slf` is, which it references through `view.obj`), honouring
        // `flags`; it fails, with an exception set, only for a null `view`.
        let filled = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                this.ptr.as_ptr().cast(),
                bytes,
                0,
                flags,
            )
        };
        match filled {
            0 => Ok(()),
            _ => Err(PyErr::fetch(slf.py())),
        }
    }

    /// The number of ids.
    fn __len__(&self) -> usize {
        self.len
    }
}
