"""The command line: each command as a new user runs it, and one-line errors for every bad input."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import bytepair
from bytepair import Tokenizer, cli

SPECIAL = "<|endoftext|>"
TEXT = "the cat sat on the mat<|endoftext|>the hat is flat, isn't it? 42 cats!\n" * 30


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bytepair", *args], capture_output=True, text=True, timeout=120
    )


def read_terminal(leader: int, done: Callable[[str], bool], seconds: float = 60) -> str:
    """What a pty shows until `done(text)` holds or every writer has closed the other end; fails after
    `seconds`. Output may arrive in any number of pieces."""
    deadline = time.monotonic() + seconds
    shown = b""
    while not done(shown.decode(errors="replace")):
        left = deadline - time.monotonic()
        if left <= 0:
            pytest.fail(f"the terminal showed only {shown!r} in {seconds} s")
        if select.select([leader], [], [], left)[0]:
            try:
                piece = os.read(leader, 1 << 16)
            except OSError:  # EIO: the other end is closed
                piece = b""
            if not piece:
                break
            shown += piece
    return shown.decode()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


@pytest.fixture
def trained(tmp_path: Path, corpus: Path) -> Path:
    """A tokenizer folder, as ``bytepair train`` writes it."""
    out = tmp_path / "tok"
    result = run("train", str(corpus), "--vocab-size", "280", "--special-token", SPECIAL, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_train_writes_a_folder_that_loads(tmp_path: Path, corpus: Path) -> None:
    out = tmp_path / "tok"
    result = run("train", str(corpus), "--vocab-size", "262", "--special-token", SPECIAL, "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no progress bar when stderr is not a terminal
    vocab, merges = bytepair.train_bpe(corpus, 262, [SPECIAL])
    assert bytepair.load_bpe(out / "vocab.json", out / "merges.txt") == (vocab, merges)
    assert json.loads((out / "special_tokens.json").read_text()) == [SPECIAL]
    tok = Tokenizer.from_dir(out)
    assert tok.special_tokens == [SPECIAL] and tok.encode(SPECIAL) == [261]
    tokens = len(tok.encode(TEXT))
    pretokens = {p for doc in TEXT.split(SPECIAL) for p in bytepair.pretokenize(doc)}
    for line in [
        f"trained on {corpus}: 0.0 MB, {len(pretokens)} distinct pre-tokens",
        "pre-tokenizing and counting",
        "merging",
        "peak memory",
        "vocab 262: 256 bytes, 5 merges",
        "longest tokens: ",
        f"compression on the training text: {len(TEXT.encode()) / tokens:.2f} bytes per token",
    ]:
        assert line in result.stdout, result.stdout


def test_train_joins_several_inputs_with_the_first_special_token(tmp_path: Path) -> None:
    parts = ["low lower lowest", "newer wider", "low low"]
    paths = []
    for i, part in enumerate(parts):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_text(part)
    joined = tmp_path / "joined.txt"
    joined.write_text(SPECIAL.join(parts))
    out = tmp_path / "tok"
    args = ["--vocab-size", "270", "--special-token", SPECIAL, "--out", str(out)]
    result = run("train", *map(str, paths), *args)
    assert result.returncode == 0, result.stderr
    assert "trained on 3 files" in result.stdout
    assert Tokenizer.from_dir(out).merges == bytepair.train_bpe(joined, 270, [SPECIAL])[1]


def test_train_without_input_uses_the_standard_library(tmp_path: Path) -> None:
    out = tmp_path / "tok"
    result = run("train", "--vocab-size", "300", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "trained on the Python standard library" in result.stdout
    tok = Tokenizer.from_dir(out)
    assert tok.special_tokens == [SPECIAL] and len(tok.vocab) == 300
    assert b"self" in {tok.vocab[i] for i in tok.encode("self")}  # it has seen Python


def test_default_corpus_holds_the_standard_library() -> None:
    files = cli.default_corpus_files()
    assert len(files) > 500 and any(f.endswith(os.sep + "heapq.py") for f in files)


def test_default_corpus_leaves_installed_packages_unlisted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Folders of installed packages are not even listed (a site-packages can hold many times the files
    of the standard library); files that are not UTF-8 are left out; the order is pathlib's."""
    for name, content in {
        "a.py": b"x = 1\n",
        "a/b.py": b"y = 2\n",
        "a-b/c.py": b"z = 3\n",
        "latin1.py": b"# -*- coding: latin-1 -*-\ns = '\xe9'\n",
        "notes.txt": b"not python\n",
        "site-packages/pkg/mod.py": b"w = 4\n",
        "a/dist-packages/mod.py": b"v = 5\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(content)
    monkeypatch.setattr(cli.sysconfig, "get_paths", lambda: {"stdlib": str(tmp_path)})
    listed = []
    scandir = os.scandir

    def recording_scandir(path: str) -> Iterator[os.DirEntry[str]]:
        listed.append(os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", recording_scandir)
    files = cli.default_corpus_files()
    assert files == [str(tmp_path / "a" / "b.py"), str(tmp_path / "a-b" / "c.py"), str(tmp_path / "a.py")]
    assert str(tmp_path) in listed and not [p for p in listed if "-packages" in p]


def test_progress_bars_appear_on_a_terminal_only(tmp_path: Path, corpus: Path) -> None:
    leader, follower = pty.openpty()
    args = ["train", str(corpus), "--vocab-size", "270", "--out", str(tmp_path / "tok")]
    command = [sys.executable, "-m", "bytepair", *args]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    try:
        drawn = read_terminal(leader, lambda shown: False)  # all of it, until the command exits
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        os.close(leader)
    assert "pre-tokenizing" in drawn and "merging" in drawn
    assert run(*args).stderr == ""


def test_encode_then_decode(tmp_path: Path, corpus: Path, trained: Path) -> None:
    ids_path = tmp_path / "ids.npy"
    result = run("encode", str(trained), str(corpus), "-o", str(ids_path))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    ids = np.load(ids_path)
    expected = Tokenizer.from_dir(trained).encode(TEXT)
    assert ids.dtype == np.uint16 and ids.tolist() == expected
    assert f"into {len(expected):,} tokens" in result.stdout and "MB/s" in result.stdout
    assert f"{len(TEXT.encode()) / len(expected):.2f} bytes per token" in result.stdout
    decoded = subprocess.run(
        [sys.executable, "-m", "bytepair", "decode", str(trained), str(ids_path)],
        capture_output=True,
        timeout=120,
    )
    assert decoded.returncode == 0 and decoded.stdout.decode("utf-8") == TEXT


def test_decode_in_blocks_that_cut_characters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture
) -> None:
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    tok.save(tmp_path / "bytes")
    text = "日本語 über\n"
    np.save(tmp_path / "ids.npy", np.array(tok.encode(text), dtype=np.uint16))
    monkeypatch.setattr(cli, "_DECODE_BLOCK", 2)  # every character of 3 bytes is cut
    assert cli.main(["decode", str(tmp_path / "bytes"), str(tmp_path / "ids.npy")]) == 0
    assert capsysbinary.readouterr().out == text.encode("utf-8")


def test_inspect_shows_statistics_and_a_split(trained: Path) -> None:
    result = run("inspect", str(trained), "the cat\n日")
    assert result.returncode == 0, result.stderr
    tok = Tokenizer.from_dir(trained)
    ids = tok.encode("the cat\n日")
    assert f"{trained}: 280 tokens: 256 bytes, 23 merges, special tokens ['<|endoftext|>']" in result.stdout
    assert "token length in bytes: mean" in result.stdout and "longest tokens: " in result.stdout
    assert "|the| cat|\\n|\\xe6|\\x97|\\xa5|" in result.stdout
    assert str(ids) in result.stdout


def test_export_writes_files_the_other_libraries_load(tmp_path: Path, trained: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tiktoken_load = pytest.importorskip("tiktoken.load")
    result = run("export", str(trained), "--format", "hf", "-o", str(tmp_path / "tokenizer.json"))
    assert result.returncode == 0, result.stderr
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    tok = Tokenizer.from_dir(trained)
    assert hf.encode(TEXT).ids == tok.encode(TEXT)
    result = run("export", str(trained), "--format", "tiktoken", "-o", str(tmp_path / "t.tiktoken"))
    assert result.returncode == 0, result.stderr
    assert "special_tokens={'<|endoftext|>': 279}" in result.stdout
    ranks = tiktoken_load.load_tiktoken_bpe(str(tmp_path / "t.tiktoken"))
    assert ranks == {t: i for i, t in tok.vocab.items() if t != SPECIAL.encode()}


def test_report_for_two_tokenizers(tmp_path: Path, corpus: Path, trained: Path) -> None:
    other = tmp_path / "other"
    assert run("train", str(corpus), "--vocab-size", "260", "--out", str(other)).returncode == 0
    page = tmp_path / "report.html"
    result = run("report", str(trained), str(other), "--corpus", str(corpus), "-o", str(page))
    assert result.returncode == 0, result.stderr
    tokens = len(Tokenizer.from_dir(trained).encode(TEXT))
    assert f"tok on corpus.txt: {len(TEXT.encode()) / tokens:.2f} bytes per token" in result.stdout
    html = page.read_text(encoding="utf-8")
    assert "Tokenizer report: tok vs other" in html and "Side by side" in html and "<svg" in html


def test_report_takes_several_corpora_after_one_flag(tmp_path: Path, corpus: Path, trained: Path) -> None:
    second = tmp_path / "second.txt"
    second.write_text("int main(void) { return 0; }\n" * 50)
    page = tmp_path / "report.html"
    result = run("report", str(trained), "--corpus", str(corpus), str(second), "-o", str(page))
    assert result.returncode == 0, result.stderr
    assert "tok on corpus.txt:" in result.stdout and "tok on second.txt:" in result.stdout


@pytest.mark.parametrize("command", ["train", "encode", "decode", "inspect", "export", "report"])
def test_every_command_has_help(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0 and f"usage: bytepair {command}" in result.stdout


def bad_inputs(tmp: Path, corpus: Path, trained: Path) -> list[tuple[list[str], str, int]]:
    """(arguments, a part of the message, exit status) for each kind of bad input."""
    (tmp / "not_utf8.txt").write_bytes(b"abc \xff")
    (tmp / "corrupt").mkdir()
    (tmp / "corrupt" / "vocab.json").write_text("{not json")
    (tmp / "corrupt" / "merges.txt").write_text("")
    (tmp / "no_merges").mkdir()
    (tmp / "no_merges" / "vocab.json").write_text("{}")
    (tmp / "bad_specials").mkdir()
    Tokenizer({i: bytes([i]) for i in range(256)}, []).save(tmp / "bad_specials")
    (tmp / "bad_specials" / "special_tokens.json").write_text('{"<s>": 1}')
    (tmp / "gap").mkdir()
    Tokenizer({i: bytes([i]) for i in range(256)} | {300: b"<s>"}, [], ["<s>"]).save(tmp / "gap")
    (tmp / "bad.npy").write_text("these are not ids")
    np.save(tmp / "floats.npy", np.array([1.5, 2.0]))
    np.save(tmp / "too_big.npy", np.array([1, 280], dtype=np.uint16))
    np.save(tmp / "negative.npy", np.array([-1, 3]))
    t, c, missing = str(trained), str(corpus), str(tmp / "missing")
    return [
        (["train", missing, "--vocab-size", "300"], "missing: No such file or directory", 1),
        (["train", str(tmp / "not_utf8.txt"), "--vocab-size", "300"], "invalid UTF-8 at byte offset 4", 1),
        (["train", c, c + "x", "--vocab-size", "300"], "No such file", 1),
        (
            ["train", c, str(tmp / "not_utf8.txt"), "--vocab-size", "300"],
            "not_utf8.txt: invalid UTF-8 at byte offset 4",
            1,
        ),
        (["train", c, "--vocab-size", "10"], "too small", 1),
        (["train", c], "--vocab-size is required", 1),
        (["train", c, "--vocab-size", "300", "--threads", "0"], "num_threads must be a positive int", 2),
        (["train", c, "--vocab-size", "300", "--out", str(corpus / "sub")], "Not a directory", 1),
        (["train", c, "--vocab-size", "many"], "invalid int value: 'many'", 2),
        (["inspect", missing], "not a tokenizer folder (no vocab.json)", 1),
        (["inspect", str(tmp / "corrupt")], "not a JSON vocabulary", 1),
        (["inspect", str(tmp / "no_merges")], "merges.txt: No such file or directory", 1),
        (
            ["encode", t, str(tmp / "not_utf8.txt"), "-o", str(tmp / "o.npy")],
            "invalid UTF-8 at byte offset 4",
            1,
        ),
        (["encode", t, c, "-o", str(tmp / "no" / "o.npy")], "No such file or directory", 1),
        (["encode", t, c], "the following arguments are required: -o/--output", 2),
        (["decode", t, str(tmp / "bad.npy")], "bad.npy: not a NumPy .npy file", 1),
        (["decode", t, str(tmp / "floats.npy")], "expected a 1-D array of integer ids", 1),
        (
            ["decode", t, str(tmp / "too_big.npy")],
            "id 280 is out of range (the vocabulary has ids 0 to 279)",
            1,
        ),
        (["decode", t, str(tmp / "negative.npy")], "id -1 is out of range", 1),
        (["decode", str(tmp / "gap"), str(tmp / "too_big.npy")], "id 280 is not in the vocabulary", 1),
        (["decode", t, missing], "missing: No such file or directory", 1),
        (["export", t, "--format", "onnx", "-o", "x"], "invalid choice: 'onnx'", 2),
        (["export", t, "--format", "hf", "-o", str(tmp / "no" / "t.json")], "No such file or directory", 1),
        (["report", t, "--corpus", missing, "-o", str(tmp / "r.html")], "No such file or directory", 1),
        (["report", t, t, t, "--corpus", c, "-o", str(tmp / "r.html")], "unrecognized arguments", 2),
        (["report", t, "--corpus", c, "-o", str(tmp)], "Is a directory", 1),
        (["frobnicate"], "invalid choice: 'frobnicate'", 2),
    ]


def test_errors_are_one_line_without_traceback(tmp_path: Path, corpus: Path, trained: Path) -> None:
    for args, message, status in bad_inputs(tmp_path, corpus, trained):
        result = run(*args)
        assert result.returncode == status, (args, result.stderr)
        assert result.stderr.count("\n") == 1 and message in result.stderr, (args, result.stderr)
        assert result.stderr.startswith("bytepair"), result.stderr


def test_ctrl_c_while_training_exits_130(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    command = [sys.executable, "-m", "bytepair", "train", "--vocab-size", "50000", "--out", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    try:
        read_terminal(leader, lambda shown: "pre-tokenizing" in shown)  # training has started
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        drawn = read_terminal(leader, lambda shown: False)  # the rest, until the other end closes
    finally:
        process.kill()
        os.close(leader)
    assert drawn.splitlines()[-1] == "bytepair: interrupted" and "Traceback" not in drawn


def test_ctrl_c_exits_130_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    def interrupted(folder: str) -> Tokenizer:
        raise KeyboardInterrupt

    monkeypatch.setattr(Tokenizer, "from_dir", interrupted)
    assert cli.main(["inspect", "somewhere"]) == 130
    assert capsys.readouterr().err == "bytepair: interrupted\n"


def test_count_in_shards_then_train_from_counts_equals_training_on_the_sources(tmp_path: Path) -> None:
    import gzip

    data = tmp_path / "data"
    data.mkdir()
    docs = [
        f"document {i}: the cat sat on the mat {i % 7} times, isn't it?\n" * (1 + i % 5) for i in range(60)
    ]
    for i in range(6):
        lines = "".join(json.dumps({"text": d}) + "\n" for d in docs[i * 10 : (i + 1) * 10])
        (data / f"part-{i}.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    common = ["--special-token", SPECIAL]
    parts = []
    for i in range(4):
        out = tmp_path / f"counts-{i}.bpc"
        result = run(
            "count", str(data), "--shard-index", str(i), "--num-shards", "4", "-o", str(out), *common
        )
        assert result.returncode == 0, result.stderr
        assert f"(part {i} of 4)" in result.stdout and f"wrote {out}" in result.stdout
        parts.append(str(out))
    result = run("train", "--from-counts", *parts, "--vocab-size", "300", "--out", str(tmp_path / "a"))
    assert result.returncode == 0, result.stderr
    assert "60 documents" in result.stdout
    result = run(
        "train", str(data / "*.jsonl.gz"), "--vocab-size", "300", "--out", str(tmp_path / "b"), *common
    )
    assert result.returncode == 0, result.stderr
    a, b = Tokenizer.from_dir(tmp_path / "a"), Tokenizer.from_dir(tmp_path / "b")
    assert (a.vocab, a.merges, a.special_tokens) == (b.vocab, b.merges, b.special_tokens)


def test_count_errors_leave_the_output_as_it_was_and_skips_are_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": null}\n{"txt": "x"}\n')
    out = tmp_path / "counts.bpc"
    out.write_bytes(b"the user's file")
    result = run("count", str(bad), "-o", str(out))
    assert result.returncode == 1
    assert result.stderr == f'bytepair: error: {bad}:2: field "text" is null, not a string\n'
    assert out.read_bytes() == b"the user's file"
    result = run("count", str(bad), "-o", str(out), "--errors", "skip")
    assert result.returncode == 0, result.stderr
    assert f'skipped 2 bad records, the first:\n  {bad}:2: field "text" is null' in result.stdout
    assert bytepair.PreTokenCounts.load(out).skipped == 2
    assert sorted(os.listdir(tmp_path)) == ["bad.jsonl", "counts.bpc"]  # no temporary file left
    for args, message in [
        (["--shard-index", "1"], "--shard-index and --num-shards go together"),
        (["--shard-index", "4", "--num-shards", "4"], "shard index 4 is not in 0..3"),
    ]:
        result = run("count", str(bad), "-o", str(out), *args)
        assert (result.returncode, result.stderr) == (1, f"bytepair: error: {message}\n")
    result = run("train", str(bad), "--from-counts", str(out), "--vocab-size", "300")
    assert (result.returncode, result.stderr) == (
        1,
        "bytepair: error: give INPUT sources or --from-counts, not both\n",
    )
    result = run("train", "--from-counts", str(bad), "--vocab-size", "300", "--out", str(tmp_path / "t"))
    assert (result.returncode, result.stderr) == (1, f"bytepair: error: {bad}: not a bytepair counts file\n")
