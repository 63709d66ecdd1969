"""HF tokenizer.json and tiktoken rank files: the other libraries encode exactly as bytepair does, and
reading the files back gives the same tokenizer."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

import pytest

import bytepair
from bytepair import GPT2_PATTERN, Tokenizer, interop
from conftest import CS336, shared_file

SPECIAL = "<|endoftext|>"
SLICE = 1_000_000  # characters of each shared corpus: enough to meet most of the vocabulary


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    """The CS336 texts (tests/fixtures/cs336)."""
    names = ["tinystories_sample.txt", "address.txt", "german.txt", "corpus.en"]
    return {name: (CS336 / name).read_text(encoding="utf-8") for name in names}


@pytest.fixture(scope="module")
def corpora() -> dict[str, str]:
    """The first million characters of each big corpus in ../shared (a skip without it)."""
    found = {}
    for name in ["prose_en", "multilingual"]:
        with lzma.open(shared_file("corpora", f"{name}.txt.xz"), "rt", encoding="utf-8") as f:
            found[name] = f.read(SLICE)
    return found


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, texts: dict[str, str]) -> Tokenizer:
    """A tokenizer trained on the CS336 texts."""
    path = tmp_path_factory.mktemp("train") / "texts.txt"
    path.write_text(SPECIAL.join(texts.values()), encoding="utf-8")
    return Tokenizer(*bytepair.train_bpe(path, 3000, [SPECIAL]), [SPECIAL])


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt", [SPECIAL])


def documents(text: str) -> list[str]:
    """The text cut into documents of at most 20,000 characters, special tokens kept in them."""
    return [text[i : i + 20_000] for i in range(0, len(text), 20_000)]


def assert_hf_encodes_as(tok: Tokenizer, texts: dict[str, str], tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok.to_hf(tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for name, text in texts.items():
        docs = documents(text)
        ours = tok.encode_batch(docs)
        assert [e.ids for e in hf.encode_batch(docs)] == ours, name
        assert hf.decode_batch(ours, skip_special_tokens=False) == docs, name


def assert_tiktoken_encodes_as(tok: Tokenizer, texts: dict[str, str], tmp_path: Path) -> None:
    tiktoken = pytest.importorskip("tiktoken")
    tiktoken_load = pytest.importorskip("tiktoken.load")
    tok.to_tiktoken(tmp_path / "bpe.tiktoken")
    encoding = tiktoken.Encoding(
        "exported",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=tiktoken_load.load_tiktoken_bpe(str(tmp_path / "bpe.tiktoken")),
        special_tokens={SPECIAL: tok.encode(SPECIAL)[0]},
    )
    for name, text in texts.items():
        docs = documents(text)
        assert encoding.encode_batch(docs, allowed_special="all") == tok.encode_batch(docs), name


@pytest.mark.parametrize("which", ["trained", "gpt2"])
def test_hf_encodes_as_bytepair(
    tmp_path: Path, texts: dict[str, str], which: str, request: pytest.FixtureRequest
) -> None:
    assert_hf_encodes_as(request.getfixturevalue(which), texts, tmp_path)


@pytest.mark.parametrize("which", ["trained", "gpt2"])
def test_tiktoken_encodes_as_bytepair(
    tmp_path: Path, texts: dict[str, str], which: str, request: pytest.FixtureRequest
) -> None:
    assert_tiktoken_encodes_as(request.getfixturevalue(which), texts, tmp_path)


def test_hf_and_tiktoken_encode_as_bytepair_on_the_big_corpora(
    tmp_path: Path, corpora: dict[str, str], trained: Tokenizer, gpt2: Tokenizer
) -> None:
    for tok in [trained, gpt2]:
        assert_hf_encodes_as(tok, corpora, tmp_path)
        assert_tiktoken_encodes_as(tok, corpora, tmp_path)


@pytest.mark.parametrize("which", ["trained", "gpt2"])
def test_round_trips_give_the_same_tokenizer(
    tmp_path: Path, texts: dict[str, str], which: str, request: pytest.FixtureRequest
) -> None:
    tok: Tokenizer = request.getfixturevalue(which)
    tok.to_hf(tmp_path / "tokenizer.json")
    tok.to_tiktoken(tmp_path / "bpe.tiktoken")
    special_id = tok.encode(SPECIAL)[0]
    for loaded in [
        Tokenizer.from_hf(tmp_path / "tokenizer.json"),
        Tokenizer.from_tiktoken(tmp_path / "bpe.tiktoken", {SPECIAL: special_id}),
    ]:
        assert (loaded.vocab, loaded.merges, loaded.special_tokens) == (tok.vocab, tok.merges, [SPECIAL])
        assert loaded.encode(texts["german.txt"]) == tok.encode(texts["german.txt"])


def test_from_tiktoken_gives_listed_special_tokens_the_next_ids(tmp_path: Path) -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"hi"}
    interop.save_tiktoken(vocab, [(b"h", b"i")], [], tmp_path / "bpe.tiktoken")
    tok = Tokenizer.from_tiktoken(tmp_path / "bpe.tiktoken", ["<a>", "<b>"])
    assert tok.encode("hi<b><a>") == [256, 258, 257]


def test_from_tiktoken_never_merges_into_a_special_token(tmp_path: Path) -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    interop.save_tiktoken(vocab, [(b"a", b"b")], [], tmp_path / "bpe.tiktoken")
    tok = Tokenizer.from_tiktoken(tmp_path / "bpe.tiktoken", {"abc": 257})  # "ab" + "c", but special
    assert tok.merges == [(b"a", b"b")] and tok.encode("ab abc") == [256, 32, 257]


def test_merges_from_ranks_follow_tiktoken_not_the_token_order() -> None:
    # "abc" ranks after "bc" and before "ab": tiktoken builds it as a + bc.
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"bc", 257: b"abc", 258: b"ab"}
    assert interop.merges_from_ranks(vocab) == [(b"b", b"c"), (b"a", b"bc"), (b"a", b"b")]


def test_tiktoken_export_needs_ids_in_merge_order(tmp_path: Path) -> None:
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"cd"}
    with pytest.raises(ValueError, match="not in merge order"):
        interop.save_tiktoken(vocab, [(b"c", b"d"), (b"a", b"b")], [], tmp_path / "bpe.tiktoken")
    assert not (tmp_path / "bpe.tiktoken").exists()


def test_bad_files_are_rejected_with_their_name(tmp_path: Path) -> None:
    path = tmp_path / "bpe.tiktoken"
    path.write_text("aGk= 0\nnot base64!! 1\n")
    with pytest.raises(ValueError, match=r"bpe.tiktoken:2: expected 'base64-token rank'"):
        Tokenizer.from_tiktoken(path)
    hf = tmp_path / "tokenizer.json"
    Tokenizer({i: bytes([i]) for i in range(256)}, []).to_hf(hf)
    document = json.loads(hf.read_text(encoding="utf-8"))
    document["pre_tokenizer"] = {"type": "Whitespace"}
    hf.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(ValueError, match="pre-tokenizer must be ByteLevel"):
        Tokenizer.from_hf(hf)
    hf.write_text("{")
    with pytest.raises(ValueError, match="not a JSON tokenizer"):
        Tokenizer.from_hf(hf)
