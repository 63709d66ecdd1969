"""Hostile input gets a clear exception or the right answer, never a crash: invalid UTF-8 anywhere in a
file, NUL bytes, lone surrogates at every entry point, one 10 MB pre-token, special tokens that are
prefixes of each other, a vocabulary of a million tokens, GPT-2 merges files with a header and Windows
line endings. A Rust panic becomes a RuntimeError and the process goes on; one Tokenizer shared by 8
threads gives the ids of sequential calls."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import bytepair
from bytepair import Tokenizer, reference
from bytepair.formats import bytes_to_unicode

EOT = "<|endoftext|>"


def byte_vocab() -> dict[int, bytes]:
    return {i: bytes([i]) for i in range(256)}


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_text(("the cat sat on the mat; it's 1999 and the end.\n" * 50 + EOT) * 4, encoding="utf-8")
    vocab, merges = bytepair.train_bpe(path, 300, [EOT])
    return Tokenizer(vocab, merges, [EOT])


def encode_file(tok: Tokenizer, src: Path, out: Path, chunk_size: int | None = None) -> list[int]:
    """encode_file with the hidden chunk-size knob (None: the default), as a list."""
    tok._encoder.encode_file(str(src), str(out), 32, 2, chunk_size, None)
    return np.load(out).tolist()


# Invalid UTF-8: a ValueError naming the byte offset of the first invalid byte, whatever the chunking,
# from training and from encode_file, and no output file.

GOOD = b"fine text, ok. " * 700  # 10500 bytes: several chunks at the small chunk sizes


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (b"\xff" + GOOD, 0),  # first byte
        (GOOD + b"\x80" + GOOD, len(GOOD)),  # stray continuation byte mid-file
        (GOOD + "é".encode()[:1] + b" x" + GOOD, len(GOOD)),  # truncated 2-byte character
        (GOOD + "日".encode()[:2], len(GOOD)),  # truncated 3-byte character at the very end
        (GOOD + b"\xed\xa0\x80" + GOOD, len(GOOD)),  # an encoded surrogate (invalid in UTF-8)
        (GOOD + b"\xc0\xaf", len(GOOD)),  # overlong encoding of "/"
        (GOOD + b" \xf4\x90\x80\x80", len(GOOD) + 1),  # beyond U+10FFFF
        (GOOD + b"\xff" + GOOD + b"\xfe", len(GOOD)),  # two bad bytes: the first is named
    ],
)
@pytest.mark.parametrize("chunk_size", [1, 100, None])
def test_invalid_utf8_anywhere_names_the_offset(
    tok: Tokenizer, tmp_path: Path, data: bytes, offset: int, chunk_size: int | None
) -> None:
    src = tmp_path / "bad.txt"
    src.write_bytes(data)
    message = rf"bad\.txt: invalid UTF-8 at byte offset {offset}\b"
    with pytest.raises(ValueError, match=message):
        bytepair.train_bpe(src, 300, [EOT], _chunk_size=chunk_size)
    with pytest.raises(ValueError, match=message):
        encode_file(tok, src, tmp_path / "out.npy", chunk_size)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.txt"]


def test_nul_bytes_are_ordinary_text(tok: Tokenizer, tmp_path: Path) -> None:
    text = "a\x00b \x00\x00 the\x00cat\n\x00" * 100 + EOT + "\x00"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    src = tmp_path / "nul.txt"
    src.write_text(text, encoding="utf-8")
    assert encode_file(tok, src, tmp_path / "out.npy", 7) == ids
    vocab, merges = bytepair.train_bpe(src, 270, [EOT])
    assert any(b"\x00" in a + b for a, b in merges)
    assert (vocab, merges) == reference.train_bpe(str(src), 270, [EOT])


# Lone surrogates cannot be UTF-8: every entry point taking str raises UnicodeEncodeError, a ValueError.

LONE = "ok \ud800 no"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda tok, path: tok.encode(LONE), id="encode"),
        pytest.param(lambda tok, path: tok.encode_batch(["fine", LONE]), id="encode_batch"),
        pytest.param(lambda tok, path: list(tok.encode_iterable(["fine ", LONE])), id="encode_iterable"),
        pytest.param(lambda tok, path: bytepair.pretokenize(LONE), id="pretokenize"),
        pytest.param(lambda tok, path: bytepair.train_bpe(path, 300, [LONE]), id="train_bpe special"),
        pytest.param(lambda tok, path: Tokenizer(byte_vocab(), [], [LONE]), id="Tokenizer special"),
    ],
)
def test_lone_surrogates_raise_unicode_encode_error(tok: Tokenizer, tmp_path: Path, call) -> None:
    path = tmp_path / "ok.txt"
    path.write_text("fine")
    with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
        call(tok, path)
    assert issubclass(UnicodeEncodeError, ValueError)


def test_one_10mb_pre_token(tmp_path: Path) -> None:
    """10 MiB of "a" is one pre-token. Training halves it at each merge, building a vocabulary with
    tokens up to 1 MiB long, and encoding takes the bucket path: linear, not quadratic."""
    size = 10 << 20
    src = tmp_path / "a.txt"
    src.write_bytes(b"a" * size)
    vocab, merges = bytepair.train_bpe(src, 256 + 20)
    assert merges == [(b"a" * 2**k, b"a" * 2**k) for k in range(20)]
    start = time.monotonic()
    tok = Tokenizer(vocab, merges)  # tokens up to 1 MiB long: took 72 s before pair_table skipped lengths
    ids = tok.encode("a" * size)
    assert time.monotonic() - start < 30  # about 1 s on a shared 2-core machine
    assert ids == [275] * 10  # 10 tokens of 2**20 "a"
    assert tok.decode(ids) == "a" * size
    assert encode_file(tok, src, tmp_path / "out.npy", 1 << 16) == ids
    assert list(tok.encode_iterable(["a" * (1 << 20)] * 10)) == ids


def test_special_tokens_that_are_prefixes_of_each_other(tmp_path: Path) -> None:
    """Leftmost-longest everywhere: encode, streaming cut at every position, encode_file with chunks of
    one byte, and training (which must not merge across or into them)."""
    specials = ["<|a|>", "<|a|><|b|>", "<|a", "<|a|><|b|><|c|>"]
    tok = Tokenizer(byte_vocab(), [], specials)
    s = {t: 256 + i for i, t in enumerate(specials)}
    text = "x<|a|><|b|>y<|a|><|b|><|c|><|a|b|><|a|><|a z<|a|><|b|"
    expected = [ord("x"), s["<|a|><|b|>"], ord("y"), s["<|a|><|b|><|c|>"], s["<|a"], *b"|b|>", s["<|a|>"]] + [
        s["<|a"],
        *b" z",
        s["<|a|>"],
        *b"<|b|",
    ]
    assert tok.encode(text) == expected
    assert tok.decode(expected) == text
    for cut in range(len(text) + 1):
        assert list(tok.encode_iterable([text[:cut], text[cut:]])) == expected, cut
    src = tmp_path / "specials.txt"
    src.write_text(text * 20, encoding="utf-8")
    assert encode_file(tok, src, tmp_path / "out.npy", 1) == expected * 20
    vocab, merges = bytepair.train_bpe(src, 300, specials, _chunk_size=3)
    assert (vocab, merges) == reference.train_bpe(str(src), 300, specials)
    assert not any(b"<|a" in a + b for a, b in merges)


def test_a_vocabulary_of_a_million_tokens() -> None:
    """256 bytes, every two-byte token, and three-byte tokens up to 1,000,000 ids, each built by a
    merge: construction works in reasonable time, and encoding equals tiktoken's with the same ranks."""
    tiktoken = pytest.importorskip("tiktoken")
    merges = [(bytes([a]), bytes([b])) for a in range(256) for b in range(256)]
    merges += [
        (merges[k >> 8][0] + merges[k >> 8][1], bytes([k & 255])) for k in range(1_000_000 - 256 - 65536)
    ]
    vocab = byte_vocab() | {256 + i: a + b for i, (a, b) in enumerate(merges)}
    assert len(vocab) == 1_000_000
    start = time.monotonic()
    tok = Tokenizer(vocab, merges)
    assert time.monotonic() - start < 120  # about 5 s on a shared 2-core machine
    assert tok.vocab_size == 1_000_000
    text = bytes(range(256)).decode("latin-1") * 4 + " the quick brown fox 日本語 🙂 " * 20
    enc = tiktoken.Encoding(
        "million",
        pat_str=bytepair.GPT2_PATTERN,
        mergeable_ranks={t: i for i, t in vocab.items()},
        special_tokens={},
    )
    ids = tok.encode(text)
    assert ids == enc.encode(text)
    assert max(ids) > 65536 + 256  # three-byte tokens are used
    assert tok.decode(ids) == text


def test_merges_file_with_version_header_and_windows_line_endings(tmp_path: Path) -> None:
    """OpenAI's vocab.bpe starts with "#version: 0.2"; files edited on Windows end lines with CRLF. Both
    load to the same tokenizer as the plain file."""
    table = bytes_to_unicode()
    vocab = byte_vocab() | {256: b" t", 257: b"he", 258: b" the"}
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he")]
    (tmp_path / "vocab.json").write_text(
        json.dumps({"".join(table[b] for b in t): i for i, t in vocab.items()}), encoding="utf-8"
    )
    lines = ["".join(table[b] for b in a) + " " + "".join(table[b] for b in b_) for a, b_ in merges]
    (tmp_path / "merges.txt").write_bytes(("#version: 0.2\r\n" + "\r\n".join(lines) + "\r\n").encode())
    tok = Tokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert tok.merges == merges
    assert tok.encode(" the theme") == Tokenizer(vocab, merges).encode(" the theme") == [258, 258, 109, 101]


def test_an_impossible_allocation_is_a_memory_error_and_the_process_goes_on(
    tok: Tokenizer, tmp_path: Path
) -> None:
    """An absurd hidden chunk size asks the chunk reader for more than any address space: MemoryError
    naming the chunk (it was a Rust panic, and before that an abort), and later calls work."""
    src = tmp_path / "in.txt"
    src.write_text("the cat")
    with pytest.raises(MemoryError, match="could not allocate .* for a chunk of the input"):
        bytepair.train_bpe(src, 300, _chunk_size=2**64 - 1)
    with pytest.raises(MemoryError, match="could not allocate .* for a chunk of the input"):
        encode_file(tok, src, tmp_path / "out.npy", 2**64 - 1)
    assert [p.name for p in tmp_path.iterdir()] == ["in.txt"]
    assert bytepair.train_bpe(src, 258)[1] == [(b"t", b"h"), (b"th", b"e")]
    assert tok.decode(tok.encode("the cat")) == "the cat"


def test_eight_threads_sharing_one_tokenizer_get_sequential_ids(tok: Tokenizer) -> None:
    docs = [f"doc {i}: " + "the cat sat on the mat; " * (i % 40) + EOT + " it's 1999" for i in range(300)]
    expected = [tok.encode(d) for d in docs]
    results: dict[int, list[list[list[int]]]] = {}
    barrier = threading.Barrier(8)

    def work(k: int) -> None:
        barrier.wait()
        results[k] = [
            [tok.encode(d) for d in docs],
            tok.encode_batch(docs, num_threads=2),
            [list(tok.encode_iterable([d[: k + 3], d[k + 3 :]])) for d in docs],
        ]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 8 and all(r == [expected] * 3 for r in results.values())
