"""Tokenizer: ids identical to tiktoken's, streaming equal to whole-text encoding, decoding, whole
files to .npy, thread safety, pickling, and what each bad input gets."""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import Tokenizer
from conftest import CS336, MEMORY_PROBE, shared_file, stable_characters

EOT = "<|endoftext|>"


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt", [EOT])


@pytest.fixture(scope="module")
def tiktoken_gpt2(gpt2: Tokenizer):
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {token: i for i, token in gpt2.vocab.items() if token != EOT.encode()}
    return tiktoken.Encoding(
        "gpt2-test", pat_str=bytepair.GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={EOT: 50256}
    )


ALPHABET = "aAbz ETé日本語中文한국어ب١२3 9\n\t\r  '!?.,-_()🙂👍🏽\u0301\u200d\x00"
texts = st.one_of(
    st.text(alphabet=ALPHABET, max_size=200),
    st.text(stable_characters(assigned_in_python=True), max_size=100),
    st.lists(
        st.sampled_from(["the", " the", " cat", "'s", "<|endoftext|>", "  ", "\n\n", "1234", "日本"])
    ).map("".join),
)


@settings(max_examples=3000, deadline=None)
@given(texts)
def test_identical_to_tiktoken(gpt2: Tokenizer, tiktoken_gpt2, text: str) -> None:
    assert gpt2.encode(text) == tiktoken_gpt2.encode(text, allowed_special="all")


@pytest.mark.parametrize(
    "name",
    [
        "tinystories_sample.txt",
        "address.txt",
        "german.txt",
        "corpus.en",
        "prose_en.txt.xz",
        "multilingual.txt.xz",
    ],
)
def test_identical_to_tiktoken_on_real_text(gpt2: Tokenizer, tiktoken_gpt2, name: str) -> None:
    if name.endswith(".xz"):
        import lzma

        with lzma.open(shared_file("corpora", name), "rt", encoding="utf-8") as f:
            text = f.read(3_000_000)
    else:
        text = (CS336 / name).read_text(encoding="utf-8")
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert gpt2.decode(ids) == text


@settings(max_examples=500, deadline=None)
@given(text=texts, cuts=st.lists(st.integers(0, 300), max_size=8))
def test_encode_iterable_equals_encode_for_any_split(gpt2: Tokenizer, text: str, cuts: list[int]) -> None:
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    parts = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(gpt2.encode_iterable(parts)) == gpt2.encode(text)


def test_encode_iterable_cuts_inside_special_tokens_and_words(gpt2: Tokenizer) -> None:
    text = ("hello world<|endoftext|>  spaced   out\n\n" * 5000) + "tail"
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    assert list(gpt2.encode_iterable(pieces)) == gpt2.encode(text)
    assert list(gpt2.encode_iterable(iter(text))) == gpt2.encode(text)
    assert list(gpt2.encode_iterable([])) == []


def test_encode_iterable_is_lazy(gpt2: Tokenizer) -> None:
    def lines():
        # One batch's worth of text: the ids come before the iterable is read any further.
        yield "first line here\n" * (bytepair.tokenizer._STREAM_BATCH // 16 + 1)
        raise RuntimeError("read too far")

    ids = gpt2.encode_iterable(lines())
    assert next(ids) == gpt2.encode("first")[0]


def test_encode_iterable_on_a_file(gpt2: Tokenizer, tmp_path: Path) -> None:
    path = CS336 / "tinystories_sample.txt"
    with open(path, encoding="utf-8") as f:
        assert list(gpt2.encode_iterable(f)) == gpt2.encode(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_encode_iterable_on_text_files_and_string_io_read_in_blocks(
    gpt2: Tokenizer, tmp_path: Path, newline: str
) -> None:
    # Files and StringIO are read in blocks, not by lines: the ids must still be those of the lines
    # joined, whatever newlines the file has, from wherever the file was left.
    lines = [f"line {i}: the cat sat, <|endoftext|> 日本語 🙂\n" for i in range(20_000)]
    text = "".join(lines)
    path = tmp_path / "t.txt"
    path.write_bytes(text.replace("\n", newline).encode())
    with open(path, encoding="utf-8") as f:
        assert list(gpt2.encode_iterable(f)) == gpt2.encode(text)
    with open(path, encoding="utf-8") as f:
        f.readline()
        assert list(gpt2.encode_iterable(f)) == gpt2.encode("".join(lines[1:]))
    with open(path, encoding="utf-8", newline="") as f:
        assert list(gpt2.encode_iterable(f)) == gpt2.encode(text.replace("\n", newline))
    assert list(gpt2.encode_iterable(io.StringIO(text))) == gpt2.encode(text)

    class Upper(io.StringIO):
        def __iter__(self):
            return (line.upper() for line in iter(self.readline, ""))

    assert list(gpt2.encode_iterable(Upper(text))) == gpt2.encode(text.upper())


@settings(max_examples=500, deadline=None)
@given(texts)
def test_decode_inverts_encode(gpt2: Tokenizer, text: str) -> None:
    assert gpt2.decode(gpt2.encode(text)) == text


def test_decode_replaces_malformed_utf8_and_rejects_unknown_ids(gpt2: Tokenizer) -> None:
    ids = gpt2.encode("日")  # three bytes, several ids
    assert gpt2.decode(ids[:-1]).endswith("\ufffd")
    with pytest.raises(ValueError, match="id 50257 is not in the vocabulary"):
        gpt2.decode([1, 50257])
    with pytest.raises(ValueError, match="negative"):
        gpt2.decode([-1])
    with pytest.raises(TypeError):
        gpt2.decode(["a"])  # type: ignore[list-item]


def byte_vocab() -> dict[int, bytes]:
    return {i: bytes([i]) for i in range(256)}


def test_special_tokens_are_appended_and_longest_wins() -> None:
    tok = Tokenizer(byte_vocab(), [], ["<s>", "<s><s>", "<s>"])
    assert tok.special_tokens == ["<s>", "<s><s>"]
    assert tok.vocab[256] == b"<s>" and tok.vocab[257] == b"<s><s>" and tok.vocab_size == 258
    assert tok.encode("a<s><s><s>b") == [97, 257, 256, 98]
    assert tok.decode([257]) == "<s><s>"


def test_without_special_tokens_they_are_plain_text(gpt2: Tokenizer) -> None:
    plain = Tokenizer(gpt2.vocab, gpt2.merges)
    assert EOT.encode() in plain.vocab.values()
    assert 50256 not in plain.encode(EOT)
    assert gpt2.encode(EOT) == [50256]


def test_whole_token_lookup_matches_tiktoken_for_unreachable_tokens() -> None:
    tiktoken = pytest.importorskip("tiktoken")
    vocab = byte_vocab() | {256: b"ab", 257: b"abc"}  # "abc" is not built by any merge
    tok = Tokenizer(vocab, [(b"a", b"b")])
    enc = tiktoken.Encoding(
        "t",
        pat_str=bytepair.GPT2_PATTERN,
        mergeable_ranks={b: i for i, b in vocab.items()},
        special_tokens={},
    )
    for text in ["abc", "abcabc", "xabc abc", "ab"]:
        assert tok.encode(text) == enc.encode(text), text


def test_encode_file_equals_encode(gpt2: Tokenizer, tmp_path: Path) -> None:
    text = (CS336 / "corpus.en").read_text(encoding="utf-8") * 3
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    expected = gpt2.encode(text)
    for threads in (1, 2, 8):
        out = tmp_path / f"out{threads}.npy"
        assert gpt2.encode_file(src, out, num_threads=threads) == len(expected)
        array = np.load(out)
        assert array.dtype == np.uint16 and array.tolist() == expected
    wide = tmp_path / "wide.npy"
    gpt2.encode_file(src, wide, dtype=np.uint32)
    assert np.load(wide).dtype == np.uint32 and np.load(wide).tolist() == expected


def test_encode_file_small_chunks_give_the_same_array(gpt2: Tokenizer, tmp_path: Path) -> None:
    text = "It's a test<|endoftext|> of   chunks\n\n and  cuts 日本語 " * 200
    src = tmp_path / "in.txt"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "out.npy"
    for chunk in (1, 13, 100):
        gpt2._encoder.encode_file(str(src), str(out), 16, 2, chunk, None)
        assert np.load(out).tolist() == gpt2.encode(text)


def test_encode_file_picks_uint32_for_large_vocabularies(tmp_path: Path) -> None:
    tok = Tokenizer(byte_vocab() | {70000: b"zz"}, [(b"z", b"z")])
    src = tmp_path / "in.txt"
    src.write_text("zz a zz")
    out = tmp_path / "out.npy"
    assert tok.encode_file(src, out) == 5
    assert np.load(out).dtype == np.uint32 and np.load(out).tolist() == [70000, 32, 97, 32, 70000]
    with pytest.raises(ValueError, match="id 70000 does not fit in uint16"):
        tok.encode_file(src, tmp_path / "narrow.npy", dtype=np.uint16)
    assert not (tmp_path / "narrow.npy").exists()


def test_encode_file_without_a_dtype_does_not_import_numpy(tmp_path: Path) -> None:
    """Importing NumPy inside the call cost 0.1 s and started BLAS threads that spin on every core."""
    src = tmp_path / "in.txt"
    src.write_text("hi there")
    script = textwrap.dedent(
        f"""
        import sys
        import bytepair
        tok = bytepair.Tokenizer({{i: bytes([i]) for i in range(256)}}, [])
        print(tok.encode_file({str(src)!r}, {str(tmp_path / "out.npy")!r}), "numpy" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=240
    ).stdout
    assert out.split() == ["8", "False"]
    assert np.load(tmp_path / "out.npy").tolist() == list(b"hi there")


def test_encode_file_errors_leave_nothing_behind(gpt2: Tokenizer, tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    with pytest.raises(FileNotFoundError):
        gpt2.encode_file(tmp_path / "missing.txt", out)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine text " * 1000 + b"\xff")
    with pytest.raises(ValueError, match="invalid UTF-8 at byte offset 10000"):
        gpt2.encode_file(bad, out)
    with pytest.raises(FileNotFoundError):
        gpt2.encode_file(bad, tmp_path / "no" / "such" / "dir.npy")
    with pytest.raises(ValueError, match="dtype"):
        gpt2.encode_file(bad, out, dtype=np.int64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt"]


def test_threads_share_one_tokenizer(gpt2: Tokenizer) -> None:
    docs = [f"document {i}: " + "the quick brown fox " * (i % 50) for i in range(400)]
    expected = [gpt2.encode(d) for d in docs]
    results: dict[int, list[list[int]]] = {}

    def work(k: int) -> None:
        results[k] = [gpt2.encode(d) for d in docs]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r == expected for r in results.values()) and len(results) == 8
    assert gpt2.encode_batch(docs, num_threads=3) == expected


def test_pickles(gpt2: Tokenizer) -> None:
    clone = pickle.loads(pickle.dumps(gpt2))
    assert clone.encode("pickled <|endoftext|> text") == gpt2.encode("pickled <|endoftext|> text")
    assert clone.special_tokens == [EOT]


@pytest.mark.parametrize("wide", ["é", "’", "日", "🙂"], ids=["latin-1", "ucs-2", "ucs-2 cjk", "ucs-4"])
def test_every_string_storage_encodes_like_tiktoken(gpt2: Tokenizer, tiktoken_gpt2, wide: str) -> None:
    # CPython stores a str as 1, 2 or 4 bytes a character (the widest decides) and the binding reads each
    # storage itself, 16 characters at a time: put the one wide character at every offset of a block.
    base = "The cat sat on the mat, and then it said: hello again! " * 2
    for at in range(40):
        text = base[:at] + wide + base[at:]
        assert gpt2.encode(text) == tiktoken_gpt2.encode(text), (wide, at)
        assert list(gpt2.encode_iterable([text[:at], text[at:]])) == gpt2.encode(text)


@pytest.mark.parametrize("wide", ["’", "🙂"], ids=["ucs-2", "ucs-4"])
def test_a_lone_surrogate_anywhere_raises(gpt2: Tokenizer, wide: str) -> None:
    for at in [0, 15, 16, 17, 40]:
        text = ("x" * 40 + wide)[:at] + "\udc80" + "x" * 40 + wide
        with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
            gpt2.encode(text)


# `encode` converts and encodes a str of 4,096 characters or more a block of 2**18 characters at a time,
# straight into the list (`encode_into_list` in src/python/encoder.rs).
BLOCK = 1 << 18


@pytest.mark.parametrize("wide", ["", "é", "’", "🙂"], ids=["ascii", "latin-1", "ucs-2", "ucs-4"])
def test_long_texts_encode_like_tiktoken_whatever_falls_on_a_block_boundary(
    gpt2: Tokenizer, tiktoken_gpt2, wide: str
) -> None:
    # A special token, a wide character, a long word and a run of spaces each straddle a boundary
    # between blocks; a stretch with no safe cut spans two blocks; single letters make more ids than
    # the list is first given room for.
    words = f"The cat sat{wide} on the mat, 1234 times. " * (BLOCK // 30)
    parts = [words[: BLOCK - 5], EOT, words, wide * 9, "x" * 3000, " " * 70, "x," * BLOCK]
    parts += [" then", " words", "a b c " * (BLOCK // 3)]
    text = "".join(parts)
    assert len(text) > 5 * BLOCK
    at = text.index(EOT)
    assert at < BLOCK < at + len(EOT)
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text, allowed_special="all")
    assert len(ids) > len(text) // 4
    assert gpt2.encode_to_numpy(text).tolist() == ids
    for n in [4095, 4096, 4097, BLOCK - 1, BLOCK, BLOCK + 1]:
        assert gpt2.encode(text[:n]) == tiktoken_gpt2.encode(text[:n], allowed_special="all"), n
        assert gpt2.encode_to_numpy(text[:n]).tolist() == gpt2.encode(text[:n]), n


@pytest.mark.parametrize("method", ["encode", "encode_to_numpy"])
def test_a_lone_surrogate_past_the_first_block_raises_as_python_does(gpt2: Tokenizer, method: str) -> None:
    text = "x" * (BLOCK + 10) + "\udc80" + "🙂" * 5
    with pytest.raises(UnicodeEncodeError, match="surrogates not allowed") as raised:
        getattr(gpt2, method)(text)
    assert raised.value.start == BLOCK + 10
    with pytest.raises(UnicodeEncodeError, match="surrogates not allowed"):
        getattr(gpt2, method)(text[BLOCK:])


def test_encode_to_numpy_gives_encode_s_ids_in_a_writable_uint32_array_that_owns_its_memory(
    gpt2: Tokenizer,
) -> None:
    # Short texts (a vector of ids) and long ones (blocks), every string storage, special tokens.
    texts = ["", "hi", f"the cat{EOT} 日本語 🙂 é" * 3, "x" * 4095, " the cat" * 600, "é’🙂 Straße" * 2000]
    for text in texts:
        ids = gpt2.encode_to_numpy(text)
        assert (
            isinstance(ids, np.ndarray) and ids.dtype == np.uint32 and ids.shape == (len(gpt2.encode(text)),)
        )
        assert ids.flags.writeable and ids.flags.c_contiguous
        assert ids.tolist() == gpt2.encode(text)
    # Each call's array is its own memory, which outlives the tokenizer and goes with the last array.
    tok = Tokenizer(gpt2.vocab, gpt2.merges, [EOT])
    text = " the cat sat" * 1000
    first, second = tok.encode_to_numpy(text), tok.encode_to_numpy(text)
    first[:] = 0
    del tok
    assert second.tolist() == gpt2.encode(text) and not first.any()
    view = second[5:10]
    del second
    assert view.tolist() == gpt2.encode(text)[5:10]
    assert pickle.loads(pickle.dumps(view)).tolist() == view.tolist()


def test_encode_to_numpy_of_ids_past_the_cached_ints(gpt2: Tokenizer) -> None:
    # Ids of 2**17 and more have no preallocated Python int: the list takes another path, the array
    # does not care.
    far = Tokenizer({200_000 + i: bytes([i]) for i in range(256)}, [])
    for text in ["hi", "hi" * 3000]:
        assert far.encode_to_numpy(text).tolist() == far.encode(text) == [200_000 + b for b in text.encode()]


@pytest.mark.parametrize("bad", [b"hi", None, ["hi"], 3])
def test_encode_to_numpy_takes_only_a_str(gpt2: Tokenizer, bad: object) -> None:
    with pytest.raises(TypeError, match="encode_to_numpy takes a str"):
        gpt2.encode_to_numpy(bad)  # type: ignore[arg-type]


def test_a_long_text_s_list_owns_a_reference_to_each_of_its_ints(gpt2: Tokenizer) -> None:
    # The list's items are the encoder's cached ints, their references added once the list is made:
    # one per item, and all of them given back when the list goes.
    # Short and long lists (references added item by item, or counted per int), in one block or
    # many, on the calling thread or the helper (1 MB or more), the list's array grown or not.
    the = gpt2.encode(" the")[0]
    before = sys.getrefcount(the)
    for text, n in [(" the cat" * 1000, 1000), (" the cat" * 50_000, 50_000), (" the" * 400_000, 400_000)]:
        ids = gpt2.encode(text)
        assert ids[0] is the and ids.count(the) == n
        assert sys.getrefcount(the) == before + n
        del ids
        assert sys.getrefcount(the) == before


def test_caches_kept_between_calls_belong_to_their_tokenizer(gpt2: Tokenizer, tiktoken_gpt2) -> None:
    # Each tokenizer keeps its caches between calls; a second tokenizer (bytes only, no merges) encoding
    # the same words in between must neither see nor disturb them.
    plain = Tokenizer(byte_vocab(), [])
    words = [" the cat", " sat", " on the mat", " 日本語", "!!"]
    for _ in range(3):
        for w in words:
            assert gpt2.encode(w * 50) == tiktoken_gpt2.encode(w * 50)
            assert plain.encode(w * 50) == list((w * 50).encode())


def test_long_runs_encode_like_tiktoken(gpt2: Tokenizer, tiktoken_gpt2) -> None:
    for text in ["a" * 5000, " " * 5000, "7" * 5000, "🙂" * 2000, "ab" * 3000]:
        assert gpt2.encode(text) == tiktoken_gpt2.encode(text), text[:3]


# Bad input


def test_from_files_errors_name_the_file(tmp_path: Path) -> None:
    v, m = tmp_path / "vocab.json", tmp_path / "merges.txt"
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_files(v, m)
    v.write_text('{"a": 0, "b": 1}', encoding="utf-8")
    m.write_text("a b c\n", encoding="utf-8")
    with pytest.raises(ValueError, match="merges.txt:1"):
        Tokenizer.from_files(v, m)


@pytest.mark.parametrize(
    ("vocab", "merges", "message"),
    [
        (byte_vocab() | {256: b"a"}, [], "both"),
        (byte_vocab(), [(b"a", b"b")], "merge 0 \\(result\\)"),
        (byte_vocab() | {256: b"ab"}, [(b"a", b"xyz")], "merge 0 \\(right\\)"),
        ({0: b"a"}, [], "byte 0x00 has no id"),
        (byte_vocab() | {2**31: b"ab"}, [], "id 2147483648 is too large"),
        (byte_vocab() | {2**32: b"ab"}, [], "from 0 to 2\\*\\*32 - 1"),
    ],
)
def test_bad_vocabularies(vocab: dict[int, bytes], merges: list[tuple[bytes, bytes]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Tokenizer(vocab, merges)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (({0: "a"}, []), TypeError),
        ((byte_vocab(), [(b"a",)]), TypeError),
        ((byte_vocab(), [], "<s>"), TypeError),
        ((byte_vocab(), [], [""]), ValueError),
        (({-1: b"a"}, []), ValueError),
    ],
)
def test_bad_constructor_arguments(args: tuple, error: type) -> None:
    with pytest.raises(error):
        Tokenizer(*args)


def test_bad_items_to_encode(gpt2: Tokenizer) -> None:
    with pytest.raises(TypeError):
        gpt2.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str items"):
        list(gpt2.encode_iterable(["ok", 3]))  # type: ignore[list-item]
    with pytest.raises(UnicodeEncodeError):
        gpt2.encode("lone \ud800 surrogate")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="aeitnrs", min_size=128, max_size=3000), st.sampled_from(["", " ", "1", "日本"]))
def test_long_pieces_take_the_bucket_path_and_still_match_tiktoken(
    gpt2: Tokenizer, tiktoken_gpt2, word: str, prefix: str
) -> None:
    text = prefix + word
    assert gpt2.encode(text) == tiktoken_gpt2.encode(text)


def streamed_ids_and_growth_mb(make_tokenizer: str, path: Path) -> tuple[int, int]:
    """Streams the UTF-8 file `path` through ``encode_iterable`` in a fresh process whose tokenizer is
    the expression `make_tokenizer` (built before measuring); returns the number of ids and how many MB
    the process's peak RSS grew by during the call."""
    script = MEMORY_PROBE + textwrap.dedent(
        f"""
        from bytepair import Tokenizer
        tok = {make_tokenizer}
        reset_peak()
        before = rss_mb("VmRSS")
        with open({str(path)!r}, encoding="utf-8") as f:
            n = sum(1 for _ in tok.encode_iterable(f))
        print(n, int(rss_mb() - before))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=240
    ).stdout
    count, growth_mb = map(int, out.split())
    return count, growth_mb


def test_encode_iterable_memory_does_not_grow_with_the_text(tmp_path: Path) -> None:
    """Streaming a 40 MB file line by line: peak RSS grows by a few MB at most, while the text and its ids
    would take over 100 MB if held."""
    path = tmp_path / "big.txt"
    line = "The quick brown fox jumps over the lazy dog; it's 1999 again.\n"
    with open(path, "w") as f:
        f.write(line * (40_000_000 // len(line)))
    count, growth_mb = streamed_ids_and_growth_mb(
        'Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"the"}, '
        '[(b"t", b"h"), (b"th", b"e")])',
        path,
    )
    assert count > 30_000_000
    assert growth_mb < 20, f"RSS grew by {growth_mb} MB"


def test_encode_iterable_memory_stays_small_on_real_text(tmp_path: Path) -> None:
    """Streaming 48 MB of prose with GPT-2's vocabulary, whose caches fill with tens of thousands of
    distinct words (unlike the toy vocabulary above): the caches a stream keeps are capped small, so RSS
    grows by a few MB (22 MB when streams shared the caps of whole-text calls)."""
    import lzma

    corpus = shared_file("corpora", "prose_en.txt.xz")
    path = tmp_path / "prose.txt"
    with lzma.open(corpus) as src, open(path, "wb") as dst:
        dst.write(src.read())
    vocab, merges = str(CS336 / "gpt2_vocab.json"), str(CS336 / "gpt2_merges.txt")
    count, growth_mb = streamed_ids_and_growth_mb(
        f'Tokenizer.from_files({vocab!r}, {merges!r}, ["<|endoftext|>"])', path
    )
    assert count > 10_000_000
    assert growth_mb < 10, f"RSS grew by {growth_mb} MB"
