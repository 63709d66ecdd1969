//! Pre-tokenization and counting throughput on one thread, best of 5:
//!
//!     cargo run --release --example count_speed -- TEXT MB
//!
//! Splits the time of training's first phase between the scanner and the counting behind it.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, mb] = &args[..] else {
        panic!("usage: count_speed TEXT MB")
    };
    let bytes = std::fs::read(path).unwrap();
    let mut end = (mb.parse::<usize>().unwrap() << 20).min(bytes.len());
    while end < bytes.len() && (bytes[end] & 0xC0) == 0x80 {
        end += 1;
    }
    let text = std::str::from_utf8(&bytes[..end]).unwrap();
    let specials = bytepair::SpecialTokens::new(&["<|endoftext|>"]).unwrap();
    let cpu = || {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    };
    let best = |f: &dyn Fn() -> usize| {
        (0..5)
            .map(|_| {
                let t = cpu();
                std::hint::black_box(f());
                cpu() - t
            })
            .fold(f64::MAX, f64::min)
    };
    let pieces = bytepair::pretokenize(text).count();
    let scan = best(&|| bytepair::pretokenize(text).count());
    let count = best(&|| {
        let mut counts = bytepair::PreTokenCounts::default();
        bytepair::count_text(text, &specials, &mut counts).unwrap();
        counts.len()
    });
    let mb = end as f64 / 1e6;
    println!(
        "{mb:.0} MB, {pieces} pieces: scan {:.0} MB/s, scan+count {:.0} MB/s",
        mb / scan,
        mb / count
    );
}
