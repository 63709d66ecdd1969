//! Python objects made from Rust values, and Rust values from Python sequences, so that running out of
//! memory is a `MemoryError` and never an abort or a panic.

use pyo3::exceptions::PyMemoryError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use super::errors::alloc_err;
use crate::error::try_reserve;

// Python objects are made here with the C API and checked, never with PyO3's `new` and conversions of
// return values, which panic when the interpreter cannot allocate (PyO3 prints the panic on stderr and
// raises PanicException): out of memory must be a MemoryError. Lists and tuples are filled in place,
// and one dropped before it is full frees the items it has (its empty slots are NULL).

/// A Python int.
pub(super) fn int(py: Python<'_>, value: u64) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: a new reference or NULL with an exception set, which `from_owned_ptr_or_err` takes.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyLong_FromUnsignedLongLong(value)) }
}

/// A Python str of `text`.
pub(super) fn string<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: as in `int`; the pointer and length describe `text`, valid UTF-8.
    unsafe {
        let (ptr, len) = (text.as_ptr().cast(), text.len() as ffi::Py_ssize_t);
        Bound::from_owned_ptr_or_err(py, ffi::PyUnicode_FromStringAndSize(ptr, len))
    }
}

/// A Python bytes of `bytes`.
pub(super) fn bytes<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, bytes.len(), |buf| {
        buf.copy_from_slice(bytes);
        Ok(())
    })
}

/// A Python list of `len` items from `item(i)`, or the first error it gives.
pub(super) fn list<'py>(
    py: Python<'py>,
    len: usize,
    mut item: impl FnMut(usize) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let size =
        ffi::Py_ssize_t::try_from(len).map_err(|_| PyMemoryError::new_err("list too long"))?;
    // SAFETY: PyList_New gives a new reference to a list of `len` NULL slots (checked for NULL).
    // PyList_SET_ITEM stores into slot i < len the reference `into_ptr` hands over. A list dropped with
    // slots still NULL is freed correctly (list_dealloc skips NULL items).
    unsafe {
        let list = Bound::from_owned_ptr_or_err(py, ffi::PyList_New(size))?;
        for i in 0..len {
            ffi::PyList_SET_ITEM(list.as_ptr(), i as ffi::Py_ssize_t, item(i)?.into_ptr());
        }
        Ok(list.cast_into_unchecked())
    }
}

/// A Python list of the strs `items`.
pub(super) fn str_list<'py>(
    py: Python<'py>,
    items: &[impl AsRef<str>],
) -> PyResult<Bound<'py, PyList>> {
    list(py, items.len(), |i| string(py, items[i].as_ref()))
}

/// A Python tuple of `items`.
pub(super) fn tuple<'py, const N: usize>(
    py: Python<'py>,
    items: [Bound<'py, PyAny>; N],
) -> PyResult<Bound<'py, PyTuple>> {
    // SAFETY: as in `list`, for a tuple of N slots, each set once.
    unsafe {
        let tuple = Bound::from_owned_ptr_or_err(py, ffi::PyTuple_New(N as ffi::Py_ssize_t))?;
        for (i, item) in items.into_iter().enumerate() {
            ffi::PyTuple_SET_ITEM(tuple.as_ptr(), i as ffi::Py_ssize_t, item.into_ptr());
        }
        Ok(tuple.cast_into_unchecked())
    }
}

/// The items of `seq` (a list or tuple) of length `len`, each made by `item`, in a vector reserved
/// fallibly: PyO3's extraction of a `Vec` reserves with `Vec::with_capacity`, which aborts the process
/// when it fails.
pub(super) fn collect<'py, T>(
    seq: &Bound<'py, PyAny>,
    what: &'static str,
    mut item: impl FnMut(Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    let mut items = Vec::new();
    try_reserve(&mut items, seq.len()?).map_err(alloc_err(what))?;
    for x in seq.try_iter()? {
        items.push(item(x?)?);
    }
    Ok(items)
}
