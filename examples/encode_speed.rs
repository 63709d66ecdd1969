//! Encoding throughput of the engine alone (no Python), one thread: the first call, and the best of
//! two more:
//!
//!     cargo run --release --example encode_speed -- VOCAB.json MERGES.txt TEXT MB [CALLS]
//!
//! (CALLS, 3 by default, is how many calls to time: 1 profiles the first call alone.)
//!
//! For profiling the encoder (e.g. under `valgrind --tool=callgrind`); the peer comparison is
//! `benchmarks/encode.py`.
use std::collections::HashMap;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (calls, args) = match &args[..] {
        [a @ .., calls] if a.len() == 5 => (calls.parse::<usize>().unwrap().max(1), a),
        a => (3, a),
    };
    let [_, vocab_path, merges_path, text_path, mb] = args else {
        panic!("usage: encode_speed VOCAB.json MERGES.txt TEXT MB [CALLS]");
    };
    let table = gpt2_unicode_to_byte();
    let decode = |s: &str| -> Vec<u8> { s.chars().map(|c| table[&c]).collect() };
    let vocab: HashMap<String, u32> =
        serde_json::from_str(&std::fs::read_to_string(vocab_path).unwrap()).unwrap();
    let vocab: Vec<(u32, Vec<u8>)> = vocab.iter().map(|(t, &id)| (id, decode(t))).collect();
    let merges: Vec<(Vec<u8>, Vec<u8>)> = std::fs::read_to_string(merges_path)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("#version"))
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (decode(a), decode(b))
        })
        .collect();
    let encoder = bytepair::Encoder::new(&vocab, &merges, &["<|endoftext|>".to_string()]).unwrap();
    let bytes = std::fs::read(text_path).unwrap();
    let mut end = (mb.parse::<usize>().unwrap() << 20).min(bytes.len());
    while end < bytes.len() && (bytes[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let text = std::str::from_utf8(&bytes[..end]).unwrap();
    // The first call finds the encoder's caches empty, as `benchmarks/encode.py` does (one call per
    // process); the later ones find them filled by the same text.
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..calls {
        let t = Instant::now();
        let mut ids = Vec::new();
        encoder.encode(text, &mut ids).unwrap();
        times.push(t.elapsed().as_secs_f64());
        n = ids.len();
    }
    let mb = end as f64 / 1e6;
    let best = times[1..].iter().copied().fold(f64::NAN, f64::min);
    println!(
        "{mb:.0} MB, {n} ids: cold {:.1} MB/s, warm {:.1} MB/s",
        mb / times[0],
        mb / best
    );
}

/// GPT-2's byte-to-character table, inverted.
fn gpt2_unicode_to_byte() -> HashMap<char, u8> {
    let mut bytes: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut chars = bytes.clone();
    for b in 0..256u32 {
        if !bytes.contains(&b) {
            bytes.push(b);
            chars.push(256 + (chars.len() - 188) as u32); // 188 printable bytes map to themselves
        }
    }
    bytes
        .iter()
        .zip(chars)
        .map(|(&b, c)| (char::from_u32(c).unwrap(), b as u8))
        .collect()
}
