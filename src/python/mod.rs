//! The Python binding, `bytepair._core` (feature `python`), and the conversions only it needs.
//!
//! `cargo test` builds the parts that do not call into Python (string conversion, huge pages) too, so
//! that their tests run without linking a Python library.

#[cfg(feature = "python")]
mod binding;
mod huge_pages;
mod strings;
