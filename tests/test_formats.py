"""vocab.json / merges.txt: round trips for any bytes, the GPT-2 files, and what bad files get."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import load_bpe, save_bpe
from bytepair.formats import bytes_to_unicode
from conftest import CS336


def paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "vocab.json", tmp_path / "merges.txt"


def test_byte_table_is_gpt2s() -> None:
    table = bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[0] == "Ā" and table[ord("!")] == "!"
    assert all(not c.isspace() for c in table.values())


token = st.binary(min_size=1, max_size=12)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tokens=st.lists(token, unique=True, max_size=50),
    merges=st.lists(st.tuples(token, token), max_size=50),
)
def test_round_trip_of_any_bytes(
    tmp_path: Path, tokens: list[bytes], merges: list[tuple[bytes, bytes]]
) -> None:
    vocab = dict(enumerate(tokens))
    v, m = paths(tmp_path)
    save_bpe(vocab, merges, v, m)
    assert load_bpe(v, m) == (vocab, merges)


def test_round_trip_of_awkward_tokens(tmp_path: Path) -> None:
    vocab = {
        0: b" ",
        1: b"\n",
        2: b"\r\n",
        3: b"\xff\xfe",
        4: b"\xe6\x97",
        5: b"a b",
        6: b'"\\',
        7: b"#version",
    }
    merges = [(b"\r", b"\n"), (b" ", b" "), (b"\xe6", b"\x97"), (b"#version", b":")]
    v, m = paths(tmp_path)
    save_bpe(vocab, merges, v, m)
    assert load_bpe(v, m) == (vocab, merges)


def test_trained_tokenizer_round_trips(tmp_path: Path) -> None:
    corpus = CS336 / "corpus.en"
    vocab, merges = bytepair.train_bpe(corpus, 500, ["<|endoftext|>"])
    v, m = paths(tmp_path)
    save_bpe(vocab, merges, v, m)
    assert load_bpe(v, m) == (vocab, merges)


def test_loads_gpt2_files() -> None:
    vocab, merges = load_bpe(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt")
    assert len(vocab) == 50257 and len(merges) == 50000
    assert vocab[50256] == b"<|endoftext|>" and vocab[220] == b" "
    assert merges[0] == (b" ", b"t")
    tokens = set(vocab.values())
    assert all(a + b in tokens for a, b in merges)


def test_loads_header_and_windows_line_endings(tmp_path: Path) -> None:
    v, m = paths(tmp_path)
    v.write_text(json.dumps({"a": 0, "b": 1, "ab": 2, "Ġ": 3}), encoding="utf-8")
    m.write_bytes("#version: 0.2\r\na b\r\n\r\nĠ ab\r\n".encode())
    assert load_bpe(v, m) == ({0: b"a", 1: b"b", 2: b"ab", 3: b" "}, [(b"a", b"b"), (b" ", b"ab")])


def test_hf_tokenizers_reads_what_we_write(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {i: bytes([i]) for i in range(256)} | {256: b" t", 257: b"he", 258: b" the"}
    merges = [(b" ", b"t"), (b"h", b"e"), (b" t", b"he")]
    v, m = paths(tmp_path)
    save_bpe(vocab, merges, v, m)
    tok = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(str(v), str(m)))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    assert tok.encode(" the").ids == [258]


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    v, m = paths(tmp_path)
    save_bpe({0: b"a"}, [], v, m)
    before = v.read_bytes()
    with pytest.raises(TypeError):
        save_bpe({0: b"a", 1: "not bytes"}, [], v, m)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="both"):
        save_bpe({0: b"a", 1: b"a"}, [], v, m)
    with pytest.raises(ValueError, match=r"merges\[1\]"):
        save_bpe({0: b"a"}, [(b"a", b"a"), (b"a",)], v, m)  # type: ignore[list-item]
    with pytest.raises(FileNotFoundError):
        save_bpe({0: b"a"}, [], tmp_path / "no" / "vocab.json", m)
    assert v.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["merges.txt", "vocab.json"]


@pytest.mark.parametrize(
    ("vocab_text", "merges_text", "message"),
    [
        ("{not json", "", "vocab.json: not a JSON vocabulary"),
        ("[1, 2]", "", "expected a JSON object"),
        ('{"a": "zero"}', "", "must be a non-negative integer"),
        ('{"a": -1}', "", "must be a non-negative integer"),
        ('{"a": 0, "b": 0}', "", "id 0 is given to two tokens"),
        ('{"a b": 0}', "", "is not a character of the GPT-2 byte table"),
        ('{"a": 0}', "a b\nab\n", r"merges.txt:2: expected two tokens"),
        ('{"a": 0}', "a b c\n", r"merges.txt:1: expected two tokens"),
        ('{"a": 0}', "a  b\n", r"merges.txt:1: expected two tokens"),
        ('{"a": 0}', "a \u3000\n", r"merges.txt:1: '\\u3000' is not a character"),
    ],
)
def test_malformed_files_name_file_and_line(
    tmp_path: Path, vocab_text: str, merges_text: str, message: str
) -> None:
    v, m = paths(tmp_path)
    v.write_text(vocab_text, encoding="utf-8")
    m.write_text(merges_text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        load_bpe(v, m)


def test_missing_files(tmp_path: Path) -> None:
    v, m = paths(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_bpe(v, m)
    v.write_text("{}", encoding="utf-8")
    with pytest.raises(FileNotFoundError):
        load_bpe(v, m)
