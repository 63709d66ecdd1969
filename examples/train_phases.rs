//! Training's phases on a corpus, with the wall time and peak RSS of each:
//!
//!     cargo run --release --example train_phases -- VOCAB_SIZE FILE... [--threads N] [--tokens]
//!
//! Phases: counting (reading the files and counting pre-tokens, until the last byte is counted),
//! setup (merging the threads' counts, the words and the counts of their pairs, until the first merge
//! report) and merging (the rest, and with `--tokens` the count of the tokens the text encodes to). The peak of each phase is the process's high-water mark, reset
//! (through /proc/self/clear_refs, Linux) as the phase starts.
use std::sync::Mutex;
use std::time::Instant;

use bytepair::{train_files, Phase, Progress, Result, TrainOptions};

/// The high-water mark of the RSS and the RSS now, in MB (Linux).
fn rss_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1e3)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// The CPU time of the process so far (user and system), in seconds.
fn cpu_s() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn reset_peak() {
    // "5" resets the high-water mark to the current RSS.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Marks each phase's end: the phase's name, when it ended, and its peak.
struct Phases {
    start: Instant,
    marks: Mutex<Vec<(&'static str, f64, f64, f64)>>,
    counting: Mutex<bool>,
}

impl Phases {
    fn mark(&self, name: &'static str) {
        let (peak, _) = rss_mb();
        self.marks
            .lock()
            .unwrap()
            .push((name, self.start.elapsed().as_secs_f64(), cpu_s(), peak));
        reset_peak();
    }
}

impl Progress for Phases {
    fn report(&self, phase: Phase, done: u64, total: u64) -> Result<()> {
        if phase == Phase::Count && done == total {
            self.mark("count");
        }
        let mut counting = self.counting.lock().unwrap();
        if phase == Phase::Merge && done == 0 && *counting {
            *counting = false;
            drop(counting);
            self.mark("setup");
        }
        Ok(())
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let vocab_size: usize = args.next().expect("VOCAB_SIZE").parse().unwrap();
    let (mut paths, mut threads, mut tokens) = (Vec::new(), None, false);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--threads" => threads = Some(args.next().unwrap().parse().unwrap()),
            "--tokens" => tokens = true,
            _ => paths.push(arg),
        }
    }
    let mut options = TrainOptions::new(vocab_size);
    options.special_tokens = vec!["<|endoftext|>".into()];
    options.num_threads = threads;
    options.count_tokens = tokens;
    let phases = Phases {
        start: Instant::now(),
        marks: Mutex::new(Vec::new()),
        counting: Mutex::new(true),
    };
    reset_peak();
    let cpu_s0 = cpu_s();
    let trained = train_files(&paths, &options, &phases).unwrap();
    phases.mark("merge");
    let total = phases.start.elapsed().as_secs_f64();
    let marks = phases.marks.into_inner().unwrap();
    let (mut before, mut cpu_before) = (0.0, cpu_s0);
    let mut peak: f64 = 0.0;
    for (name, at, cpu, mb) in &marks {
        println!(
            "{name:12} {:7.2} s  cpu {:7.2} s  peak {mb:7.0} MB",
            at - before,
            cpu - cpu_before
        );
        (before, cpu_before) = (*at, *cpu);
        peak = peak.max(*mb);
    }
    let fingerprint = trained
        .merges
        .iter()
        .fold(0xcbf29ce484222325u64, |h, &(a, b)| {
            (h ^ ((a as u64) << 32 | b as u64)).wrapping_mul(0x100000001b3)
        });
    println!("merges fingerprint {fingerprint:016x}");
    println!(
        "total {total:.2} s, peak {peak:.0} MB, {} distinct pre-tokens ({:.0} B each), {} bytes, {} merges, tokens {:?}",
        trained.pretokens,
        peak * 1e6 / trained.pretokens as f64,
        trained.bytes,
        trained.merges.len(),
        trained.tokens
    );
}
