"""Sources (issue 14): every kind of file, compression and iterable counts exactly as the documents joined
in one text file; bad data gets an error naming the file and line or row, or is skipped and counted;
counts merge, save, load and pickle; training on counts equals training on the text."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import pickle
import random
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
from bytepair import PreTokenCounts, count_pretokens, train_bpe, train_from_counts
from bytepair.counting import CountPart, count_part, count_parts, plan_parts
from bytepair.sources import SourceFile, resolve, shard
from conftest import shared_file

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
zstandard = pytest.importorskip("zstandard")

EOT = "<|endoftext|>"

DOCS = [
    "The cat sat.\n\nOn the mat and  then",
    "  \u3000日本語 x\u00e9t\u00e9  ",
    "one two" + EOT + "three",
    "",
    "  trailing space   \n",
    "emoji \U0001f600\U0001f600 and \t tabs",
    "numbers 12345 678\r\n",
]

FORMATS = ["txt", "jsonl", "json.gz", "jsonl.zst", "jsonl.xz", "txt.gz", "txt.zst", "txt.xz", "parquet"]


def compress(name: str, data: bytes) -> bytes:
    if name.endswith(".gz"):
        return gzip.compress(data)
    if name.endswith(".zst"):
        return zstandard.ZstdCompressor(write_checksum=True).compress(data)
    if name.endswith(".xz"):
        return lzma.compress(data)
    return data


def write_shard(path: Path, docs: list[str], string_type: object = None, row_group_size: int = 2) -> Path:
    """``docs`` as the file ``path``, in the format its name gives: a text file holds one document
    (its special tokens are its own), so several are written only as JSON lines or Parquet."""
    name = path.name
    if name.endswith(".parquet"):
        table = pa.table(
            {"id": list(range(len(docs))), "text": pa.array(docs, type=string_type or pa.string())}
        )
        pq.write_table(table, path, row_group_size=row_group_size)
    elif ".txt" in name:
        assert len(docs) == 1
        path.write_bytes(compress(name, docs[0].encode()))
    else:
        lines = "".join(json.dumps({"meta": {"n": 1}, "text": d}) + "\n" for d in docs)
        path.write_bytes(compress(name, lines.encode()))
    return path


def joined_counts(tmp_path: Path, docs: list[str], specials: list[str] | None = None) -> PreTokenCounts:
    path = tmp_path / "joined.txt"
    path.write_text(EOT.join(docs), encoding="utf-8")
    return count_pretokens(path, specials if specials is not None else [EOT])


def same_pretokens(a: PreTokenCounts, b: PreTokenCounts) -> bool:
    return a.most_common() == b.most_common()


def test_every_kind_of_source_counts_as_the_documents_joined(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    sources: list[object] = []
    docs: list[str] = []
    for i, fmt in enumerate(FORMATS):
        part = DOCS[i % len(DOCS) :] + DOCS[: i % 3]
        if fmt.startswith("txt"):
            part = [EOT.join(part)]
        write_shard(shards / f"{i}.{fmt}", part)
        docs.extend(part)
    sources.append(shards)
    sources.append(iter(DOCS))
    docs.extend(DOCS)
    counts = count_pretokens(sources, [EOT])
    expected = joined_counts(tmp_path, docs)
    assert same_pretokens(counts, expected)
    assert counts.special_tokens == [EOT]
    # A text file is one document; every record and item one.
    records = sum(len(DOCS[i % len(DOCS) :] + DOCS[: i % 3]) for i, f in enumerate(FORMATS) if "txt" not in f)
    assert counts.documents == 4 + records + len(DOCS)
    assert counts.bytes == expected.bytes - (len(docs) - 1) * len(EOT)
    assert counts.special_occurrences == expected.special_occurrences - (len(docs) - 1)
    vocab, merges = train_from_counts(counts, 400)
    assert (vocab, merges) == train_bpe(tmp_path / "joined.txt", 400, [EOT])


@st.composite
def shardings(draw: st.DrawFn) -> tuple[list[list[str]], list[str], int, list[int]]:
    """Documents split into shards of drawn formats, the order to give them in, and a thread count."""
    text = st.text(st.sampled_from("ab \n\t.é日\U0001f600'1"), max_size=30)
    docs = draw(st.lists(st.one_of(text, st.sampled_from(DOCS)), min_size=1, max_size=12))
    shards: list[list[str]] = []
    rest = list(docs)
    while rest:
        n = draw(st.integers(1, len(rest)))
        shards.append(rest[:n])
        rest = rest[n:]
    formats = [draw(st.sampled_from([*FORMATS, "iterable"])) for _ in shards]
    order = draw(st.permutations(range(len(shards))))
    return shards, formats, draw(st.integers(1, 4)), list(order)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shardings())
def test_any_split_into_shards_of_any_kinds_counts_and_trains_as_the_joined_text(
    tmp_path: Path, drawn
) -> None:
    shards, formats, threads, order = drawn
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    parts = []
    docs: list[str] = []
    for i, (shard_docs, fmt) in enumerate(zip(shards, formats)):
        if fmt.startswith("txt"):
            shard_docs = [EOT.join(shard_docs)]
        docs.extend(shard_docs)
        if fmt == "iterable":
            parts.append(count_pretokens(iter(shard_docs), [EOT], num_threads=threads))
        else:
            path = write_shard(folder / f"{i}.{fmt}", shard_docs, row_group_size=1 + i % 3)
            parts.append(count_pretokens(path, [EOT], num_threads=threads))
    expected = joined_counts(folder, docs)
    total = sum(parts[i] for i in order)
    assert same_pretokens(total, expected)
    assert total == sum(parts)  # any order, the same counts
    files = [folder / f"{i}.{fmt}" for i, fmt in enumerate(formats) if fmt != "iterable"]
    if files:
        together = count_pretokens(
            [files[i] for i in reversed(range(len(files)))], [EOT], num_threads=threads
        )
        alone = sum((p for p, fmt in zip(parts, formats) if fmt != "iterable"), PreTokenCounts())
        assert together == alone
    assert train_from_counts(total, 300) == train_bpe(folder / "joined.txt", 300, [EOT])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from(DOCS), max_size=4), min_size=3, max_size=3))
def test_merging_is_associative_and_commutative(texts: list[list[str]]) -> None:
    a, b, c = (count_pretokens(iter(t), [EOT]) for t in texts)
    assert (a + b) + c == a + (b + c) == (c + a) + b
    d = PreTokenCounts()
    d.update(a)
    d += b
    d.update(d)  # itself: doubles
    assert d == (a + b) + (a + b)
    assert sum([a, b, c]) == a + b + c


def test_counts_made_with_other_special_tokens_neither_merge_nor_train(tmp_path: Path) -> None:
    a = count_pretokens(iter(["x"]), [EOT])
    b = count_pretokens(iter(["y"]), [])
    with pytest.raises(ValueError, match="different special tokens"):
        a + b
    before = a.most_common()
    with pytest.raises(ValueError, match="different special tokens"):
        a.update(b)
    assert a.most_common() == before
    with pytest.raises(
        ValueError, match=r'made with the special tokens \["<\|endoftext\|>"\], not \["<pad>"\]'
    ):
        train_from_counts(a, 300, ["<pad>"])
    vocab, _ = train_from_counts(count_pretokens(iter(["ab ab"]), [EOT, "<pad>"]), 300, ["<pad>", EOT])
    assert list(vocab.values())[-2:] == [b"<pad>", EOT.encode()]
    with pytest.raises(TypeError, match="PreTokenCounts"):
        train_from_counts({b"ab": 3}, 300)  # type: ignore[arg-type]


def test_save_load_and_pickle_round_trip_and_same_counts_give_same_bytes(tmp_path: Path) -> None:
    a = count_pretokens(iter(DOCS), [EOT, "<pad>"])
    b = count_pretokens(iter(reversed(DOCS)), [EOT, "<pad>"], num_threads=1)
    a.save(tmp_path / "a.bpc")
    b.save(tmp_path / "b.bpc")
    assert (tmp_path / "a.bpc").read_bytes() == (tmp_path / "b.bpc").read_bytes()
    loaded = PreTokenCounts.load(tmp_path / "a.bpc")
    assert loaded == a and loaded.special_tokens == [EOT, "<pad>"] and loaded.documents == len(DOCS)
    assert isinstance(loaded, bytepair.PreTokenCounts)
    assert pickle.loads(pickle.dumps(a)) == a
    assert sorted(os.listdir(tmp_path)) == ["a.bpc", "b.bpc"]  # no temporary file left
    # Pickles keep the messages of skipped records, which the file does not.
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": 7}\n{}\n')
    skipped = count_pretokens(tmp_path / "bad.jsonl", errors="skip")
    unpickled = pickle.loads(pickle.dumps(skipped))
    assert unpickled == skipped and unpickled.skipped == 2
    assert unpickled.skipped_errors == skipped.skipped_errors and len(skipped.skipped_errors) == 2
    os.remove(tmp_path / "bad.jsonl")
    assert "7 documents" in repr(a)


def test_bad_counts_files_are_errors_naming_them(tmp_path: Path) -> None:
    good = count_pretokens(iter(DOCS * 20), [EOT])
    good.save(tmp_path / "good.bpc")
    data = (tmp_path / "good.bpc").read_bytes()
    cases = {
        "foreign.bpc": (b"PK\x03\x04" + data[4:], "not a bytepair counts file"),
        "newer.bpc": (data[:8] + b"\x02\x00\x00\x00" + data[12:], "written by a newer bytepair"),
        "truncated.bpc": (data[: len(data) // 2], "the file is"),
        "corrupt.bpc": (
            data[:-20] + bytes(b ^ 0x5A for b in data[-20:-10]) + data[-10:],
            "the file is corrupt",
        ),
        "empty.bpc": (b"", "not a bytepair counts file"),
    }
    for name, (content, why) in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ValueError, match=f"{name}: {why}"):
            PreTokenCounts.load(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        PreTokenCounts.load(tmp_path / "missing.bpc")
    # Saving where a directory is changes nothing.
    with pytest.raises(IsADirectoryError):
        good.save(tmp_path)
    assert PreTokenCounts.load(tmp_path / "good.bpc") == good


def check_bad_record(path: Path, where: str, why: str, good_docs: list[str]) -> None:
    """Strict: the error names ``where`` and says ``why``; skip: the bad record is skipped and counted
    and the good ones are all counted."""
    with pytest.raises(ValueError) as e:
        count_pretokens(path, [EOT])
    assert str(e.value) == f"{where}: {why}"
    counts = count_pretokens(path, [EOT], errors="skip")
    assert counts.skipped == 1 and counts.skipped_errors == [f"{where}: {why}"]
    assert counts.documents == len(good_docs)
    assert same_pretokens(counts, count_pretokens(iter(good_docs), [EOT]))


@pytest.mark.parametrize("suffix", ["jsonl", "json.gz", "jsonl.zst", "jsonl.xz"])
def test_bad_json_lines_name_the_file_and_line(tmp_path: Path, suffix: str) -> None:
    good = [json.dumps({"text": d}) for d in DOCS[:3]]
    bad_lines = {
        "bad-json": (b'{"text": "x"', "invalid JSON: EOF while parsing an object at column 12"),
        "bad-utf8": (
            b'{"text": "caf\xe9"}',
            "invalid UTF-8 at byte 13 of the line; the input must be UTF-8 text",
        ),
        "no-field": (b'{"body": "x"}', 'no field "text"'),
        "number": (b'{"text": 12}', 'field "text" is a number, not a string'),
        "null": (b'{"text": null}', 'field "text" is null, not a string'),
    }
    for name, (line, why) in bad_lines.items():
        path = tmp_path / f"{name}.{suffix}"
        data = "\n".join(good[:2]).encode() + b"\n\n" + line + b"\n" + good[2].encode() + b"\n"
        path.write_bytes(compress(path.name, data))
        check_bad_record(path, f"{path}:4", why, DOCS[:3])


@pytest.mark.parametrize("suffix", ["jsonl.gz", "jsonl.zst", "jsonl.xz", "txt.gz", "txt.zst", "txt.xz"])
def test_truncated_and_corrupt_streams_name_the_file(tmp_path: Path, suffix: str) -> None:
    docs = [f"document {i} " + "words and more words " * (i % 50) for i in range(400)]
    text = (
        EOT.join(docs) if suffix.startswith("txt") else "".join(json.dumps({"text": d}) + "\n" for d in docs)
    )
    data = compress(suffix, text.encode())
    name = {"gz": "gzip", "zst": "zstd", "xz": "xz"}[suffix.rsplit(".", 1)[1]]
    for kind, content in [
        ("truncated", data[: len(data) * 2 // 3]),
        ("corrupt", data[:40] + b"\x00" * 30 + data[70:]),
    ]:
        path = tmp_path / f"{kind}.{suffix}"
        path.write_bytes(content)
        with pytest.raises(ValueError, match=f"^{path}: corrupt or truncated {name} stream: "):
            count_pretokens(path, [EOT])
        counts = count_pretokens(path, [EOT], errors="skip")
        assert counts.skipped == 1
        assert counts.skipped_errors[0].startswith(f"{path}: corrupt or truncated {name} stream: ")
        # What came before the damage was counted.
        assert counts.total() < count_pretokens(iter(docs), [EOT]).total()


def test_invalid_utf8_in_a_text_file_is_an_error_even_when_skipping(tmp_path: Path) -> None:
    for name in ["bad.txt", "bad.txt.zst"]:
        path = tmp_path / name
        path.write_bytes(compress(name, b"fine text " * 10 + b"caf\xe9 " + b"more"))
        for errors in ["strict", "skip"]:
            with pytest.raises(ValueError, match=f"^{path}: invalid UTF-8 at byte offset 103"):
                count_pretokens(path, errors=errors)


def test_the_first_error_in_source_order_is_raised_whatever_the_threads(tmp_path: Path) -> None:
    good = "".join(json.dumps({"text": "fine " * 50}) + "\n" for _ in range(300))
    paths = []
    for i in range(6):
        path = tmp_path / f"{i}.jsonl.zst"
        bad = json.dumps({"text": i}) + "\n" if i in (2, 4) else ""
        path.write_bytes(compress(path.name, (good + bad + good).encode()))
        paths.append(path)
    for threads in [1, 2, 3, 8]:
        with pytest.raises(ValueError, match=f"^{paths[2]}:301: "):
            count_pretokens(tmp_path, num_threads=threads)
    counts = count_pretokens(tmp_path, errors="skip", num_threads=3)
    assert counts.skipped == 2
    assert [e.split(":")[0] for e in counts.skipped_errors] == [str(paths[2]), str(paths[4])]


def test_skip_keeps_the_first_ten_messages_in_source_order(tmp_path: Path) -> None:
    lines = "".join(json.dumps({"text": "ok"}) + "\n" + json.dumps({"text": [i]}) + "\n" for i in range(30))
    path = tmp_path / "many.jsonl"
    path.write_text(lines)
    counts = count_pretokens([path, path], errors="skip", num_threads=2)
    assert counts.skipped == 60 and counts.documents == 60
    assert counts.skipped_errors == [
        f'{path}:{2 * i + 2}: field "text" is a list, not a string' for i in range(10)
    ]


@pytest.mark.parametrize("string_type", ["string", "large_string", "string_view", "dictionary"])
def test_parquet_reads_every_string_column_in_row_groups(tmp_path: Path, string_type: str) -> None:
    docs = DOCS * 5
    column = {
        "string": pa.array(docs, pa.string()),
        "large_string": pa.array(docs, pa.large_string()),
        "string_view": pa.array(docs, pa.string_view()),
        "dictionary": pa.array(docs).dictionary_encode(),
    }[string_type]
    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"n": list(range(len(docs))), "body": column}), path, row_group_size=7)
    for threads in [1, 3]:
        counts = count_pretokens(path, [EOT], text_field="body", num_threads=threads)
        assert same_pretokens(counts, count_pretokens(iter(docs), [EOT]))
        assert counts.documents == len(docs)


@pytest.mark.parametrize("compression", ["none", "snappy", "gzip", "brotli", "zstd", "lz4"])
def test_parquet_reads_every_codec_writers_use(tmp_path: Path, compression: str) -> None:
    docs = DOCS * 30
    path = tmp_path / f"{compression}.parquet"
    pq.write_table(pa.table({"text": docs}), path, row_group_size=50, compression=compression)
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression.lower() != (
        "uncompressed" if compression != "none" else "x"
    )
    counts = count_pretokens(path, [EOT], num_threads=2)
    assert same_pretokens(counts, count_pretokens(iter(docs), [EOT])) and counts.documents == len(docs)


def test_a_row_group_is_read_in_batches_and_rows_are_numbered_across_them(tmp_path: Path) -> None:
    # One row group of 150,000 short rows: more than a batch holds (65,536), so the null row is in the
    # third batch, and its number counts the rows of the batches before it.
    docs: list[str | None] = [f"w{i % 1000} x" for i in range(150_000)]
    docs[140_001] = None
    path = tmp_path / "long.parquet"
    pq.write_table(pa.table({"text": docs}), path, row_group_size=len(docs))
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    good = [d for d in docs if d is not None]
    check_bad_record(path, f"{path}: row 140001", "the text is null", good)


def test_bad_parquet_files_name_the_file_and_row(tmp_path: Path) -> None:
    no_column = tmp_path / "no-column.parquet"
    pq.write_table(pa.table({"content": ["a"], "meta": pa.array([{"text": "a"}])}), no_column)
    message = f"^{no_column}: no column 'text' \\(its columns: 'content', 'meta'\\)$"
    for errors in ["strict", "skip"]:  # the caller named a column the file does not have: no skipping
        with pytest.raises(ValueError, match=message):
            count_pretokens(no_column, errors=errors)
    for name, column, kind in [
        ("numbers", [1, 2], "Int64"),
        ("binary", pa.array([b"a"], pa.binary()), "Binary"),
        ("lists", [["a"]], "List(Utf8, field: 'element')"),
    ]:
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"text": column}), path)
        message = f"{path}: column 'text' is {kind}, not a column of strings"
        with pytest.raises(ValueError) as e:
            count_pretokens(path, errors="skip")
        assert str(e.value) == message
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": ["a b", "c", None, "d"]}), nulls, row_group_size=2)
    check_bad_record(nulls, f"{nulls}: row 2", "the text is null", ["a b", "c", "d"])
    for garbage, content in [("garbage", b"PAR1 this is not really parquet"), ("empty", b"")]:
        path = tmp_path / f"{garbage}.parquet"
        path.write_bytes(content)
        with pytest.raises(ValueError, match=f"^{path}: not a Parquet file, or a corrupt one \\(.+\\)$"):
            count_pretokens(path)
        counts = count_pretokens([path, nulls], errors="skip")
        assert counts.skipped == 2 and counts.skipped_errors[0].startswith(f"{path}: not a Parquet file")
        assert counts.documents == 3


def test_invalid_utf8_in_a_parquet_string_column_is_damaged_data(tmp_path: Path) -> None:
    # Parquet requires a string column to be UTF-8, and the decoder checks a whole page: the row group
    # cannot be read from the first row of the batch on, and skip mode skips that much, counting once.
    offsets = pa.array([0, 4, 8], pa.int32()).buffers()[1]
    bad = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"good\xffbad")])
    path = tmp_path / "bad.parquet"
    with pq.ParquetWriter(path, pa.schema([("text", pa.string())])) as writer:
        writer.write_table(pa.table({"text": ["fine one", "fine two"]}))
        writer.write_table(pa.table({"text": bad}))
        writer.write_table(pa.table({"text": ["fine three"]}))
    with pytest.raises(ValueError) as e:
        count_pretokens(path)
    assert str(e.value).startswith(f"{path}: rows from 2 (row group 1) cannot be read: ")
    assert "UTF-8" in str(e.value)
    counts = count_pretokens(path, errors="skip")
    assert (counts.skipped, counts.documents) == (1, 3)
    assert same_pretokens(counts, count_pretokens(iter(["fine one", "fine two", "fine three"])))


def test_delta_encoded_text_pages_are_refused_by_name(tmp_path: Path) -> None:
    # arrow-rs 60 aborts the process on a damaged DELTA_BYTE_ARRAY page (fuzz/corpus/parquet/crash-*),
    # so row groups whose text pages use a delta encoding are refused as damaged data, sound or not.
    path = tmp_path / "delta.parquet"
    table = pa.table({"text": DOCS * 3})
    pq.write_table(
        table, path, row_group_size=7, use_dictionary=False, column_encoding={"text": "DELTA_BYTE_ARRAY"}
    )
    with pytest.raises(ValueError) as e:
        count_pretokens(path)
    assert str(e.value).startswith(
        f"{path}: rows from 0 (row group 0) cannot be read: a page of DELTA_BYTE_ARRAY"
    )
    counts = count_pretokens(path, errors="skip")
    assert (counts.skipped, counts.documents) == (3, 0)
    plain = tmp_path / "plain.parquet"
    pq.write_table(table, plain, row_group_size=7, use_dictionary=False, column_encoding={"text": "PLAIN"})
    assert count_pretokens(plain).documents == len(DOCS) * 3


def test_corrupt_parquet_data_names_the_file_and_rows(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.parquet"
    docs = [f"document number {i} " * 20 for i in range(200)]
    pq.write_table(pa.table({"text": docs}), path, row_group_size=50, compression="snappy")
    meta = pq.ParquetFile(path).metadata
    # Damage the second row group's column chunk (its dictionary page), whose pages hold rows 50 to 99.
    chunk = meta.row_group(1).column(0)
    data = bytearray(path.read_bytes())
    start = chunk.dictionary_page_offset + 20
    for i in range(start, start + 200):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=f"^{path}: rows from 50 \\(row group 1\\) cannot be read: "):
        count_pretokens(path, num_threads=2)
    counts = count_pretokens(path, errors="skip", num_threads=2)
    assert counts.skipped == 1 and counts.skipped_errors[0].startswith(f"{path}: rows from 50 (row group 1)")
    assert counts.documents == 150
    assert same_pretokens(counts, count_pretokens(iter(docs[:50] + docs[100:])))


def test_parquet_is_read_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": DOCS}), path, row_group_size=3)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    counts = count_pretokens(path, [EOT])
    assert same_pretokens(counts, count_pretokens(iter(DOCS), [EOT]))
    # Planning reads the row groups from the footer: parts of whole row groups add up to the file.
    (f,) = resolve(path).files
    parts = plan_parts([f], 1)
    assert [(p.start, p.end) for p in parts] == [(0, 1), (1, 2), (2, 3)]
    assert sum(p.size for p in parts) == f.size
    assert count_parts(parts, [EOT]) == counts == sum((count_part(p, [EOT]) for p in parts), PreTokenCounts())
    # Row groups past the end of the file are none.
    assert count_part(CountPart(f, 2, 9, 0), [EOT]).documents == 1
    assert count_part(CountPart(f, 5, 9, 0), [EOT]).documents == 0


def test_iterables_batch_documents_and_name_bad_items(monkeypatch: pytest.MonkeyPatch) -> None:
    from bytepair import counting

    monkeypatch.setattr(counting, "_BATCH_CHARACTERS", 10)  # many batches
    docs = DOCS * 7
    counts = count_pretokens((d for d in docs), [EOT], num_threads=2)
    assert same_pretokens(counts, count_pretokens(iter([EOT.join(docs)]), [EOT]))
    assert counts.documents == len(docs)
    with pytest.raises(TypeError, match="^item 30 is bytes, not str"):
        count_pretokens(iter([*docs[:30], b"bytes", "x"]))
    with pytest.raises(ValueError, match="^item 9: .*surrogate"):
        count_pretokens(iter([*docs[:9], "bad \ud800", "x"]))
    skipped = count_pretokens(iter([*docs[:9], "bad \ud800", "x"]), errors="skip")
    assert skipped.skipped == 1 and skipped.documents == 10
    assert count_pretokens(iter([]), [EOT]).special_tokens == [EOT]


def test_sources_resolve_to_sorted_files_and_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / ".git").mkdir()
    for name in ["d/b.txt", "d/a.jsonl", "d/sub/c.txt.zst", "d/.hidden.txt", "d/.git/x.txt"]:
        (tmp_path / name).write_bytes(compress(name, b"{}" if "jsonl" in name else b"x"))
    (tmp_path / "d" / "loop").symlink_to(tmp_path / "d")
    names = [os.path.relpath(f.path, tmp_path / "d") for f in resolve(tmp_path / "d").files]
    assert names == ["a.jsonl", "b.txt", "sub/c.txt.zst"]
    assert [Path(f.path).name for f in resolve(str(tmp_path / "d" / "**" / "*.txt*")).files] == [
        "b.txt",
        "c.txt.zst",
    ]
    (tmp_path / "d" / "README.md").write_text("hello")
    with pytest.raises(ValueError, match="README.md: unknown file type"):
        count_pretokens(tmp_path / "d")
    # Named on its own, a file of no known kind is text, as train_bpe always read it.
    assert count_pretokens(tmp_path / "d" / "README.md").most_common() == [(b"hello", 1)]
    (tmp_path / "x.csv.gz").write_bytes(gzip.compress(b"a,b"))
    with pytest.raises(ValueError, match="x.csv.gz: unknown file type"):
        count_pretokens(tmp_path / "x.csv.gz")
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        count_pretokens([tmp_path / "d" / "b.txt", tmp_path / "missing.txt"])
    with pytest.raises(FileNotFoundError, match="no file matches the pattern"):
        count_pretokens(str(tmp_path / "*.parquet"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="the directory holds no files"):
        count_pretokens(tmp_path / "empty")
    with pytest.raises(ValueError, match="empty list"):
        count_pretokens([])
    with pytest.raises(TypeError, match="mapping"):
        count_pretokens({"text": "x"})
    with pytest.raises(TypeError, match="not int"):
        count_pretokens(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='errors must be "strict" or "skip"'):
        count_pretokens(iter(["x"]), errors="ignore")


def test_shards_of_the_file_list_cover_it_once_by_bytes() -> None:
    rng = random.Random(14)
    files = [SourceFile(f"{i}.txt", "txt", None, rng.choice([0, 1, 10, 1000])) for i in range(50)]
    for count in [1, 2, 3, 7, 50, 80]:
        parts = [shard(files, i, count) for i in range(count)]
        assert [f for part in parts for f in part] == files
        total = sum(f.size for f in files)
        for part in parts:
            assert sum(f.size for f in part) <= total / count + 1000
    # Empty files at the end belong to the last part.
    tail = [SourceFile(f"{i}.txt", "txt", None, size) for i, size in enumerate([5, 5, 0, 0])]
    assert [len(shard(tail, i, 2)) for i in range(2)] == [1, 3]
    with pytest.raises(ValueError, match="shard index 3 is not in 0..2"):
        shard(files, 3, 3)


def test_shared_corpora_as_compressed_and_parquet_shards_train_as_the_text(tmp_path: Path) -> None:
    source = shared_file("corpora", "prose_en.txt.xz")
    with lzma.open(source, "rt", encoding="utf-8") as f:
        text = f.read(3_000_000)
    text = text[: text.rindex(EOT)]
    docs = text.split(EOT)
    rng = random.Random(14)
    shards = tmp_path / "shards"
    shards.mkdir()
    start, i = 0, 0
    while start < len(docs):
        n = rng.choice([1, 3, 10, 40, 120])
        fmt = ["jsonl.zst", "parquet", "json.gz", "txt.zst"][i % 4]
        part = docs[start : start + n]
        write_shard(
            shards / f"{i:04}.{fmt}", [EOT.join(part)] if fmt.startswith("txt") else part, row_group_size=17
        )
        start, i = start + n, i + 1
    joined = tmp_path / "joined.txt"
    joined.write_text(text, encoding="utf-8")
    counts = count_pretokens(shards, [EOT])
    assert same_pretokens(counts, count_pretokens(joined, [EOT]))
    assert train_from_counts(counts, 1000) == train_bpe(joined, 1000, [EOT])
    # The corpus itself, compressed as it is shared: read through xz.
    assert same_pretokens(
        count_pretokens(source, [EOT]), count_pretokens(iter([lzma.open(source, "rt").read()]), [EOT])
    )


def test_train_bpe_on_sources_is_counting_then_training_with_the_same_stats(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    shards.mkdir()
    write_shard(shards / "a.jsonl.zst", DOCS[:3])
    write_shard(shards / "b.parquet", DOCS[3:])
    joined = tmp_path / "joined.txt"
    joined.write_text(EOT.join([*DOCS, *DOCS]), encoding="utf-8")
    expected_stats: dict = {}
    expected = train_bpe(joined, 320, [EOT], stats=expected_stats)
    stats: dict = {}
    assert train_bpe([shards, iter(DOCS)], 320, [EOT], stats=stats, num_threads=2) == expected
    joins = 2 * len(DOCS) - 1  # the special tokens joining the documents: one token and len(EOT) bytes each
    assert stats == {
        "distinct_pretokens": expected_stats["distinct_pretokens"],
        "bytes": expected_stats["bytes"] - joins * len(EOT),
        "tokens": expected_stats["tokens"] - joins,
    }
    (shards / "c.jsonl").write_text('{"text": 1}\n')
    with pytest.raises(ValueError, match='c.jsonl:1: field "text" is a number'):
        train_bpe(shards, 320, [EOT])
    stats = {}
    assert train_bpe([shards, iter(DOCS)], 320, [EOT], errors="skip", stats=stats) == expected
    assert stats["skipped"] == 1
    # Text files alone train as they always did, progress and all.
    seen: list = []
    train_bpe(joined, 300, [EOT], progress=lambda *a: seen.append(a))
    assert seen[0][0] == "count" and seen[-1][0] == "merge"
