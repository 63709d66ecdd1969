use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let mb: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(200);
    let bytes = std::fs::read(&path).unwrap();
    let mut end = (mb << 20).min(bytes.len());
    while end < bytes.len() && (bytes[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let text = std::str::from_utf8(&bytes[..end]).unwrap();
    let best = |f: &dyn Fn() -> usize| {
        (0..5)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    let n = bytepair::pretokenize(text).count();
    let scan = best(&|| bytepair::pretokenize(text).count());
    let specials = bytepair::SpecialTokens::new(&["<|endoftext|>"]).unwrap();
    let mut counts = bytepair::PreTokenCounts::default();
    bytepair::count_text(text, &specials, &mut counts);
    let count = best(&|| {
        let mut c = bytepair::PreTokenCounts::default();
        bytepair::count_text(text, &specials, &mut c);
        c.len()
    });
    let t = Instant::now();
    let v = std::str::from_utf8(text.as_bytes()).is_ok();
    let utf8 = t.elapsed().as_secs_f64();
    let mb = end as f64 / 1e6;
    println!("{mb:.0} MB, {n} pieces, {} distinct: scan {:.0} MB/s, scan+count {:.0} MB/s, utf8 {:.0} MB/s {v}", counts.len(), mb / scan, mb / count, mb/utf8);
}
