"""The command line: a training session, and one-line errors for bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import bytepair


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bytepair", *args], capture_output=True, text=True)


def test_train_writes_files_that_load(tmp_path: Path) -> None:
    corpus = tmp_path / "c.txt"
    corpus.write_text("the cat sat<|endoftext|>the cat ate" * 20)
    out = tmp_path / "tok"
    result = run(
        "train", str(corpus), "--vocab-size", "262", "--special-token", "<|endoftext|>", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert "vocab 262" in result.stdout
    vocab, merges = bytepair.load_bpe(out / "vocab.json", out / "merges.txt")
    assert (vocab, merges) == bytepair.train_bpe(corpus, 262, ["<|endoftext|>"])
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"abc \xff")
    for args, message in [
        (["train", str(tmp_path / "missing.txt"), "--vocab-size", "300"], "No such file"),
        (["train", str(bad), "--vocab-size", "300"], "invalid UTF-8 at byte offset 4"),
        (["train", str(bad), "--vocab-size", "10"], "too small"),
    ]:
        result = run(*args)
        assert result.returncode == 1
        assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
