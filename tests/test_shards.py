"""Token shard files (bytepair.shards): every format read back holds each document's ids as `encode` gives
them; Megatron's files also read by a reader written here from the published layout (and by Megatron's
own code when megatron-core is installed); nanoGPT's `.bin` is a plain memmap; checksums catch a changed
byte; ids are uint32 when the vocabulary does not fit uint16."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import bytepair
from bytepair import Tokenizer
from bytepair.dataset import tokenizer_hash
from conftest import CS336

EOT = "<|endoftext|>"
FORMATS = ["megatron", "bin", "npy"]


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt", [EOT])


def documents() -> dict[str, list[str]]:
    """Documents by input: a text file's are separated by the end-of-text token."""
    text = (CS336 / "tinystories_sample.txt").read_text(encoding="utf-8")
    stories = [s for s in text.split(EOT)]
    german = (CS336 / "german.txt").read_text(encoding="utf-8")
    return {
        "stories.txt": stories,
        "records.jsonl": [german, "", "a record with <|endoftext|> inside", "  spaces  \n"],
    }


def write_inputs(folder: Path) -> list[Path]:
    docs = documents()
    (folder / "stories.txt").write_text(EOT.join(docs["stories.txt"]), encoding="utf-8")
    with open(folder / "records.jsonl", "w", encoding="utf-8") as f:
        for d in docs["records.jsonl"]:
            f.write(json.dumps({"text": d, "id": 1}) + "\n")
    return [folder / "stories.txt", folder / "records.jsonl"]


def expected(tok: Tokenizer, eot: bool) -> list[list[int]]:
    """Each document's ids as `encode` gives them, with the end-of-text id after each when `eot`. A text
    file's last document, after its last separator, counts only when it has text."""
    eot_ids = tok.encode(EOT) if eot else []
    docs = documents()
    stories = docs["stories.txt"]
    if stories[-1] == "":
        stories = stories[:-1]
    return [tok.encode(d) + eot_ids for d in stories + docs["records.jsonl"]]


@pytest.mark.parametrize("eot", [True, False])
@pytest.mark.parametrize("format", FORMATS)
def test_each_format_holds_every_document_as_encode_gives_it(tmp_path, gpt2, format, eot):
    inputs = write_inputs(tmp_path)
    out = tmp_path / "out"
    summary = gpt2.encode_dataset(inputs, out, format=format, eot=eot)
    want = expected(gpt2, eot)
    assert summary.documents == len(want)
    assert summary.tokens == sum(map(len, want))
    assert summary.written == ["00000-stories", "00001-records"]
    shards = bytepair.shards.open(out)
    assert len(shards) == len(want)
    assert [ids.tolist() for ids in shards] == want
    assert [shards[i].tolist() for i in (0, -1)] == [want[0], want[-1]]
    assert [len(s) for s in shards.shards] == [len(want) - 4, 4]
    assert shards.tokens == summary.tokens
    shards.verify()


def read_megatron(prefix: Path) -> list[list[int]]:
    """The documents of a Megatron `.bin`/`.idx` pair, read from the published layout alone
    (megatron/core/datasets/indexed_dataset.py): header, version, dtype code, counts, then int32
    lengths, int64 byte pointers and int64 document indices."""
    idx = (prefix.with_suffix(".idx")).read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    (version,) = np.frombuffer(idx, dtype="<u8", count=1, offset=9)
    (code,) = np.frombuffer(idx, dtype="<u1", count=1, offset=17)
    sequences, document_count = np.frombuffer(idx, dtype="<u8", count=2, offset=18)
    assert version == 1
    dtype = {8: np.dtype("<u2"), 4: np.dtype("<i4")}[int(code)]
    offset = 34
    lengths = np.frombuffer(idx, dtype="<i4", count=int(sequences), offset=offset)
    offset += lengths.nbytes
    pointers = np.frombuffer(idx, dtype="<i8", count=int(sequences), offset=offset)
    offset += pointers.nbytes
    document_indices = np.frombuffer(idx, dtype="<i8", count=int(document_count), offset=offset)
    assert offset + document_indices.nbytes == len(idx), "nothing after the document indices"
    # Each document is one sequence.
    assert document_indices.tolist() == list(range(int(sequences) + 1))
    data = prefix.with_suffix(".bin").read_bytes()
    assert len(data) == int(lengths.sum()) * dtype.itemsize
    return [
        np.frombuffer(data, dtype=dtype, count=int(n), offset=int(p)).tolist()
        for n, p in zip(lengths, pointers)
    ]


def test_megatron_files_follow_the_published_layout(tmp_path, gpt2):
    inputs = write_inputs(tmp_path)
    gpt2.encode_dataset(inputs, tmp_path / "out", format="megatron")
    got = read_megatron(tmp_path / "out" / "00000-stories") + read_megatron(
        tmp_path / "out" / "00001-records"
    )
    assert got == expected(gpt2, eot=True)


def test_megatron_core_reads_the_shards(tmp_path, gpt2):
    indexed_dataset = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    inputs = write_inputs(tmp_path)
    gpt2.encode_dataset(inputs, tmp_path / "out", format="megatron")
    got = []
    for name in ["00000-stories", "00001-records"]:
        ds = indexed_dataset.IndexedDataset(str(tmp_path / "out" / name))
        got += [ds[i].tolist() for i in range(len(ds))]
    assert got == expected(gpt2, eot=True)


def test_nanogpt_bin_is_a_plain_memmap_of_the_ids(tmp_path, gpt2):
    inputs = write_inputs(tmp_path)
    gpt2.encode_dataset(inputs[:1], tmp_path / "out", format="bin")
    ids = np.memmap(tmp_path / "out" / "00000-stories.bin", dtype=np.uint16, mode="r")
    want = expected(gpt2, eot=True)[:-4]
    assert ids.tolist() == [i for doc in want for i in doc]
    offsets = np.load(tmp_path / "out" / "00000-stories.idx.npy")
    assert offsets.dtype == np.int64
    assert offsets.tolist() == np.cumsum([0] + [len(d) for d in want]).tolist()


def test_npy_files_load_with_numpy(tmp_path, gpt2):
    inputs = write_inputs(tmp_path)
    gpt2.encode_dataset(inputs[1:], tmp_path / "out", format="npy", eot=False)
    ids = np.load(tmp_path / "out" / "00000-records.npy")
    offsets = np.load(tmp_path / "out" / "00000-records.offsets.npy")
    want = expected(gpt2, eot=False)[-4:]
    assert ids.dtype == np.uint16
    assert [ids[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])] == want
    assert want[1] == [], "an empty record is an empty document"


@pytest.mark.parametrize("format", FORMATS)
def test_verify_names_a_file_with_a_changed_byte(tmp_path, gpt2, format):
    inputs = write_inputs(tmp_path)
    gpt2.encode_dataset(inputs, tmp_path / "out", format=format)
    shards = bytepair.shards.open(tmp_path / "out")
    shards.verify()
    data = shards.shards[1].paths[0]
    del shards
    raw = bytearray(Path(data).read_bytes())
    raw[-1] ^= 1
    Path(data).write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"00001-records\.(bin|npy): its size or checksum"):
        bytepair.shards.open(tmp_path / "out").verify()


@pytest.mark.parametrize("format", FORMATS)
def test_a_vocabulary_beyond_uint16_gets_uint32_ids(tmp_path, format):
    vocab = {i: bytes([i]) for i in range(256)} | {70_000: EOT.encode()}
    tok = Tokenizer(vocab, [], [EOT])
    summary = tok.encode_dataset(iter(["ab", "", "c"]), tmp_path / "out", format=format)
    assert summary.dtype == ("int32" if format == "megatron" else "uint32")
    assert f"ids are {summary.dtype}" in str(summary)
    shards = bytepair.shards.open(tmp_path / "out")
    assert [ids.tolist() for ids in shards] == [[97, 98, 70_000], [70_000], [99, 70_000]]
    assert shards.shards[0].ids.dtype.itemsize == 4
    if format == "megatron":
        assert read_megatron(tmp_path / "out" / "00000-iterable") == [
            [97, 98, 70_000],
            [70_000],
            [99, 70_000],
        ]


def test_open_refuses_a_folder_without_a_shard_set(tmp_path):
    with pytest.raises(FileNotFoundError, match="no shard set"):
        bytepair.shards.open(tmp_path)
    (tmp_path / "manifest.json").write_text('{"rows": 1}')
    with pytest.raises(ValueError, match="not the manifest of a bytepair shard set"):
        bytepair.shards.open(tmp_path)


def test_the_manifest_records_the_tokenizer_inputs_and_files(tmp_path, gpt2):
    inputs = write_inputs(tmp_path)
    gpt2.encode_dataset(inputs, tmp_path / "out", format="bin")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["bytepair_version"] == bytepair.__version__
    assert manifest["tokenizer"]["sha256"] == tokenizer_hash(gpt2)
    assert manifest["eot_id"] == gpt2.encode(EOT)[0]
    first = manifest["shards"][0]
    assert first["inputs"][0]["path"] == str(inputs[0])
    assert first["inputs"][0]["size"] == os.path.getsize(inputs[0])
    for f in first["files"]:
        assert f["bytes"] == os.path.getsize(tmp_path / "out" / f["name"])


def readme_recipes() -> list[str]:
    """The Python blocks of README.md's section on token shards, in order."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Token shards for training\n", 1)[1].split("\n## ", 1)[0]
    return [block.split("\n```", 1)[0] for block in section.split("```python\n")[1:]]


def test_the_readme_recipes_run_end_to_end_on_a_directory_of_parquet_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    stories = [s for s in (CS336 / "tinystories_sample.txt").read_text(encoding="utf-8").split(EOT) if s]
    parts = [stories[: len(stories) // 2], stories[len(stories) // 2 :]]
    (tmp_path / "data").mkdir()
    for i, part in enumerate(parts):
        pq.write_table(pa.table({"text": part}), tmp_path / "data" / f"train-{i:05d}.parquet")
    recipes = readme_recipes()
    assert len(recipes) == 2, "the nanoGPT recipe and the Megatron one"
    monkeypatch.chdir(tmp_path)
    names: dict[str, object] = {}
    for recipe in recipes:
        exec(compile(recipe, "README.md", "exec"), names)

    tok = names["tok"]
    assert isinstance(tok, Tokenizer)
    eot = tok.encode(EOT)
    first = np.concatenate([tok.encode(s) + eot for s in parts[0]])
    data, x, y = names["data"], names["x"], names["y"]
    assert data.dtype == np.uint16 and np.array_equal(data, first)
    assert x.shape == y.shape == (4, 64) and np.array_equal(x[:, 1:], y[:, :-1])
    assert all(np.array_equal(row, data[i : i + 64]) for row, i in zip(x, names["ix"]))

    shards = names["shards"]
    want = [tok.encode(s) + eot for s in stories]
    assert shards.documents == len(stories) and [d.tolist() for d in shards] == want
    assert [d for prefix in names["prefixes"] for d in read_megatron(Path(prefix))] == want
    assert capsys.readouterr().out.startswith(f"{len(stories)} {shards.tokens} {stories[0]}")
