"""Out of memory is a MemoryError, never an abort (issue 12, section 2).

Stanford CS336's tests limit a process's address space to its resident memory plus 1 MB and call
``encode`` on a 5 MB text, expecting MemoryError; bytepair used to abort the interpreter ("memory
allocation of 20000000 bytes failed", SIGABRT), and the test run with it.

Each case here runs in a child process, so that an abort cannot take pytest with it. The child loads a
tokenizer and its input, limits RLIMIT_AS to its resident memory plus a headroom, makes one call, lifts
the limit (the hard limit stays unlimited) and makes the same call again. RLIMIT_AS counts virtual
memory, and a Python process has far more mapped than resident, so the limit is below what is already
mapped: no new mapping can be made (no mmap, no brk, no thread stack), and only what the allocator
holds in its free lists is left. The child reports as JSON; the test asserts that it exited normally,
that the call raised MemoryError or returned the right result, that nothing was printed on stderr, that
no file was left behind, and that the call works once the limit is lifted.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import bytepair
from bytepair import Tokenizer

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux's"
)

HEADROOMS = [1_000_000, 20_000_000, 50_000_000, 100_000_000]
SPECIALS = ["<|endoftext|>"]
TRAIN_VOCAB_SIZE = 700

# What the child does before and after its call: load the tokenizer and the text, then run CALL with
# the address space limited, and again without a limit. `digest` reduces a result to a short string the
# parent compares with its own.
CHILD = """
import hashlib, json, os, resource, sys
import bytepair
from bytepair import Tokenizer

work, entry, headroom = sys.argv[1], sys.argv[2], int(sys.argv[3])
tok_dir = os.path.join(work, "tok")
corpus = os.path.join(work, "corpus.txt")
out_dir = sys.argv[4]
tok = Tokenizer.from_dir(tok_dir)
vocab, merges = tok.vocab, tok.merges
with open(corpus, encoding="utf-8") as f:
    text = f.read()
half = len(text) // 2
blocks = [text[i : i + 1_000_000] for i in range(0, len(text), 1_000_000)]
ids = tok.encode(text) if entry == "decode" else None

def read_npy():
    import numpy as np
    return np.load(os.path.join(out_dir, "out.npy")).tolist()

CALLS = {
    "encode": lambda: tok.encode(text),
    "encode_to_numpy": lambda: tok.encode_to_numpy(text),
    "encode_batch": lambda: tok.encode_batch([text[:half], text[half:]]),
    "encode_iterable": lambda: list(tok.encode_iterable(blocks)),
    "decode": lambda: tok.decode(ids),
    "train_bpe": lambda: bytepair.train_bpe(corpus, TRAIN_VOCAB_SIZE, SPECIALS, num_threads=1),
    "encode_file": lambda: tok.encode_file(corpus, os.path.join(out_dir, "out.npy"), num_threads=1),
    "Tokenizer": lambda: Tokenizer(vocab, merges, SPECIALS).encode("hello there"),
    "from_files": lambda: Tokenizer.from_files(
        os.path.join(tok_dir, "vocab.json"), os.path.join(tok_dir, "merges.txt"), SPECIALS
    ).encode("hello there"),
    "pretokenize": lambda: bytepair.pretokenize(text),
    "count_parquet": lambda: bytepair.count_pretokens(
        os.path.join(work, "corpus.parquet"), SPECIALS, num_threads=1
    ).most_common(),
    "count_jsonl_zst": lambda: bytepair.count_pretokens(
        os.path.join(work, "corpus.jsonl.zst"), SPECIALS, num_threads=1
    ).most_common(),
}

call = CALLS[entry]
if entry == "encode_to_numpy":
    import numpy  # imported by the call otherwise, which the limit would make fail
report = {}
resource.setrlimit(resource.RLIMIT_AS, (resident() + headroom, resource.RLIM_INFINITY))
try:
    during = call()
    report["outcome"] = "finished"
except MemoryError as e:
    during = None
    report["outcome"] = "MemoryError"
    report["message"] = str(e)
except BaseException as e:
    during = None
    report["outcome"] = type(e).__name__
    report["message"] = str(e)
finally:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
if entry == "encode_file" and during is not None:
    during = (during, read_npy())
report["left"] = sorted(os.listdir(out_dir))
after = call()
if entry == "encode_file":
    after = (after, read_npy())
if entry == "encode_to_numpy":
    during, after = None if during is None else during.tolist(), after.tolist()
report["during"] = None if during is None else digest(during)
report["after"] = digest(after)
print(json.dumps(report))
"""

DIGEST = """
def digest(result):
    return hashlib.sha256(repr(result).encode("utf-8")).hexdigest()
"""

# What every child measures before it limits its address space: its resident memory, and what it has
# mapped (what RLIMIT_AS counts), in bytes.
MEMORY = """
import os

def resident():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) * 1024

def mapped():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
"""


def digest(result: object) -> str:
    return hashlib.sha256(repr(result).encode("utf-8")).hexdigest()


def corpus_text() -> str:
    """5 MB of ASCII text made of a few thousand words, documents separated by the special token."""
    rng = random.Random(12)
    letters = "etaoinshrdlucmfwypvbgkqjxz"
    words = ["".join(rng.choices(letters, k=rng.randint(1, 9))) for _ in range(3000)]
    docs = []
    size = 0
    while size < 5_000_000:
        doc = " ".join(rng.choices(words, k=rng.randint(50, 400))) + ".\n"
        docs.append(doc)
        size += len(doc) + len(SPECIALS[0])
    return SPECIALS[0].join(docs)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the corpus (corpus.txt) and a tokenizer trained on part of it (tok/)."""
    work = tmp_path_factory.mktemp("memory")
    text = corpus_text()
    (work / "corpus.txt").write_text(text, encoding="utf-8")
    (work / "sample.txt").write_text(text[:300_000], encoding="utf-8")
    vocab, merges = bytepair.train_bpe(work / "sample.txt", 600, SPECIALS)
    Tokenizer(vocab, merges, SPECIALS).save(work / "tok")
    # The documents as shards: Parquet (decoded by arrow-rs, whose allocations abort when they fail
    # unless the reader reserves their memory first) and JSON lines compressed with zstd.
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    zstandard = pytest.importorskip("zstandard")
    docs = text.split(SPECIALS[0])
    pq.write_table(pa.table({"text": docs}), work / "corpus.parquet", row_group_size=2000)
    lines = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    (work / "corpus.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    return work


@pytest.fixture(scope="module")
def expected(work: Path) -> dict[str, str]:
    """The digest of each entry point's result, computed in this process without a limit."""
    tok = Tokenizer.from_dir(work / "tok")
    corpus = work / "corpus.txt"
    text = corpus.read_text(encoding="utf-8")
    half = len(text) // 2
    ids = tok.encode(text)
    return {
        "encode": digest(ids),
        "encode_to_numpy": digest(ids),
        "encode_batch": digest(tok.encode_batch([text[:half], text[half:]])),
        "encode_iterable": digest(ids),
        "decode": digest(text),
        "train_bpe": digest(bytepair.train_bpe(corpus, TRAIN_VOCAB_SIZE, SPECIALS, num_threads=1)),
        "encode_file": digest((len(ids), ids)),
        "Tokenizer": digest(tok.encode("hello there")),
        "from_files": digest(tok.encode("hello there")),
        "pretokenize": digest(bytepair.pretokenize(text)),
        "count_parquet": digest(bytepair.count_pretokens(work / "corpus.parquet", SPECIALS).most_common()),
        "count_jsonl_zst": digest(
            bytepair.count_pretokens(work / "corpus.jsonl.zst", SPECIALS).most_common()
        ),
    }


def run_child(
    work: Path, out_dir: Path, entry: str, headroom: int
) -> tuple[subprocess.CompletedProcess, dict]:
    script = (
        f"TRAIN_VOCAB_SIZE = {TRAIN_VOCAB_SIZE}\nSPECIALS = {SPECIALS!r}\n"
        + MEMORY
        + DIGEST
        + textwrap.dedent(CHILD)
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(work), entry, str(headroom), str(out_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}
    return proc, report


def check(
    proc: subprocess.CompletedProcess, report: dict, expected: str, allowed_left: set[str] | None
) -> None:
    """Asserts that the child exited normally and printed nothing, that its call under the limit
    raised MemoryError or gave `expected` (a digest), and gave it once the limit was lifted; and that it
    left no file but those of `allowed_left` (None: a child that writes no file and reports none)."""
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    assert proc.stderr == "", proc.stderr[-2000:]
    assert report["outcome"] in ("finished", "MemoryError"), report
    if report["outcome"] == "finished":
        assert report["during"] == expected, "the call under the limit gave a wrong result"
    if allowed_left is not None:
        assert set(report["left"]) <= allowed_left, f"files left behind: {report['left']}"
    assert report["after"] == expected, "after the limit was lifted, the call gave a wrong result"


ENTRIES = [
    "encode",
    "encode_to_numpy",
    "encode_batch",
    "encode_iterable",
    "decode",
    "train_bpe",
    "encode_file",
    "Tokenizer",
    "from_files",
    "pretokenize",
    "count_parquet",
    "count_jsonl_zst",
]


@pytest.mark.parametrize("headroom", HEADROOMS, ids=lambda h: f"rss+{h // 1_000_000}MB")
@pytest.mark.parametrize("entry", ENTRIES)
def test_entry_point_raises_memory_error_or_finishes(
    work: Path, expected: dict[str, str], tmp_path: Path, entry: str, headroom: int
) -> None:
    proc, report = run_child(work, tmp_path, entry, headroom)
    # encode_file's output may be there once a call finished; its temporary file never.
    check(proc, report, expected[entry], {"out.npy"} if entry == "encode_file" else set())


@pytest.mark.parametrize("entry", ["encode", "encode_to_numpy"])
def test_encode_of_5mb_under_1mb_names_what_it_could_not_allocate(
    work: Path, tmp_path: Path, entry: str
) -> None:
    """CS336's case: the ids of a 5 MB text do not fit in 1 MB, and the message says so."""
    proc, report = run_child(work, tmp_path, entry, 1_000_000)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert report["outcome"] == "MemoryError", report
    assert "could not allocate" in report["message"] and "for the ids of a 5.0 MB text" in report["message"]


CLI_CHILD = """
import io, json, os, resource, sys
from bytepair import cli

tok_dir, text_path, headroom = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(text_path, encoding="utf-8") as f:
    text = f.read()
sys.stdout = open(os.devnull, "w")
# A first run imports what the command needs (argparse's first parser imports gettext and locale), so
# that the limit falls on the work, not on reading modules.
cli.main(["inspect", tok_dir, "warm up"])

report = {}
resource.setrlimit(resource.RLIMIT_AS, (resident() + headroom, resource.RLIM_INFINITY))
try:
    report["status"] = cli.main(["inspect", tok_dir, text])
except BaseException as e:
    report["raised"] = type(e).__name__
finally:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
sys.stderr.flush()
sys.stderr = io.StringIO()
report["after"] = cli.main(["inspect", tok_dir, text])
sys.__stdout__.write(json.dumps(report))
"""


def test_cli_reports_out_of_memory_in_one_line(work: Path) -> None:
    """`bytepair inspect DIR TEXT` on a 5 MB TEXT with 1 MB to spare: the usual one-line error, exit 1."""
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY + CLI_CHILD, str(work / "tok"), str(work / "corpus.txt"), "1000000"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report == {"status": 1, "after": 0}, (report, proc.stderr[-2000:])
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("bytepair: error: "), proc.stderr[-2000:]
    assert "allocate" in lines[0] or "out of memory" in lines[0], lines[0]


PARQUET_CHILD = """
import json, os, resource, sys
import bytepair

path, out, entry, headroom = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tok = bytepair.Tokenizer.from_dir(sys.argv[5])

def call():
    if entry == "count":
        return bytepair.count_pretokens(path, SPECIALS, num_threads=1).total()
    return tok.encode_dataset(path, out, format="bin", num_threads=1, resume=False).tokens

report = {}
resource.setrlimit(resource.RLIMIT_AS, (mapped() + headroom, resource.RLIM_INFINITY))
try:
    report["during"] = call()
    report["outcome"] = "finished"
except MemoryError as e:
    report["outcome"] = "MemoryError"
    report["message"] = str(e)
except BaseException as e:
    report["outcome"] = type(e).__name__
    report["message"] = str(e)
finally:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
report["after"] = call()
print(json.dumps(report))
"""


@pytest.mark.parametrize("entry", ["count", "encode"])
def test_parquet_decoding_under_a_memory_limit_is_a_memory_error_not_an_abort(
    work: Path, tmp_path: Path, entry: str
) -> None:
    """arrow-rs aborts the process when one of its allocations fails; the reader reserves what a batch
    and its pages take first. Pages here hold 1,000 documents of 14 KB (pyarrow checks a page's size
    every 1,024 rows), 14 MB each. The limit is what is mapped plus a headroom, so new mappings can
    be made up to it: the decoder's large allocations are what fails, at 5 to 60 MB."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    words = (work / "sample.txt").read_text(encoding="utf-8").split()
    docs = [" ".join(words[i % 1000 : i % 1000 + 2500]) for i in range(3000)]
    path = tmp_path / "pages.parquet"
    pq.write_table(pa.table({"text": docs}), path, row_group_size=1000)
    script = f"SPECIALS = {SPECIALS!r}\n" + MEMORY + textwrap.dedent(PARQUET_CHILD)
    outcomes = []
    for headroom in [5_000_000, 10_000_000, 20_000_000, 40_000_000, 60_000_000]:
        out = tmp_path / f"out-{headroom}"
        proc = subprocess.run(
            [sys.executable, "-c", script, str(path), str(out), entry, str(headroom), str(work / "tok")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
        assert proc.stderr == "", proc.stderr[-2000:]
        report = json.loads(proc.stdout)
        assert report["outcome"] in ("finished", "MemoryError"), report
        if report["outcome"] == "finished":
            assert report["during"] == report["after"]
        else:
            assert "could not allocate" in report["message"], report
        outcomes.append(report["outcome"])
    assert "MemoryError" in outcomes, outcomes


DAMAGED_HEADER_CHILD = """
import json, os, resource, sys
import bytepair

report = {}
for limit in ["limited", "unlimited"]:
    if limit == "limited":
        resource.setrlimit(resource.RLIMIT_AS, (mapped() + 60_000_000, resource.RLIM_INFINITY))
    try:
        report[limit] = ["finished", bytepair.count_pretokens(sys.argv[1], num_threads=1).total()]
    except Exception as e:
        report[limit] = [type(e).__name__, str(e)]
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print(json.dumps(report))
"""


def test_a_page_header_claiming_more_memory_than_the_limit_is_a_memory_error_not_an_abort(
    tmp_path: Path,
) -> None:
    """arrow-rs allocates the decompressed size a page's header claims before decompressing it; the
    reader reads the headers first and reserves that. Here one page of 1.4 MB (snappy) claims 134 MB:
    under a limit 60 MB above what is mapped that is a MemoryError (it aborted the process when the
    reservation came from the row group's statistics); without a limit arrow-rs decompresses the page
    into the 134 MB and reads its values, the rest zeros it ignores."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "claims.parquet"
    docs = [f"document {i} " + "some words of text " * 150 for i in range(500)]
    pq.write_table(
        pa.table({"text": docs}), path, compression="snappy", use_dictionary=False, data_page_size=1 << 26
    )
    sound = bytepair.count_pretokens(path).total()
    meta = pq.ParquetFile(path).metadata.row_group(0).column(0)
    data = bytearray(path.read_bytes())
    start = meta.data_page_offset

    def varint(value: int) -> bytes:
        out = bytearray()
        while value >= 0x80:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        return bytes([*out, value])

    # The page header starts: type (0x15 0x00), then uncompressed_page_size (0x15, a zigzag varint).
    assert data[start : start + 3] == b"\x15\x00\x15"
    end = start + 3
    while data[end] & 0x80:
        end += 1
    claimed = varint(2 * (2**27 - 1))
    assert end + 1 - (start + 3) == len(claimed) == 4, "the size's varint is not 4 bytes long"
    data[start + 3 : end + 1] = claimed
    path.write_bytes(bytes(data))
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY + DAMAGED_HEADER_CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"the child died ({proc.returncode}): {proc.stderr[-2000:]}"
    assert proc.stderr == "", proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["limited"][0] == "MemoryError" and "could not allocate" in report["limited"][1], report
    assert report["unlimited"] == ["finished", sound], report


GROWTH_CHILD = """
import json, os, resource, sys
from bytepair import Tokenizer

tok = Tokenizer.from_dir(sys.argv[1])
# 20M characters and 10M ids: the list's array starts with room for 5M and must grow, block by block.
text = "a b " * 5_000_000
b = tok.encode(" b")[0]
before = sys.getrefcount(b)
limit = mapped() + int(sys.argv[2])
report = {}
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
try:
    report["limited"] = ["finished", len(tok.encode(text))]
except MemoryError as e:
    report["limited"] = ["MemoryError", str(e)]
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
report["references_added"] = sys.getrefcount(b) - before
report["unlimited"] = len(tok.encode(text))
print(json.dumps(report))
"""


@pytest.mark.parametrize("headroom_mb", [50, 70])
def test_the_list_of_a_long_text_that_cannot_grow_is_a_memory_error(work: Path, headroom_mb: int) -> None:
    """encode() of a long str stores its ids straight into the list's array, grown as they come: a
    growth the limit refuses (40 MB asked first, then 60 and 90) is a MemoryError naming the ids and
    the text, with no reference taken, and the same call works once the limit is lifted."""
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY + GROWTH_CHILD, str(work / "tok"), str(headroom_mb << 20)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    outcome, message = report["limited"]
    assert outcome == "MemoryError", report
    assert "could not allocate" in message and "for the ids of a 20.0 MB text" in message, message
    ids = Tokenizer.from_dir(work / "tok").encode("a b " * 5_000_000)
    assert report["references_added"] == 0 and report["unlimited"] == len(ids) >= 10_000_000


# A child that limits its address space to what is mapped now plus ROOM, then trains on a tiny file:
# the call starts a thread (for Ctrl-C) before it allocates anything.
THREAD_CHILD = """
import hashlib, json, resource, sys
import bytepair

path, room = sys.argv[1], int(sys.argv[2])
report = {}
resource.setrlimit(resource.RLIMIT_AS, (mapped() + room, resource.RLIM_INFINITY))
try:
    during = bytepair.train_bpe(path, THREAD_VOCAB_SIZE, SPECIALS)
    report["outcome"] = "finished"
except MemoryError:
    during = None
    report["outcome"] = "MemoryError"
finally:
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
report["during"] = None if during is None else digest(during)
report["after"] = digest(bytepair.train_bpe(path, THREAD_VOCAB_SIZE, SPECIALS))
print(json.dumps(report))
"""
THREAD_VOCAB_SIZE = 270

# A thread's stack (2 MiB, src/threads.rs) and its guard page. With a limit just above it, the stack of
# the call's thread fits and the allocations glibc makes as the thread starts (its thread-local storage,
# each a mapping of its own since the thread has no malloc arena) did not: glibc then aborted the
# process ("cannot allocate memory for thread-local data", "failed to register TLS destructor", or
# "memory allocation of 36 bytes failed"), at 18 of the 75 rooms from the stack to 300 KB above it.
THREAD_STACK_MAPPING = (2 << 20) + 4096


def test_a_call_never_starts_a_thread_it_has_no_room_for(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    text = "low lower lowest<|endoftext|>new newer newest, wide wider widest " * 20
    path.write_text(text, encoding="utf-8")
    rng = random.Random(3)
    rooms = [THREAD_STACK_MAPPING + k * 4096 for k in range(-2, 40)]
    rooms += [rng.randrange(160 << 20) for _ in range(8)]

    script = (
        f"THREAD_VOCAB_SIZE = {THREAD_VOCAB_SIZE}\nSPECIALS = {SPECIALS!r}\n"
        + MEMORY
        + DIGEST
        + textwrap.dedent(THREAD_CHILD)
    )

    def run(room: int) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-c", script, str(path), str(room)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, rooms))
    expected = digest(bytepair.train_bpe(path, THREAD_VOCAB_SIZE, SPECIALS))
    outcomes = set()
    for proc in results:
        report = json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}
        check(proc, report, expected, None)
        outcomes.add(report["outcome"])
    # The rooms span both outcomes: too little room to train, and enough.
    assert outcomes == {"finished", "MemoryError"}
