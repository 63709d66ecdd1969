//! What reading a dataset's shards costs before any encoding: the documents of each listed file read
//! (decompressed, parsed, checked to be UTF-8) into pieces as `encode_dataset`'s workers read them,
//! on one thread, timed in CPU and wall seconds:
//!
//!     cargo run --release --example read_costs -- ROUNDS FILE...
//!
//! Files of one format are timed together (`jsonl.zst`, `parquet`, ...), a round after another. Set
//! beside `encode_dataset`'s CPU time on the same files and `encode_file`'s on their text as one txt
//! (`benchmarks/shards.py --against-file`), it bounds how close the first can come to the second on two
//! busy cores: it does the same encoding and this reading besides.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use bytepair::{
    open_documents, DocumentOptions, Errors, Piece, Silent, SourceKind, SpecialTokens,
    DEFAULT_CHUNK_SIZE,
};

#[path = "support/cpu.rs"]
mod support;
use support::cpu;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, rounds, files @ ..] = &args[..] else {
        panic!("usage: read_costs ROUNDS FILE...")
    };
    let specials = SpecialTokens::new(&["<|endoftext|>"]).unwrap();
    let options = DocumentOptions {
        specials: &specials,
        text_field: "text",
        errors: Errors::Strict,
        chunk_size: DEFAULT_CHUNK_SIZE,
    };
    // The files by format, named by their suffix after the first dot.
    let mut formats: BTreeMap<String, Vec<(PathBuf, SourceKind)>> = BTreeMap::new();
    for f in files {
        let path = PathBuf::from(f);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let suffix = name.split_once('.').map_or("", |(_, s)| s).to_string();
        let kind = SourceKind::of(&path).unwrap();
        formats.entry(suffix).or_default().push((path, kind));
    }
    for round in 0..rounds.parse().unwrap() {
        for (format, files) in &formats {
            let (cpu0, wall0) = (cpu(), Instant::now());
            let (mut input, mut text) = (0, 0);
            let mut piece = Piece::default();
            for (f, kind) in files {
                let mut documents = open_documents(f, *kind, &options, &Silent).unwrap();
                loop {
                    let done = documents.read(&mut piece).unwrap();
                    input += piece.input_bytes;
                    text += piece.text_len();
                    if done {
                        break;
                    }
                }
            }
            let (cpu, wall) = (cpu() - cpu0, wall0.elapsed().as_secs_f64());
            println!(
                "round {round}: {} {format} files, {input} bytes read, {text} of text: \
                 {cpu:.2} s CPU, {wall:.2} s wall, {:.0} MB/s of text",
                files.len(),
                text as f64 / 1e6 / cpu
            );
        }
    }
}
