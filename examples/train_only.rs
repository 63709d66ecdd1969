fn main() {
    let path = std::env::args().nth(1).unwrap();
    let vocab: usize = std::env::args().nth(2).unwrap().parse().unwrap();
    let specials = bytepair::SpecialTokens::new(&["<|endoftext|>"]).unwrap();
    let counts = bytepair::count_file(
        std::path::Path::new(&path),
        &specials,
        4 << 20,
        &bytepair::Silent,
    )
    .unwrap();
    let t = std::time::Instant::now();
    let n = bytepair::train::num_merges(vocab, &specials).unwrap();
    let trained = bytepair::train_counts(&counts, n, &specials, &bytepair::Silent).unwrap();
    eprintln!("{} merges in {:?}", trained.merges.len(), t.elapsed());
}
