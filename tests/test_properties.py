"""Properties that hold for every input (hypothesis), with a tokenizer trained here so that nothing
depends on ../shared: decode inverts encode for every str, streaming and whole files equal encode for
any split and chunk size, saving and loading (GPT-2 files, HF tokenizer.json, tiktoken rank files,
pickle) gives the same tokenizer and ids, tiktoken with the same ranks gives the same ids, and training
on any small text with special tokens in it equals the pure-Python reference (on the full Unicode range
but the code points assigned in only one of the tables' and `regex`'s Unicode versions, CR included)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import Tokenizer, reference
from conftest import stable_characters

EOT = "<|endoftext|>"
# Special tokens that are prefixes of each other, the shorter first: where both match, leftmost-longest
# matching takes "<|a|><|b|>", leftmost-first would take "<|a|>" and leave "<|b|>" as text.
SPECIALS = [EOT, "<|a|>", "<|a|><|b|>"]
CORPUS = (
    "It's 1999 — the café's naïve owner said: «We'll see!» 日本語のテキスト、中文。\n"
    "    def f(x):\r\n        return x ** 2  # 🙂🙂 \t tabs\u00a0and\u3000spaces\n"
    "<|a|>Numbers ١٢٣ 4567 and   runs aaaaaaaa!!!! <|a|><|b|>the end." + EOT
) * 30


def examples(n: int) -> settings:
    return settings(
        max_examples=n, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    path.write_bytes(CORPUS.encode())
    vocab, merges = bytepair.train_bpe(path, 700, SPECIALS)
    return Tokenizer(vocab, merges, SPECIALS)


# Any str but surrogates (which cannot be UTF-8) and characters some Unicode involved does not know yet
# (tiktoken's is older than the tables'), and text made of the corpus's own pieces so that merges and
# special tokens occur.
pieces = st.sampled_from(
    ["It's", " the", " café", "日本", "  ", "\r\n", "\n\n", "<|a|>", "<|b|>", "<|a|><|b|>", EOT, "aaaa", "!"]
)
texts = st.one_of(
    st.text(stable_characters(assigned_in_python=True), max_size=300),
    st.lists(pieces, max_size=60).map("".join),
)
# Any text (but characters newly assigned in the tables' or `regex`'s Unicode) with the special tokens,
# their parts and their prefixes mixed in.
training_texts = st.lists(
    st.one_of(
        st.text(stable_characters(), max_size=20),
        st.sampled_from([*SPECIALS, "<|b|>", "<|a", "|>"]),
    ),
    max_size=20,
).map("".join)


@examples(1000)
@given(text=texts)
def test_decode_inverts_encode(tok: Tokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text)) == text


@examples(500)
@given(text=texts, cuts=st.lists(st.integers(0, 400), max_size=10))
def test_encode_iterable_over_any_split_equals_encode(tok: Tokenizer, text: str, cuts: list[int]) -> None:
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    parts = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(tok.encode_iterable(parts)) == tok.encode(text)


@examples(100)
@given(text=texts, chunk=st.integers(1, 64), threads=st.sampled_from([1, 2, 8]))
def test_encode_file_equals_encode_for_any_chunk_size(
    tok: Tokenizer, tmp_path: Path, text: str, chunk: int, threads: int
) -> None:
    src, out = tmp_path / "in.txt", tmp_path / "out.npy"
    src.write_bytes(text.encode())
    tok._encoder.encode_file(str(src), str(out), 16, threads, chunk, None)
    assert np.load(out).tolist() == tok.encode(text)


@pytest.fixture(scope="module")
def tiktoken_tok(tok: Tokenizer):
    """The same ranks as a tiktoken Encoding (ids are tiktoken ranks: the GPT-2 layout)."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {token: i for i, token in tok.vocab.items() if token.decode("utf-8", "replace") not in SPECIALS}
    return tiktoken.Encoding(
        "bytepair-test", pat_str=bytepair.GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )


def tiktoken_ids(enc, tok: Tokenizer, text: str) -> list[int]:
    """tiktoken's ids for the text between special tokens, and ours for the special tokens. tiktoken
    matches special tokens leftmost-first, not leftmost-longest: given "<|a|>" and "<|a|><|b|>", tiktoken
    0.14 encodes "<|a|><|b|>" as "<|a|>" and text, so the special tokens are split off here."""
    ids = {token: i for i, token in tok.vocab.items()}
    alternatives = "|".join(re.escape(t) for t in sorted(SPECIALS, key=len, reverse=True))
    out: list[int] = []
    for k, part in enumerate(re.split(f"({alternatives})", text)):
        out += [ids[part.encode()]] if k % 2 else enc.encode_ordinary(part)
    return out


@pytest.fixture(scope="module")
def reloaded(tok: Tokenizer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Tokenizer]:
    """The tokenizer saved and loaded back in each format, and pickled."""
    folder = tmp_path_factory.mktemp("formats")
    bytepair.save_bpe(tok.vocab, tok.merges, folder / "vocab.json", folder / "merges.txt")
    tok.to_hf(folder / "tokenizer.json")
    tok.to_tiktoken(folder / "bpe.tiktoken")
    special_ids = {t: tok.vocab_size - len(SPECIALS) + i for i, t in enumerate(SPECIALS)}
    return {
        "gpt2 files": Tokenizer.from_files(folder / "vocab.json", folder / "merges.txt", SPECIALS),
        "hf": Tokenizer.from_hf(folder / "tokenizer.json"),
        "tiktoken": Tokenizer.from_tiktoken(folder / "bpe.tiktoken", special_ids),
        "pickle": pickle.loads(pickle.dumps(tok)),
    }


def test_save_load_export_import_give_the_same_tokenizer(
    tok: Tokenizer, reloaded: dict[str, Tokenizer]
) -> None:
    for name, loaded in reloaded.items():
        assert (loaded.vocab, loaded.merges, loaded.special_tokens) == (tok.vocab, tok.merges, SPECIALS), name


@examples(200)
@given(text=texts)
def test_save_load_export_import_keep_the_ids(
    tok: Tokenizer, reloaded: dict[str, Tokenizer], tiktoken_tok, text: str
) -> None:
    ids = tok.encode(text)
    for name, loaded in reloaded.items():
        assert loaded.encode(text) == ids, name
    assert tiktoken_ids(tiktoken_tok, tok, text) == ids


@examples(150)
@given(text=training_texts, extra=st.integers(0, 30))
def test_training_on_any_text_equals_the_reference(tmp_path: Path, text: str, extra: int) -> None:
    pytest.importorskip("regex")
    path = tmp_path / "input.txt"
    path.write_bytes(text.encode())
    vocab_size = 256 + len(SPECIALS) + extra
    expected = reference.train_bpe(str(path), vocab_size, SPECIALS)
    for threads, chunk in [(1, None), (2, 3)]:
        assert (
            bytepair.train_bpe(path, vocab_size, SPECIALS, num_threads=threads, _chunk_size=chunk) == expected
        )
