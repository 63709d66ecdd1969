"""Nothing hangs: forked children, absurd thread counts, threads that cannot start, huge special tokens,
input with no place to cut, a FIFO without a writer, and Ctrl-C during encode().

Each case runs in a child process with a timeout, so that a hang fails the test instead of hanging
pytest; the time bounds are generous correctness bounds (10x or more the typical figure), not benchmarks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bytepair
from bytepair import Tokenizer
from bytepair.report import write_report

# A small vocabulary with merges, so that encoding takes the merge paths and not only byte lookups.
SETUP = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    import bytepair
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"the", 258: b" the", 259: b"at"}
    merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the"), (b"a", b"t")]
    tok = bytepair.Tokenizer(vocab, merges, ["<|endoftext|>"])
    """
)


def run_child(code: str, *args: str, timeout: float, env: dict[str, str] | None = None) -> dict:
    """Runs ``SETUP + code`` in a new interpreter and returns the JSON it prints last; fails the test
    when it does not finish within ``timeout`` seconds or writes anything on stderr."""
    try:
        child = subprocess.run(
            [sys.executable, "-c", SETUP + textwrap.dedent(code), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=None if env is None else os.environ | env,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child hung for {timeout} s; stderr: {e.stderr!r}")
    assert child.returncode == 0 and child.stderr == "", (child.returncode, child.stderr)
    return json.loads(child.stdout.splitlines()[-1])


def fork_while_encoding(
    tmp_path: Path, every_child: str, batches: int, env: dict[str, str] | None = None
) -> dict:
    """Forks ``batches`` x 30 children while two other threads run encode_batch without pause (its
    workers take and return the encoder's pooled caches without the GIL, and each call starts a helper
    thread). Each child runs ``every_child`` (with ``i``, ``texts``, ``expected``, ``trained``, ``corpus``
    and ``out`` defined), and exits with 0 when it leaves ``ok`` true; a child stuck on a lock its
    parent's threads held is killed at a deadline. Returns how many children hung and failed."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat, at the theatre\n" * 200)
    script = """
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        corpus, out, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
        texts = [f"the cat sat on the mat {i} " * (1 + i % 7) for i in range(64)]
        expected = [tok.encode(t) for t in texts]
        trained = bytepair.train_bpe(corpus, 270, num_threads=2)

        def child(i):
            EVERY_CHILD
            os._exit(0 if ok else 1)

        stop = threading.Event()

        # Many tiny texts: each takes and returns pooled caches, so the pool's lock is often held.
        tiny = ["at"] * 100_000

        def hammer():
            while not stop.is_set():
                tok.encode_batch(tiny, num_threads=2)

        workers = [threading.Thread(target=hammer) for _ in range(2)]
        for w in workers:
            w.start()
        hung = failed = 0
        for batch in range(batches):
            pids = []
            for i in range(30):
                time.sleep(0.002)
                pid = os.fork()
                if pid == 0:
                    child(30 * batch + i)
                pids.append(pid)
            deadline = time.monotonic() + 20
            while pids:
                for pid in list(pids):
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        pids.remove(pid)
                        failed += os.waitstatus_to_exitcode(status) != 0
                if pids and time.monotonic() > deadline:
                    for pid in pids:
                        os.kill(pid, signal.SIGKILL)
                        os.waitpid(pid, 0)
                    hung += len(pids)
                    pids = []
                time.sleep(0.01)
        stop.set()
        for w in workers:
            w.join()
        print(json.dumps({"hung": hung, "failed": failed}))
        """
    body = textwrap.indent(textwrap.dedent(every_child).strip("\n"), " " * 4)
    script = textwrap.dedent(script).replace("    EVERY_CHILD", body)
    return run_child(script, str(corpus), str(tmp_path / "out"), str(batches), timeout=600, env=env)


@pytest.mark.timeout(660)  # the child's own timeout (600 s) must end it first, with its message
def test_forked_children_encode_while_other_threads_encode(tmp_path: Path) -> None:
    # Every child must encode, train and encode a file, and exit.
    every_child = """
        ok = [tok.encode(t) for t in texts] == expected
        ok = ok and tok.encode_batch(texts, num_threads=2) == expected
        if i % 10 == 0:
            ok = ok and bytepair.train_bpe(corpus, 270, num_threads=2) == trained
            ok = ok and tok.encode_file(corpus, f"{out}.{i}.npy", num_threads=2) > 0
        """
    assert fork_while_encoding(tmp_path, every_child, batches=10) == {"hung": 0, "failed": 0}


@pytest.mark.timeout(660)
def test_forked_children_start_threads_while_other_threads_start_threads(tmp_path: Path) -> None:
    # glibc frees the thread-local blocks of a reused thread stack in pthread_create outside of any
    # lock: a fork in that moment left the child a stack whose blocks were already freed, and the
    # child's next threads freed them again (an abort, "double free or corruption"). Every child starts
    # threads, in encode_batch, train_bpe and encode_file. Without glibc's per-thread cache of freed
    # blocks (tcache), malloc checks every free, so that a double free aborts instead of passing
    # unnoticed. Before the fix, about one run in two had a child abort.
    every_child = """
        ok = tok.encode_batch(texts, num_threads=2) == expected
        ok = ok and bytepair.train_bpe(corpus, 270, num_threads=2) == trained
        ok = ok and tok.encode_file(corpus, f"{out}.{i}.npy", num_threads=2) > 0
        """
    env = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    assert fork_while_encoding(tmp_path, every_child, batches=40, env=env) == {"hung": 0, "failed": 0}


BAD_THREADS = [0, -1, True, 1.5, "2", 10**30 * -1]


@pytest.mark.parametrize("bad", BAD_THREADS)
def test_num_threads_has_one_rule_and_one_message_everywhere(tmp_path: Path, bad: object) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat")
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    message = f"num_threads must be a positive int or None, not {bad!r}"
    calls = [
        lambda: bytepair.train_bpe(corpus, 260, num_threads=bad),
        lambda: tok.encode_batch(["a"], num_threads=bad),
        lambda: tok.encode_file(corpus, tmp_path / "o.npy", num_threads=bad),
        lambda: write_report({"t": tok}, [str(corpus)], str(tmp_path / "r.html"), bad),
    ]
    for call in calls:
        with pytest.raises(ValueError) as raised:
            call()
        assert str(raised.value) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_cli_threads_follows_the_same_rule(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat")
    for bad in ["0", "-1", "x"]:
        cli = [sys.executable, "-m", "bytepair", "train", str(corpus), "--vocab-size", "260"]
        child = subprocess.run(
            [*cli, "--threads", bad, "--out", str(tmp_path / "tok")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.returncode == 2, child.stderr
        assert "num_threads must be a positive int or None" in child.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_a_million_threads_asked_for_start_at_most_four_per_core(tmp_path: Path) -> None:
    # A sampler thread counts the process's threads while each call runs (the calls release the GIL),
    # and gives up at once when there are too many: before the cap, a million kept spawning for minutes.
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat\n" * 20_000)
    result = run_child(
        """
        corpus, out = sys.argv[1], sys.argv[2]
        limit = 4 * len(os.sched_getaffinity(0)) + 8  # the workers, plus this interpreter's threads
        most = [0]

        def sample():
            while True:
                most[0] = max(most[0], len(os.listdir("/proc/self/task")))
                if most[0] > limit:
                    print(json.dumps({"threads": most[0]}))
                    os._exit(0)
                time.sleep(0.002)

        threading.Thread(target=sample, daemon=True).start()
        n = 10**6
        merges = len(bytepair.train_bpe(corpus, 300, num_threads=n)[1])
        batch = tok.encode_batch(["the cat sat on the mat\\n" * 1000] * 64, num_threads=n)
        tokens = tok.encode_file(corpus, out, num_threads=n)
        print(json.dumps({"merges": merges, "batch": len(batch), "tokens": tokens, "limit": limit,
                          "max_threads": bytepair._core.max_threads(),
                          "cores": len(os.sched_getaffinity(0))}))
        """,
        str(corpus),
        str(tmp_path / "o.npy"),
        timeout=120,
    )
    assert "threads" not in result, f"{result['threads']} threads at once"
    assert result["max_threads"] == 4 * result["cores"]
    assert result["merges"] > 0 and result["batch"] == 64 and result["tokens"] > 0


# The child reserves address space for everything it will allocate, then limits it (RLIMIT_AS) to what
# it has plus 256 MB, while RUST_MIN_STACK asks 1 GB for every thread's stack: so no thread can start,
# and nothing else is short of memory. (Under the limit alone an allocation would fail first.)
NO_THREADS = """
import resource
corpus, out = sys.argv[1], sys.argv[2]
texts = ["the cat sat on the mat\\n" * (1 + i) for i in range(50)]
big = "the cat sat on the mat\\n" * 200_000
expected = {
    "train": bytepair.train_bpe(corpus, 300, num_threads=1),
    "batch": tok.encode_batch(texts, num_threads=1),
    "file": tok.encode(open(corpus).read()),
    "big": tok.encode(big),
}
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
try:
    threading.Thread(target=print).start()
    started = True
except RuntimeError:
    started = False
got = {"thread_started": started}
for threads in [None, 1, 2]:
    got[f"train {threads}"] = bytepair.train_bpe(corpus, 300, num_threads=threads) == expected["train"]
    got[f"batch {threads}"] = tok.encode_batch(texts, num_threads=threads) == expected["batch"]
    n = tok.encode_file(corpus, out, num_threads=threads)
    ids = __import__("numpy").load(out).tolist()
    got[f"file {threads}"] = n == len(ids) and ids == expected["file"]
got["big"] = tok.encode(big) == expected["big"]
print(json.dumps(got))
"""


def test_threads_that_cannot_start_mean_fewer_threads_not_errors(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat on the mat, at the theatre\n" * 5000)
    result = run_child(
        NO_THREADS, str(corpus), str(tmp_path / "o.npy"), timeout=300, env={"RUST_MIN_STACK": str(1 << 30)}
    )
    # Python's own threads are not affected: the check is that Rust's cannot start.
    assert result.pop("thread_started") is True
    assert all(result.values()), result


def test_ctrl_c_ends_the_wait_for_a_fifo_writer(tmp_path: Path) -> None:
    # Opening a FIFO for reading waits for a writer, which never comes here; Ctrl-C must end the wait.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    result = run_child(
        """
        fifo, out = sys.argv[1], sys.argv[2]
        waited = {}
        calls = {
            "train": lambda: bytepair.train_bpe(fifo, 300),
            "encode_file": lambda: tok.encode_file(fifo, out),
        }
        for name, call in calls.items():
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            start = time.monotonic()
            try:
                call()
                waited[name] = "returned"
            except KeyboardInterrupt:
                waited[name] = time.monotonic() - start
        print(json.dumps(waited))
        """,
        str(fifo),
        str(tmp_path / "o.npy"),
        timeout=60,
    )
    for name, waited in result.items():
        assert isinstance(waited, float) and waited < 5, (name, waited)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_special_tokens_past_the_limit_are_refused_at_once_and_long_ones_stay_linear(tmp_path: Path) -> None:
    # "x" * 100_000 took 27 s to build into a matcher. A token of 1024 bytes that the text repeats end
    # to end puts an occurrence across every candidate cut: comparing the token at each offset cost
    # its length squared per cut.
    token = "a " * 512
    corpus = tmp_path / "c.txt"
    corpus.write_text(token * 1000)
    result = run_child(
        """
        corpus = sys.argv[1]
        bytes_vocab = {i: bytes([i]) for i in range(256)}
        refused = []
        for build in [lambda t: bytepair.Tokenizer(bytes_vocab, [], [t]),
                      lambda t: bytepair.train_bpe(corpus, 300, [t])]:
            start = time.monotonic()
            try:
                build("x" * 100_000)
            except ValueError as e:
                refused.append([str(e), time.monotonic() - start])
        token = "a " * 512
        tok = bytepair.Tokenizer(bytes_vocab, [], [token])
        text = open(corpus).read()
        streamed = list(tok.encode_iterable([text[i : i + 4096] for i in range(0, len(text), 4096)]))
        vocab, merges = bytepair.train_bpe(corpus, 300, [token], _chunk_size=1 << 16)
        print(json.dumps({"refused": refused, "stream": streamed == [256] * 1000,
                          "trained": [len(vocab), merges == []]}))
        """,
        str(corpus),
        timeout=120,
    )
    message = "a special token of 100000 bytes is longer than the 1024 bytes a special token may have"
    assert [m for m, _ in result["refused"]] == [message, message]
    assert all(seconds < 5 for _, seconds in result["refused"]), result
    assert result["stream"] and result["trained"] == [257, True]


def test_ctrl_c_stops_training_on_input_with_no_place_to_cut(tmp_path: Path) -> None:
    # /dev/zero never ends and has no safe cut: the chunk grew without bound (1.5 GB in 20 s) and
    # Ctrl-C was ignored. Now it is cut every 16 MiB, progress goes on, and Ctrl-C stops it.
    result = run_child(
        """
        reports = []

        def progress(phase, done, total):
            if not reports:
                threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)).start()
            reports.append(done)

        try:
            bytepair.train_bpe("/dev/zero", 300, num_threads=2, progress=progress)
        except KeyboardInterrupt:
            pass
        with open("/proc/self/status") as f:
            peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024
        print(json.dumps({"read_mb": max(reports) / 1e6, "peak_mb": peak}))
        """,
        timeout=120,
    )
    # Reading goes on at hundreds of MB/s; memory stays a few chunks of 16 MiB per thread.
    assert result["read_mb"] > 32 and result["peak_mb"] < 600, result


def test_a_long_run_with_no_cut_is_split_at_16_mib(tmp_path: Path) -> None:
    # "a" then "at" repeated: one pre-token of 18 MB. Split at 16 MiB (an even offset), the first part
    # ends in a lone "a" and the second starts with "t": the ids show where the cut fell.
    corpus = tmp_path / "run.txt"
    text = "a" + "at" * (9 << 20)
    corpus.write_text(text)
    result = run_child(
        """
        corpus, out = sys.argv[1], sys.argv[2]
        import numpy as np
        text = open(corpus).read()
        cut = 16 << 20
        parts = tok.encode(text[:cut]) + tok.encode(text[cut:])
        tokens = tok.encode_file(corpus, out)
        ids = np.load(out).tolist()
        vocab, merges = bytepair.train_bpe(corpus, 258)
        print(json.dumps({"as_parts": ids == parts and tokens == len(ids),
                          "as_whole": ids == tok.encode(text), "trained": len(vocab)}))
        """,
        str(corpus),
        str(tmp_path / "o.npy"),
        timeout=300,
    )
    assert result["as_parts"] and not result["as_whole"]
    assert result["trained"] == 258


# A vocabulary whose merges join runs of "x" up to 1024 long, and a text of 1 MB runs of "x": each run is
# one pre-token that the long-piece merge loop takes (tens of ns a byte), so a long text makes few ids.
LONG_RUNS = """
vocab = {i: bytes([i]) for i in range(256)}
merges = []
for k in range(10):
    half = b"x" * (1 << k)
    merges.append((half, half))
    vocab[256 + k] = half + half
tok = bytepair.Tokenizer(vocab, merges)
text = ("x" * (1 << 20) + " ") * 48
calls = {
    "encode": lambda: tok.encode(text),
    "encode_batch": lambda: tok.encode_batch([text[: len(text) // 8]] * 8),
}
result = {}
for name, call in calls.items():
    start = time.monotonic()
    expected = call()
    whole = time.monotonic() - start
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    sent = time.monotonic() + 0.2
    try:
        call()
        result[name] = {"finished": True}
    except KeyboardInterrupt:
        result[name] = {"whole": whole, "raised_after_signal": time.monotonic() - sent}
    # The tokenizer goes on working: its pooled caches were not left half written.
    result[name]["after"] = call() == expected
print(json.dumps(result))
"""


def test_ctrl_c_stops_encode_and_encode_batch_long_before_they_finish() -> None:
    # Before, both reacted to Ctrl-C only when done. The binding now checks for it every 20 ms and the
    # engine stops within a block of 1 MB or 65536 merges: tens of milliseconds.
    result = run_child(LONG_RUNS, timeout=300)
    for name, r in result.items():
        assert "raised_after_signal" in r, (name, r)
        assert r["raised_after_signal"] < min(5, r["whole"] / 2), (name, r)
        assert r["after"], name
