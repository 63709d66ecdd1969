//! Encoding throughput of the engine alone, one thread, best of 3: `encode_speed VOCAB.json MERGES.txt TEXT MB`.
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let table = gpt2_table();
    let decode = |s: &str| -> Vec<u8> { s.chars().map(|c| table[&c]).collect() };
    let vocab_text = std::fs::read_to_string(&args[1]).unwrap();
    let mut vocab = Vec::new();
    // A tiny parser for {"token": id, ...} lines, good enough for GPT-2's encoder.json.
    let body = vocab_text
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}');
    let mut rest = body;
    while let Some(start) = rest.find('"') {
        let mut end = start + 1;
        let bytes = rest.as_bytes();
        while bytes[end] != b'"' {
            if bytes[end] == b'\\' {
                end += 1;
            }
            end += 1;
        }
        let key: String = serde_unescape(&rest[start + 1..end]);
        let after = &rest[end + 1..];
        let colon = after.find(':').unwrap();
        let num_end = after[colon + 1..]
            .find(|c: char| c == ',' || c == '}')
            .map(|i| colon + 1 + i)
            .unwrap_or(after.len());
        let id: u32 = after[colon + 1..num_end].trim().parse().unwrap();
        vocab.push((id, decode(&key)));
        rest = &after[num_end..];
    }
    let merges: Vec<(Vec<u8>, Vec<u8>)> = std::fs::read_to_string(&args[2])
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("#version"))
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (decode(a), decode(b))
        })
        .collect();
    let enc = bytepair::Encoder::new(vocab, &merges, &["<|endoftext|>".to_string()]).unwrap();
    let mb: usize = args[4].parse().unwrap();
    let bytes = std::fs::read(&args[3]).unwrap();
    let mut end = (mb << 20).min(bytes.len());
    while end < bytes.len() && (bytes[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let text = std::str::from_utf8(&bytes[..end]).unwrap();
    let mut best = f64::MAX;
    let mut n = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let mut out = Vec::new();
        enc.encode(text, &mut out);
        best = best.min(t.elapsed().as_secs_f64());
        n = out.len();
    }
    println!(
        "{:.0} MB, {n} ids: {:.1} MB/s",
        end as f64 / 1e6,
        end as f64 / 1e6 / best
    );
}
fn serde_unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next().unwrap() {
            'u' => {
                let h: String = chars.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&h, 16).unwrap()).unwrap());
            }
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            other => out.push(other),
        }
    }
    out
}
fn gpt2_table() -> std::collections::HashMap<char, u8> {
    let mut bs: Vec<u32> = (b'!' as u32..=b'~' as u32)
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut cs = bs.clone();
    let mut n = 0;
    for b in 0..256u32 {
        if !bs.contains(&b) {
            bs.push(b);
            cs.push(256 + n);
            n += 1;
        }
    }
    bs.iter()
        .zip(cs)
        .map(|(&b, c)| (char::from_u32(c).unwrap(), b as u8))
        .collect()
}
