fn main() {
    let path = std::env::args().nth(1).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let specials = bytepair::SpecialTokens::new(&["<|endoftext|>"]).unwrap();
    let mut counts = bytepair::PreTokenCounts::default();
    bytepair::count_text(&text, &specials, &mut counts);
    println!("{}", counts.len());
}
