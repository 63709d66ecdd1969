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


@pytest.mark.timeout(660)  # the child's own timeout (600 s) must end it first, with its message
def test_forked_children_encode_while_other_threads_encode(tmp_path: Path) -> None:
    # Other threads encode without pause (encode_batch's workers take and return the encoder's pooled
    # caches without the GIL) while the main thread forks. Every child must encode, train and encode a
    # file, and exit; a child stuck on a lock its parent's threads held is killed at the deadline.
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat, at the theatre\n" * 200)
    result = run_child(
        """
        import warnings
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() with threads running
        corpus, out = sys.argv[1], sys.argv[2]
        texts = [f"the cat sat on the mat {i} " * (1 + i % 7) for i in range(64)]
        expected = [tok.encode(t) for t in texts]
        trained = bytepair.train_bpe(corpus, 270, num_threads=2)

        def child(i):
            ok = [tok.encode(t) for t in texts] == expected
            ok = ok and tok.encode_batch(texts, num_threads=2) == expected
            if i % 10 == 0:
                ok = ok and bytepair.train_bpe(corpus, 270, num_threads=2) == trained
                ok = ok and tok.encode_file(corpus, f"{out}.{i}.npy", num_threads=2) > 0
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
        for batch in range(10):
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
        """,
        str(corpus),
        str(tmp_path / "out"),
        timeout=600,
    )
    assert result == {"hung": 0, "failed": 0}


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
