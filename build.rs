//! Build script: with the `python` feature, sets PyO3's cfgs for the target interpreter
//! (`Py_3_12`, `Py_3_14`, ...) so that `src/python/strings.rs` can read a `str`'s storage where the
//! interpreter's C API allows it and fall back where it does not.

fn main() {
    #[cfg(feature = "python")]
    pyo3_build_config::use_pyo3_cfgs();
}
