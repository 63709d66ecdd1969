//! Where counting JSON lines with zstd spends its time, against the same text as one txt:
//!
//!     cargo run --release --example jsonl_costs -- LIST TXT ROUNDS THREADS
//!
//! `LIST` is a file naming `.jsonl.zst` files, one a line; `TXT` holds their documents joined by
//! `<|endoftext|>` (`scale.py count` cuts it into `DIR/by-format/jsonl.zst.txt`). Each round times, in
//! CPU seconds of the process (all threads) and wall seconds: zstd alone (decompressing every file,
//! one thread), zstd and JSON (reading every file's documents, one thread), counting the files on
//! `THREADS` threads, and counting the txt. The first two bound what counting the shards can cost
//! beyond counting the txt.

use std::io::Read;
use std::path::PathBuf;
use std::time::Instant;

use bytepair::{
    count_sources, open_documents, DocumentOptions, Errors, Piece, Silent, SourceKind,
    SourceOptions, SpecialTokens, DEFAULT_CHUNK_SIZE,
};

#[path = "support/cpu.rs"]
mod support;
use support::cpu;

/// CPU and wall seconds of `f`.
fn timed(f: impl FnOnce()) -> (f64, f64) {
    let (cpu0, wall0) = (cpu(), Instant::now());
    f();
    (cpu() - cpu0, wall0.elapsed().as_secs_f64())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, list, txt, rounds, threads] = &args[..] else {
        panic!("usage: jsonl_costs LIST TXT ROUNDS THREADS")
    };
    let files: Vec<PathBuf> = std::fs::read_to_string(list)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect();
    let txt = PathBuf::from(txt);
    let specials = SpecialTokens::new(&["<|endoftext|>"]).unwrap();
    let options = SourceOptions {
        specials: &specials,
        text_field: "text",
        errors: Errors::Strict,
        chunk_size: DEFAULT_CHUNK_SIZE,
        threads: threads.parse().unwrap(),
    };
    let shards: Vec<(PathBuf, SourceKind)> = files
        .iter()
        .map(|f| (f.clone(), SourceKind::of(f).unwrap()))
        .collect();
    let joined = [(txt.clone(), SourceKind::of(&txt).unwrap())];
    for round in 0..rounds.parse().unwrap() {
        let mut decompressed = 0;
        let zstd = timed(|| {
            let mut buf = vec![0u8; 1 << 20];
            for f in &files {
                let mut d = zstd::Decoder::new(std::fs::File::open(f).unwrap()).unwrap();
                loop {
                    match d.read(&mut buf).unwrap() {
                        0 => break,
                        n => decompressed += n,
                    }
                }
            }
        });
        let mut text = 0;
        let json = timed(|| {
            let options = DocumentOptions {
                specials: &specials,
                text_field: "text",
                errors: Errors::Strict,
                chunk_size: DEFAULT_CHUNK_SIZE,
            };
            let mut piece = Piece::default();
            for (f, kind) in &shards {
                let mut documents = open_documents(f, *kind, &options, &Silent).unwrap();
                loop {
                    let done = documents.read(&mut piece).unwrap();
                    text += piece.text_len();
                    if done {
                        break;
                    }
                }
            }
        });
        let mut counted = [0, 0];
        let count_shards = timed(|| {
            counted[0] = count_sources(&shards, &options, &Silent).unwrap().total();
        });
        let count_txt = timed(|| {
            counted[1] = count_sources(&joined, &options, &Silent).unwrap().total();
        });
        assert_eq!(
            counted[0], counted[1],
            "the shards and the txt count differently"
        );
        println!(
            "round {round}: {decompressed} bytes of JSON lines, {text} of text; cpu/wall s: zstd \
             {:.2}/{:.2}, zstd+JSON {:.2}/{:.2}, count shards {:.2}/{:.2}, count txt {:.2}/{:.2}",
            zstd.0,
            zstd.1,
            json.0,
            json.1,
            count_shards.0,
            count_shards.1,
            count_txt.0,
            count_txt.1
        );
    }
}
