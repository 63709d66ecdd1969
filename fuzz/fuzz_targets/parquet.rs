//! Damaged Parquet files: counting and reading the documents of any bytes named `.parquet` returns a
//! result or an error, never a panic that escapes or an abort.
//!
//! The seeds (`corpus/parquet/`) are small files written by pyarrow with each codec and encoding; the
//! fuzzer damages them. The decoder (arrow-rs) may panic on data it does not expect: the reader catches
//! that and reports the file as damaged, so the panic hook here is silent rather than libFuzzer's, which
//! aborts on any panic, caught or not.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use bytepair::{
    count_sources, open_documents, DocumentOptions, Errors, Piece, Silent, SourceKind,
    SourceOptions, SpecialTokens,
};
use libfuzzer_sys::fuzz_target;

/// The file each input is written to, one per process.
fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::panic::set_hook(Box::new(|_| {}));
        std::env::temp_dir().join(format!("bytepair-fuzz-{}.parquet", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let path = path();
    std::fs::write(path, data).unwrap();
    let kind = SourceKind::of(path).unwrap();
    let specials = SpecialTokens::new(&["<|s|>"]).unwrap();
    for errors in [Errors::Strict, Errors::Skip] {
        let options = SourceOptions {
            specials: &specials,
            text_field: "text",
            errors,
            chunk_size: 64,
            threads: 2,
        };
        let _ = count_sources(&[(path, kind)], &options, &Silent);
        let options = DocumentOptions {
            specials: &specials,
            text_field: "text",
            errors,
            chunk_size: 64,
        };
        if let Ok(mut reader) = open_documents(path, kind, &options, &Silent) {
            let mut piece = Piece::default();
            while let Ok(false) = reader.read(&mut piece) {}
        }
    }
});
