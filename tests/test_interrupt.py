"""Ctrl-C during a long call: KeyboardInterrupt within a second, no partial output, and the process
stays usable.

Each case runs in a child process that sends itself SIGINT (exactly what Ctrl-C delivers) 0.2 s into
the phase under test, and reports how long the call took to raise after the signal. One second is a
correctness bound, not a benchmark: the binding checks for Ctrl-C every 20 ms and the engine stops at
its next chunk of a few MB or within 50 ms of merging, which takes milliseconds.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Big enough that neither call can finish before the signal even on a fast machine (both run at well
# under 1 GB/s), small enough to write in a second or two.
INPUT_MB = 256

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    import bytepair

    phase, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"the"},
                             [(b"t", b"h"), (b"th", b"e")])
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    # Counting reports from several threads at once: the lock lets exactly one start the timer.
    def progress(name, done, total):
        if name == phase and done > 0:
            with lock:
                if not started:
                    started.append(name)
                    timer.start()

    started, lock = [], threading.Lock()
    timer = threading.Timer(0.2, interrupt)
    start = time.monotonic()
    try:
        # Two threads, so that no machine is fast enough to finish before the signal.
        if phase == "encode":
            tok.encode_file(path, out, num_threads=2, progress=progress)
        else:
            bytepair.train_bpe(path, 20_000, ["<|endoftext|>"], num_threads=2, progress=progress)
        result = {"finished_after": time.monotonic() - start}
    except KeyboardInterrupt:
        result = {"raised_after_signal": time.monotonic() - sent[0]}
    # The process is still usable: a small call of each kind works.
    small = os.path.join(os.path.dirname(out), "small.txt")
    with open(small, "w") as f:
        f.write("the cat sat on the mat")
    result["train_after"] = len(bytepair.train_bpe(small, 260)[1])
    result["encode_after"] = tok.encode("the cat")
    print(json.dumps(result))
    """
)


@pytest.fixture(scope="module")
def repeated_text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """256 MB of one paragraph repeated: long to read, quick to merge."""
    path = tmp_path_factory.mktemp("interrupt") / "repeated.txt"
    paragraph = "The quick brown fox jumps over the lazy dog; it's 1999 again.\n" * 1000
    block = (paragraph + "<|endoftext|>").encode()
    with open(path, "wb") as f:
        for _ in range((INPUT_MB << 20) // len(block)):
            f.write(block)
    return path


@pytest.fixture(scope="module")
def random_words(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 MB of random lowercase words: about a million distinct pre-tokens, so merging takes long."""
    path = tmp_path_factory.mktemp("interrupt") / "words.txt"
    table = bytes(32 if i % 7 == 0 else 97 + i % 26 for i in range(256))
    path.write_bytes(random.Random(0).randbytes(8 << 20).translate(table))
    return path


@pytest.mark.parametrize("phase", ["count", "merge", "encode"])
def test_ctrl_c_stops_within_a_second_and_leaves_nothing(
    repeated_text: Path, random_words: Path, tmp_path: Path, phase: str
) -> None:
    out = tmp_path / "out.npy"
    source = random_words if phase == "merge" else repeated_text
    child = subprocess.run(
        [sys.executable, "-c", CHILD, phase, str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, child.stderr
    result = json.loads(child.stdout)
    assert "raised_after_signal" in result, f"the call finished before the signal: {result}"
    assert result["raised_after_signal"] < 1.0, result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.txt"]
    assert result["train_after"] == 4 and result["encode_after"] == [257, 32, 99, 97, 116]
