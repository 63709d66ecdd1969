//! JSON lines: reading the documents of any bytes named `.jsonl` returns a result or an error, never a
//! panic or a memory error (libFuzzer's sanitizer watches the one-pass reader's unchecked stores), and
//! when every line is JSON that serde_json reads, each line gives exactly serde_json's text of its
//! `text` field, or is skipped as bad when it has none.
//!
//! The seeds (`corpus/jsonl/`) are records as datasets write them, with escapes of every kind.

#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use bytepair::{open_documents, DocumentOptions, Errors, Piece, Silent, SourceKind, SpecialTokens};
use libfuzzer_sys::fuzz_target;

/// The file each input is written to, one per process.
fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("bytepair-fuzz-{}.jsonl", std::process::id()))
    })
}

/// What serde_json says of each line that is not blank: Some(the text field's string) or None (an
/// object without it, or not an object); None for the whole input when a line is not JSON it reads.
fn expected(data: &[u8]) -> Option<Vec<Option<String>>> {
    let lines = data.strip_suffix(b"\n").unwrap_or(data);
    let mut out = Vec::new();
    for line in lines.split(|&b| b == b'\n') {
        if line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
            continue;
        }
        let value: serde_json::Value = serde_json::from_slice(line).ok()?;
        out.push(
            value
                .get("text")
                .and_then(|t| t.as_str())
                .map(str::to_string),
        );
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let path = path();
    std::fs::write(path, data).unwrap();
    let kind = SourceKind::of(path).unwrap();
    let specials = SpecialTokens::new(&["<|s|>"]).unwrap();
    let options = DocumentOptions {
        specials: &specials,
        text_field: "text",
        errors: Errors::Skip,
        chunk_size: 64,
    };
    let mut reader = open_documents(path, kind, &options, &Silent).unwrap();
    let (mut texts, mut skipped) = (Vec::new(), 0);
    let mut piece = Piece::default();
    loop {
        let done = reader.read(&mut piece).unwrap();
        // Each document is checked to be UTF-8 (a debug assertion) as it is taken.
        texts.extend(piece.documents().map(str::to_string));
        skipped += piece.skipped;
        if done {
            break;
        }
    }
    if let Some(expected) = expected(data) {
        let good: Vec<String> = expected.iter().flatten().cloned().collect();
        assert_eq!(texts, good);
        assert_eq!(skipped as usize, expected.len() - good.len());
    }
});
