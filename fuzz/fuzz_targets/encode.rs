//! Differential fuzzing of the encoder against a naive merge loop.
//!
//! The first byte of an input picks a vocabulary: one of a few trained on fixed texts (prose, long runs,
//! many scripts), one with tokens that their own bytes do not merge to (as an imported vocabulary may
//! have), or one trained on the input's own text (so that its merges apply to it). The rest,
//! decoded as UTF-8 with replacement, is encoded by `Encoder` and by the model below, which spells out the
//! documented algorithm without any of the encoder's machinery (pair tables, caches, the bucket queue
//! for long pieces, streaming cuts):
//!
//! 1. split at special tokens, leftmost-longest, by trying every token at every position;
//! 2. a pre-token that is a token is that token's id;
//! 3. otherwise start from single bytes and repeatedly merge the adjacent pair whose concatenation
//!    has the lowest merge rank, leftmost first among equals (tiktoken's `byte_pair_merge`).
//!
//! Pre-tokens come from `bytepair::pretokenize`, which the `pretokenize` target checks separately.
//! Also checked: decoding gives the text back, streaming (`encode_prefix` over two parts cut at a
//! place taken from the input) gives the same ids, and so does `encode_file` of the text written to a
//! file, whose worker looks pieces up in its table of pieces from the start (pieces it misses are set
//! aside and merged in lanes, a path `encode` takes only on texts of megabytes).

#![no_main]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use bytepair::{
    count_text, encode_file, pretokenize, train_counts, Dtype, EncodeFileOptions, Encoder,
    PreTokenCounts, Silent, SpecialTokens,
};
use libfuzzer_sys::fuzz_target;

/// Special tokens that are prefixes of each other, so that leftmost-longest matters.
const SPECIALS: [&str; 3] = ["<|s|>", "<|s|><|s|>", "<|"];

struct Model {
    ids: HashMap<Vec<u8>, u32>,
    /// Each merged token's rank: the index of the first merge that makes it.
    rank: HashMap<Vec<u8>, usize>,
    /// The length of the longest merged token (longer slices need no lookup).
    longest: usize,
}

impl Model {
    fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        // Byte positions: a match starts at a character boundary, since the tokens are ASCII.
        let (mut start, mut i) = (0, 0);
        while i < text.len() {
            let longest = SPECIALS
                .iter()
                .filter(|s| text.as_bytes()[i..].starts_with(s.as_bytes()))
                .max_by_key(|s| s.len());
            match longest {
                Some(special) => {
                    self.encode_text(&text[start..i], &mut out);
                    out.push(self.ids[special.as_bytes()]);
                    i += special.len();
                    start = i;
                }
                None => i += 1,
            }
        }
        self.encode_text(&text[start..], &mut out);
        out
    }

    fn encode_text(&self, text: &str, out: &mut Vec<u32>) {
        for piece in pretokenize(text) {
            if let Some(&id) = self.ids.get(piece.as_bytes()) {
                out.push(id);
                continue;
            }
            // The parts as their end offsets in the piece, so that two adjacent parts are one slice;
            // `ranks[k]` is the rank of joining parts `k` and `k + 1`, recomputed around each merge.
            let piece = piece.as_bytes();
            let mut ends: Vec<usize> = (1..=piece.len()).collect();
            let rank_of = |ends: &[usize], k: usize| {
                let start = if k == 0 { 0 } else { ends[k - 1] };
                let joined = &piece[start..ends[k + 1]];
                (joined.len() <= self.longest)
                    .then(|| self.rank.get(joined).copied())
                    .flatten()
            };
            let mut ranks: Vec<Option<usize>> = (0..ends.len().saturating_sub(1))
                .map(|k| rank_of(&ends, k))
                .collect();
            while let Some((_, k)) = (0..ranks.len())
                .filter_map(|k| ranks[k].map(|r| (r, k)))
                .min()
            {
                ends.remove(k);
                ranks.remove(k);
                if k > 0 {
                    ranks[k - 1] = rank_of(&ends, k - 1);
                }
                if k < ranks.len() {
                    ranks[k] = rank_of(&ends, k);
                }
            }
            let mut start = 0;
            for end in ends {
                out.push(self.ids[&piece[start..end]]);
                start = end;
            }
        }
    }
}

/// An encoder and its model, built from the vocabulary trained on `text` with `merges` merges.
struct Case {
    encoder: Encoder,
    model: Model,
}

fn train(text: &str, merges: usize) -> Case {
    let specials = SpecialTokens::new(&SPECIALS).unwrap();
    let mut counts = PreTokenCounts::default();
    count_text(text, &specials, &mut counts).unwrap();
    // The 256 bytes, the merges, and the special tokens (all longer than a byte).
    let vocab_size = 256 + merges + SPECIALS.len();
    let trained = train_counts(&counts, vocab_size, &specials, &Silent).unwrap();

    let token = |id: u32| trained.vocab[id as usize].clone();
    let merges: Vec<(Vec<u8>, Vec<u8>)> = trained
        .merges
        .iter()
        .map(|&(a, b)| (token(a), token(b)))
        .collect();
    case(trained.vocab.clone(), merges)
}

/// The encoder and model of a vocabulary (ids in order; the special tokens among them) and its merges.
fn case(vocab: Vec<Vec<u8>>, merges: Vec<(Vec<u8>, Vec<u8>)>) -> Case {
    let vocab: Vec<(u32, Vec<u8>)> = (0u32..).zip(vocab).collect();
    let mut rank = HashMap::new();
    for (r, (a, b)) in merges.iter().enumerate() {
        rank.entry([a.as_slice(), b.as_slice()].concat())
            .or_insert(r);
    }
    let model = Model {
        ids: vocab.iter().map(|(id, t)| (t.clone(), *id)).collect(),
        longest: rank.keys().map(Vec::len).max().unwrap_or(0),
        rank,
    };
    let specials: Vec<String> = SPECIALS.iter().map(|s| s.to_string()).collect();
    let encoder = Encoder::new(&vocab, &merges, &specials).unwrap();
    Case { encoder, model }
}

/// A vocabulary as one may be imported but never trained: "abcd" and "abcde" are tokens, made by
/// merges, that their own bytes do not merge to ("bc" merges first), so that only whole pieces may be
/// looked up, as tiktoken does.
fn imported() -> Case {
    let mut vocab: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let merges: Vec<(&[u8], &[u8])> = vec![
        (b"b", b"c"),
        (b"a", b"b"),
        (b"c", b"d"),
        (b"ab", b"cd"),
        (b"abcd", b"e"),
        (b" ", b"a"),
    ];
    vocab.extend(merges.iter().map(|(a, b)| [*a, *b].concat()));
    vocab.extend(SPECIALS.iter().map(|s| s.as_bytes().to_vec()));
    let merges = merges
        .into_iter()
        .map(|(a, b)| (a.to_vec(), b.to_vec()))
        .collect();
    case(vocab, merges)
}

/// Vocabularies trained once on fixed texts of different kinds. Under the fuzzer's instrumentation,
/// building an encoder costs about as much as 100 small encodings, so most inputs use one of these.
fn fixed_cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let prose = "The quick brown fox's friends jumped over the lazy dogs; it'll be 1999 \
                     again.\n\nThey're here<|s|>and there, the end.   Done.\n";
        let runs = format!(
            "{} {} {} 1234567 {}",
            "a".repeat(700),
            "ab".repeat(300),
            " ".repeat(50),
            "7".repeat(200)
        );
        let scripts =
            "naïve café 日本語の文章 中文 한국어 ٣٤ 🙂🙂🙂 👍🏽 e\u{301}e\u{301} \u{a0}\u{3000}x";
        vec![
            train(&prose.repeat(20), 120),
            train(&runs, 60),
            train(&scripts.repeat(10), 150),
            imported(),
        ]
    })
}

/// The text file and the `.npy` file of `encode_file`, one pair per process.
fn files() -> &'static (PathBuf, PathBuf) {
    static FILES: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = std::env::temp_dir();
        let name = format!("bytepair-fuzz-{}", std::process::id());
        (
            dir.join(format!("{name}.txt")),
            dir.join(format!("{name}.npy")),
        )
    })
}

/// The ids `encode_file` writes for `text`, on one worker, from the `.npy` it writes (uint32).
fn encode_through_file(encoder: &Encoder, text: &str) -> Vec<u32> {
    let (input, output) = files();
    std::fs::write(input, text).unwrap();
    let options = EncodeFileOptions {
        num_threads: Some(1),
        ..EncodeFileOptions::new(Dtype::U32)
    };
    encode_file(encoder, input, output, &options, &Silent).unwrap();
    let npy = std::fs::read(output).unwrap();
    // The header's length is the little-endian u16 after the magic string and the version (1.0).
    assert_eq!(&npy[..8], b"\x93NUMPY\x01\x00");
    let data = 10 + u16::from_le_bytes([npy[8], npy[9]]) as usize;
    npy[data..]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    // One input in 32 trains on its own text (as many merges as its length mod 64), so that its
    // merges apply to it; building an encoder takes most of such a run.
    let own;
    let case = match first % 32 {
        31 => {
            own = train(&text, text.len() % 64);
            &own
        }
        k => &fixed_cases()[k as usize % 4],
    };
    let encoder = &case.encoder;

    let mut ids = Vec::new();
    encoder.encode(&text, &mut ids).unwrap();
    assert_eq!(ids, case.model.encode(&text), "text {text:?}");

    let mut decoded = Vec::new();
    encoder
        .decode(ids.iter().map(|&id| id as u64), &mut decoded)
        .unwrap();
    assert_eq!(decoded, text.as_bytes());

    let mut cut = (first as usize * 31) % (text.len() + 1);
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut streamed = Vec::new();
    let used = encoder
        .encode_prefix(&text[..cut], false, &mut streamed)
        .unwrap();
    let rest = format!("{}{}", &text[used..cut], &text[cut..]);
    encoder.encode_prefix(&rest, true, &mut streamed).unwrap();
    assert_eq!(streamed, ids, "streamed with a cut at {cut} of {text:?}");

    assert_eq!(
        encode_through_file(encoder, &text),
        ids,
        "encode_file of {text:?}"
    );
});
