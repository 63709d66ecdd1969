"""Memory: training grows with the number of distinct pre-tokens, not with the file; encode_file and
encode_iterable stay bounded whatever the input size.

Each measurement is the peak RSS of a fresh child process, read by the child itself (see
``conftest.MEMORY_PROBE``), so nothing the test process holds counts. The default sizes (50 and 200 MB)
keep the suite quick; ``BYTEPAIR_LONG_TESTS=1`` adds the sizes of the reliability issue: training on
2 GB under 500 MB, encode_file on 1.2 GB of code under 300 MB, encode_iterable over 200 MB growing less
than 20 MB.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import MEMORY_PROBE

LONG = os.environ.get("BYTEPAIR_LONG_TESTS") == "1"
# Seconds for a child process, and for a test of the long variants (pyproject.toml sets 300 for others).
DEFAULT_TIMEOUT, LONG_TIMEOUT = 240, 1500


def long_only(test):
    """A long variant: skipped unless BYTEPAIR_LONG_TESTS=1, and given the time its child needs."""
    test = pytest.mark.skipif(not LONG, reason="long variant: set BYTEPAIR_LONG_TESTS=1")(test)
    return pytest.mark.timeout(LONG_TIMEOUT + 300)(test)


EOT = "<|endoftext|>"
MB = 1 << 20


def peak_rss_mb(script: str, *args: str) -> tuple[str, float]:
    """Runs ``script`` in a fresh Python; returns its stdout and its own peak RSS in MB."""
    code = MEMORY_PROBE + textwrap.dedent(script) + "\nprint(rss_mb())\n"
    timeout = LONG_TIMEOUT if LONG else DEFAULT_TIMEOUT
    child = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )
    assert child.returncode == 0, child.stderr
    out, peak = child.stdout.rsplit("\n", 2)[:2]
    return out, float(peak)


def code_block() -> str:
    """About 1 MB of C-like code over 20,000 made-up identifiers: many distinct pre-tokens (more than the
    encoder's cache holds per call), like real code."""
    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz_"
    names = ["".join(rng.choices(letters, k=rng.randint(3, 12))) for _ in range(20_000)]
    lines: list[str] = []
    size = 0
    while size < MB:
        a, b, c = rng.sample(names, 3)
        n = rng.randint(0, 99999)
        lines.append(
            rng.choice(
                [
                    f"static int {a}(struct {b} *{c})\n{{\n",
                    f"\tif ({a}->{b} >= {n}) {{\n\t\treturn -E{c.upper()};\n\t}}\n",
                    f"\t{a} = {b}({c}, {n}, 0x{n:x}); /* {b} {c} */\n",
                    f"}}\n\n#define {a.upper()} {n}\n{EOT}\n",
                ]
            )
        )
        size += len(lines[-1])
    return "".join(lines)


def repeat_to(path: Path, block: str, size: int) -> Path:
    data = block.encode()
    with open(path, "wb") as f:
        for _ in range(size // len(data)):
            f.write(data)
    return path


@pytest.fixture(scope="module")
def block() -> str:
    return code_block()


TRAIN = """
    import sys, bytepair
    vocab, merges = bytepair.train_bpe(sys.argv[1], 2000, ["<|endoftext|>"], num_threads=2)
    print(len(merges))
"""


def test_training_memory_does_not_grow_with_the_file(block: str, tmp_path: Path) -> None:
    """50 MB and 200 MB of the same text have the same distinct pre-tokens: same merges, and the same
    peak memory within a few MB (chunks in flight and the per-thread maps are all that is held, so the
    tests fix 2 threads)."""
    small, small_peak = peak_rss_mb(TRAIN, str(repeat_to(tmp_path / "50.txt", block, 50 * MB)))
    big, big_peak = peak_rss_mb(TRAIN, str(repeat_to(tmp_path / "200.txt", block, 200 * MB)))
    assert small == big
    assert big_peak - small_peak < 20, (small_peak, big_peak)
    assert big_peak < 300, big_peak


@long_only
def test_training_on_2gb_stays_under_500mb(block: str, tmp_path: Path) -> None:
    _, peak = peak_rss_mb(TRAIN, str(repeat_to(tmp_path / "2g.txt", block, 2048 * MB)))
    assert peak < 500, peak


ENCODE_FILE = """
    import sys, bytepair
    vocab, merges = bytepair.train_bpe(sys.argv[1], 2000, ["<|endoftext|>"])
    tok = bytepair.Tokenizer(vocab, merges, ["<|endoftext|>"])
    print(tok.encode_file(sys.argv[2], sys.argv[3], num_threads=2))
"""


def encode_file_peak(block: str, tmp_path: Path, size: int) -> float:
    sample = tmp_path / "sample.txt"
    sample.write_text(block, encoding="utf-8")
    src = repeat_to(tmp_path / f"{size}.txt", block, size)
    out = tmp_path / f"{size}.npy"
    tokens, peak = peak_rss_mb(ENCODE_FILE, str(sample), str(src), str(out))
    assert int(tokens) > size // 8
    src.unlink()
    out.unlink()
    return peak


def test_encode_file_memory_is_bounded(block: str, tmp_path: Path) -> None:
    """On 2 threads (memory is per thread: chunks in flight and each worker's caches of pieces). The
    caches fill up to their caps (about 32 MB a thread) over hundreds of MB of long-tailed text, so the
    peak creeps up by a few tens of MB, and no further; each worker's table of pieces (16 MB) is
    written whole when the worker starts."""
    small_peak = encode_file_peak(block, tmp_path, 50 * MB)
    big_peak = encode_file_peak(block, tmp_path, 200 * MB)
    assert big_peak - small_peak < 40, (small_peak, big_peak)
    assert big_peak < 300, big_peak


@long_only
def test_encode_file_on_1_2gb_of_code_stays_under_300mb(block: str, tmp_path: Path) -> None:
    peak = encode_file_peak(block, tmp_path, 1229 * MB)
    assert peak < 300, peak


@long_only
def test_encode_iterable_over_200mb_grows_less_than_20mb(block: str, tmp_path: Path) -> None:
    src = repeat_to(tmp_path / "200.txt", block, 200 * MB)
    script = """
        import sys, bytepair
        tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"the"},
                                 [(b"t", b"h"), (b"th", b"e")], ["<|endoftext|>"])
        reset_peak()
        before = rss_mb("VmRSS")
        with open(sys.argv[1], encoding="utf-8") as f:
            n = sum(1 for _ in tok.encode_iterable(f))
        print(n, rss_mb() - before)
    """
    out, _ = peak_rss_mb(script, str(src))
    count, growth_mb = out.split()
    assert int(count) > 100_000_000
    assert float(growth_mb) < 20, growth_mb


def test_one_10mb_pre_token_costs_memory_linear_in_its_length(tmp_path: Path) -> None:
    """10 MiB with no cut: the chunk reader holds it whole (it must be seen whole), training holds it as
    one word, and encoding it takes about 30 bytes per byte (the bucket path's arrays): sane, linear."""
    src = tmp_path / "a.txt"
    src.write_bytes(b"a" * (10 * MB))
    train = """
        import sys, bytepair
        print(len(bytepair.train_bpe(sys.argv[1], 276)[1]))
    """
    merges, peak = peak_rss_mb(train, str(src))
    assert merges.strip() == "20" and peak < 200, peak
    encode = """
        import sys, bytepair
        tok = bytepair.Tokenizer(*bytepair.train_bpe(sys.argv[1], 276))
        print(tok.encode_file(sys.argv[1], sys.argv[1] + ".npy"))
    """
    tokens, peak = peak_rss_mb(encode, str(src))
    assert tokens.strip() == "10" and peak < 500, peak


PARQUET_ROW_GROUP = """
    import sys, bytepair
    path, kind = sys.argv[1], sys.argv[2]
    if kind == "encode":
        tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"<|endoftext|>"},
                                 [(b"t", b"h")], ["<|endoftext|>"])
        print(tok.encode_dataset(path, sys.argv[3], format="bin", num_threads=2).tokens)
    else:
        # One thread: a file of one row group is counted by one thread whatever num_threads says.
        print(bytepair.count_pretokens(path, ["<|endoftext|>"], num_threads=1).total())
"""


@pytest.mark.parametrize("kind", ["encode", "count"])
def test_parquet_memory_grows_neither_with_the_row_group_nor_the_document(
    block: str, tmp_path: Path, kind: str
) -> None:
    """The same 200 MB of documents in row groups of 100,000 rows (about 20 MB, more than a batch), then
    as one row group (pyarrow writes up to a million rows in one; the reader fetches a page at a time,
    never a column chunk whole), then joined into documents of 1 MB (rows are read in batches of about a
    fixed size of text, not a fixed number of rows): no peak more than 50 MB above the first (pyarrow's
    readers with their defaults went 107 MB above it counting one row group and 539 MB with the long
    documents, and encoding peaked at 396 MB), and the same result for the first two."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pieces = [d for d in block.split(EOT) if d] * (200 * MB // len(block))
    # Distinct documents, as real ones are (pyarrow stores repeated ones as a dictionary).
    documents = [f"{i} {d}" for i, d in enumerate(pieces)]
    long_documents, current, length = [], [], 0
    for d in documents:
        current.append(d)
        length += len(d)
        if length > MB:
            long_documents.append(" ".join(current))
            current, length = [], 0
    variants = {
        "row groups of 100,000 rows": (documents, 100_000),
        "one row group": (documents, len(documents)),
        "documents of 1 MB": (long_documents, len(long_documents)),
    }
    results, peaks = {}, {}
    for name, (texts, rows) in variants.items():
        path = tmp_path / f"{len(results)}.parquet"
        # A data page is read whole, and pyarrow ends one only every write_batch_size rows (1,024 by
        # default), so a page of the 1 MB documents would hold them all: write them a page each.
        batch = 1 if texts is long_documents else 1024
        pq.write_table(pa.table({"text": texts}), path, row_group_size=rows, write_batch_size=batch)
        if rows == len(texts):
            assert pq.ParquetFile(path).metadata.num_row_groups == 1
        out_dir = tmp_path / f"out{len(results)}"
        out, peaks[name] = peak_rss_mb(PARQUET_ROW_GROUP, str(path), kind, str(out_dir))
        results[name] = int(out)
        path.unlink()
        shutil.rmtree(out_dir, ignore_errors=True)
    assert results["one row group"] == results["row groups of 100,000 rows"] > 10 * MB
    assert results["documents of 1 MB"] > 10 * MB
    usual = peaks["row groups of 100,000 rows"]
    assert all(peak - usual < 50 for peak in peaks.values()), peaks
    assert max(peaks.values()) < 300, peaks
