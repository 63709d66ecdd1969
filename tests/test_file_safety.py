"""No output destroys a file the user did not name as the output, and training reports exact figures.

Each test names what a bad input now gets. The writers are ``Tokenizer.encode_file`` (and ``bytepair
encode``), ``save_bpe``, ``Tokenizer.save`` (and ``bytepair train --out``), ``to_hf``, ``to_tiktoken``
(and ``bytepair export``) and ``write_report`` (and ``bytepair report``).
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import bytepair
from bytepair import Tokenizer
from bytepair.report import write_report

SPECIAL = "<|endoftext|>"
TEXT = "the cat sat on the mat<|endoftext|>the hat is flat, isn't it? 42 cats!\n" * 30
DEADLINE = 60  # seconds for any subprocess or wait here; each takes well under one


def run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bytepair", *args], capture_output=True, text=True, timeout=DEADLINE, **kwargs
    )


@pytest.fixture
def tok() -> Tokenizer:
    return Tokenizer(
        {i: bytes([i]) for i in range(256)} | {256: b"th", 257: b" th"}, [(b"t", b"h"), (b" ", b"th")]
    )


@pytest.fixture
def tok_dir(tmp_path: Path, tok: Tokenizer) -> Path:
    folder = tmp_path / "tok"
    tok.save(folder)
    return folder


def temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# --- the output is the input -------------------------------------------------------------------------


def test_encode_refuses_an_output_that_is_the_input(
    tmp_path: Path, tok: Tokenizer, tok_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Output = input (by name, ./name, or a hard link): ValueError naming it, before anything is written;
    the CLI says so on one line and exits 1. The text is intact."""
    text = tmp_path / "a.txt"
    text.write_text(TEXT)
    os.link(text, tmp_path / "link.txt")
    monkeypatch.chdir(tmp_path)
    for out in ["a.txt", "./a.txt", str(text), "link.txt"]:
        with pytest.raises(ValueError, match=f"^{out}: the output is the input file"):
            tok.encode_file("a.txt", out)
        result = run("encode", str(tok_dir), "a.txt", "-o", out)
        assert result.returncode == 1 and result.stderr.startswith(f"bytepair: error: {out}: the output is")
        assert text.read_text() == TEXT
    assert temp_files(tmp_path) == []


def test_report_refuses_an_output_that_is_a_corpus(tmp_path: Path, tok: Tokenizer) -> None:
    """The report's output is one of its corpora: ValueError before any work; the corpus is intact."""
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    with pytest.raises(ValueError, match="the output is the corpus"):
        write_report({"t": tok}, [str(corpus)], str(corpus))
    assert corpus.read_text() == TEXT


# --- outputs that are not regular files --------------------------------------------------------------


@pytest.fixture
def char_device(tmp_path: Path) -> Path:
    """A node of /dev/null's device (1, 3) of our own, so that a writer that replaced it harms nothing."""
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    path = tmp_path / "null"
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return path


def writers(tok: Tokenizer, tmp_path: Path) -> dict[str, Callable[[Path], None]]:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    return {
        "save_bpe": lambda p: bytepair.save_bpe(tok.vocab, tok.merges, p, p),
        "to_hf": tok.to_hf,
        "to_tiktoken": tok.to_tiktoken,
        "write_report": lambda p: write_report({"t": tok}, [str(corpus)], str(p)),
        "encode_file": lambda p: tok.encode_file(corpus, p) and None,
    }


def test_a_device_is_written_directly_never_replaced(
    tmp_path: Path, tok: Tokenizer, tok_dir: Path, char_device: Path
) -> None:
    """Output /dev/null (here a node of the same device): every writer, and the CLI's encode, export and
    report, write into the device, which stays a device (a rename used to make it a regular file)."""
    corpus = tmp_path / "corpus.txt"
    for name, write in writers(tok, tmp_path).items():
        write(char_device)
        assert stat.S_ISCHR(char_device.stat().st_mode), name
    for args in [
        ["encode", str(tok_dir), str(corpus), "-o", str(char_device)],
        ["export", str(tok_dir), "--format", "hf", "-o", str(char_device)],
        ["export", str(tok_dir), "--format", "tiktoken", "-o", str(char_device)],
        ["report", str(tok_dir), "--corpus", str(corpus), "-o", str(char_device)],
    ]:
        result = run(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert stat.S_ISCHR(char_device.stat().st_mode), args
    assert temp_files(tmp_path) == []


def read_fifo_while(path: Path, write: Callable[[], None]) -> bytes:
    """Runs ``write`` (which writes into the FIFO ``path``) on a thread and returns what it wrote."""
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the writer's open does not wait
    errors: list[BaseException] = []

    def target() -> None:
        try:
            write()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    data = b""
    deadline = time.monotonic() + DEADLINE
    while thread.is_alive() or select.select([reader], [], [], 0)[0]:
        assert time.monotonic() < deadline, "the writer did not finish"
        if select.select([reader], [], [], 0.05)[0]:
            block = os.read(reader, 1 << 16)
            data += block
            if not block and not thread.is_alive():
                break
    thread.join(DEADLINE)
    os.close(reader)
    if errors:
        raise errors[0]
    return data


def test_text_writers_write_into_a_fifo(tmp_path: Path, tok: Tokenizer) -> None:
    """A FIFO (or /dev/stdout on a pipe) as the output of a text writer: the text goes into the pipe, and
    the FIFO stays a FIFO (a rename used to replace it with a regular file)."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    for name, write in writers(tok, tmp_path).items():
        if name in ("encode_file", "save_bpe"):
            continue
        regular = tmp_path / f"{name}.out"
        write(regular)
        assert read_fifo_while(fifo, lambda write=write: write(fifo)) == regular.read_bytes(), name
        assert stat.S_ISFIFO(fifo.stat().st_mode), name


def test_encode_file_refuses_a_fifo_and_leaves_it(tmp_path: Path, tok: Tokenizer) -> None:
    """encode_file to a FIFO: OSError naming the FIFO (a .npy header is written last, so the output must
    seek), raised before opening it (no wait for a reader); the FIFO stays a FIFO, nothing is left."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match=f"^{fifo}: cannot write a .npy file to a pipe"):
        tok.encode_file(corpus, fifo)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert temp_files(tmp_path) == []


# --- concurrent writers ------------------------------------------------------------------------------


def test_concurrent_encode_file_calls_to_one_output_never_mix(tmp_path: Path, tok: Tokenizer) -> None:
    """Two threads encode different texts into the same output at once: the file ends as one call's
    complete array, whichever renamed last (they used to share one temporary file and mix)."""
    texts = {"a": "the theme " * 200_000, "b": "xyz, " * 400_000}
    expected = {}
    for name, text in texts.items():
        (tmp_path / f"{name}.txt").write_text(text)
        expected[name] = tok.encode(text)
    out = tmp_path / "out.npy"
    for _ in range(5):
        barrier = threading.Barrier(2)
        results: dict[str, int] = {}

        def encode(name: str, barrier: threading.Barrier, results: dict[str, int]) -> None:
            barrier.wait()
            results[name] = tok.encode_file(tmp_path / f"{name}.txt", out, num_threads=1)

        threads = [threading.Thread(target=encode, args=(name, barrier, results)) for name in texts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE)
        assert results == {name: len(ids) for name, ids in expected.items()}
        ids = np.load(out).tolist()
        assert ids in expected.values()
        assert temp_files(tmp_path) == []


# --- special tokens of one byte ----------------------------------------------------------------------


def test_a_one_byte_special_token_keeps_its_byte_id(tmp_path: Path) -> None:
    """train_bpe(f, 270, ["\\n"]): "\\n" keeps id 10, is not added again (so 270 tokens hold 14 merges),
    and train -> save -> load -> encode works, in Python and through the CLI (the byte used to appear
    twice, ids 10 and 299, and Tokenizer and save_bpe refused the result)."""
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT)
    vocab, merges = bytepair.train_bpe(corpus, 270, ["\n", SPECIAL])
    assert len(vocab) == 270 and len(merges) == 270 - 256 - 1
    assert [i for i, t in vocab.items() if t == b"\n"] == [10] and vocab[269] == SPECIAL.encode()
    assert bytepair.train_bpe(corpus, 256, ["\n"]) == ({i: bytes([i]) for i in range(256)}, [])
    tok = Tokenizer(vocab, merges, ["\n", SPECIAL])
    tok.save(tmp_path / "tok")
    loaded = Tokenizer.from_dir(tmp_path / "tok")
    ids = loaded.encode(TEXT)
    assert ids == tok.encode(TEXT) and loaded.decode(ids) == TEXT and loaded.encode("\n\n") == [10, 10]
    # Text is still split at it: no token holds a newline but the newline itself.
    assert not any(b"\n" in t and t != b"\n" for t in vocab.values())
    assert bytepair.reference.train_bpe(str(corpus), 270, ["\n", SPECIAL]) == (vocab, merges)

    result = run(
        "train", str(corpus), "--vocab-size", "270", "--special-token", "\n", "--out", str(tmp_path / "cli")
    )
    assert result.returncode == 0, result.stderr
    assert Tokenizer.from_dir(tmp_path / "cli").encode(TEXT) == Tokenizer(
        *bytepair.train_bpe(corpus, 270, ["\n"]), ["\n"]
    ).encode(TEXT)


# --- training's summary from the counts --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "specials"),
    [
        (TEXT, [SPECIAL]),
        (TEXT, ["\n", SPECIAL, "<|end"]),  # one byte; overlapping tokens
        ("héllo wörld 😀😀 " * 50 + SPECIAL + SPECIAL + "\n\n  x", [SPECIAL]),
        ("no special token here, only words words words", []),
    ],
)
def test_training_stats_are_exact(tmp_path: Path, text: str, specials: list[str]) -> None:
    """stats["tokens"] is exactly len(encode(text)) with the result, and stats["bytes"] the text's size,
    both from the counts (the CLI used to encode the whole text again for them)."""
    path = tmp_path / "c.txt"
    path.write_text(text, encoding="utf-8")
    stats: dict = {}
    vocab, merges = bytepair.train_bpe(path, 300, specials, stats=stats)
    assert stats["tokens"] == len(Tokenizer(vocab, merges, specials).encode(text))
    assert stats["bytes"] == len(text.encode("utf-8"))


def test_training_from_a_pipe_reports_its_size_and_tokens(tmp_path: Path) -> None:
    """bytepair train /dev/stdin (a pipe, as <(cat f) is): the summary gives the text's real size and
    tokens (it used to read the consumed pipe again: 0.0 MB, 0 tokens)."""
    text = TEXT * 100  # 0.3 MB
    result = run(
        "train",
        "/dev/stdin",
        "--vocab-size",
        "280",
        "--special-token",
        SPECIAL,
        "--out",
        str(tmp_path / "t"),
        input=text,
    )
    assert result.returncode == 0, result.stderr
    tokens = len(Tokenizer.from_dir(tmp_path / "t").encode(text))
    assert f"trained on /dev/stdin: {len(text.encode()) / 1e6:,.1f} MB" in result.stdout
    assert f"({tokens:,} tokens)" in result.stdout
    assert "encoding it again" not in result.stdout


# --- several training files --------------------------------------------------------------------------


def test_train_takes_several_files_each_its_own_document(tmp_path: Path) -> None:
    """train_bpe([a, b, c]) trains as on the files joined by a special token (no pre-token or pair spans
    two files), without joining them anywhere; an empty list is a ValueError."""
    # Spaces at the ends: files run together would make other pre-tokens ("   ", " newer").
    parts = {
        tmp_path / "a.txt": "low lower lowest  ",
        tmp_path / "b.txt": "  newer wider",
        tmp_path / "c": "low",
    }
    for path, part in parts.items():
        path.write_text(part)
    joined = tmp_path / "joined.txt"
    joined.write_text(SPECIAL.join(parts.values()))
    expected = bytepair.train_bpe(joined, 270, [SPECIAL])
    stats: dict = {}
    assert bytepair.train_bpe(list(parts), 270, [SPECIAL], stats=stats) == expected
    assert stats["bytes"] == sum(len(p) for p in parts.values())
    assert bytepair.train_bpe(tuple(map(str, parts)), 270, [SPECIAL]) == expected
    with pytest.raises(ValueError, match="empty list"):
        bytepair.train_bpe([], 270)
    with pytest.raises(FileNotFoundError):
        bytepair.train_bpe([joined, tmp_path / "missing.txt"], 270)


def start_fifo_writer(fifo: Path) -> int:
    """Opens the FIFO ``fifo`` for writing once the process under test opens it for reading."""
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:  # ENXIO: no reader yet
            if e.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def sigterm_while_reading(
    args: list[str], fifo: Path, started: Callable[[], bool], env: dict[str, str]
) -> subprocess.Popen[str]:
    """Runs the CLI with ``args`` reading ``fifo``; feeds it text, sends SIGTERM once ``started()``,
    then ends the input; returns the finished process."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bytepair", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    writer = start_fifo_writer(fifo)
    os.set_blocking(writer, True)
    os.write(writer, TEXT.encode() * 10)
    deadline = time.monotonic() + DEADLINE
    while not started():
        assert time.monotonic() < deadline and process.poll() is None, "the command did not start"
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    time.sleep(0.2)  # the signal is seen within 20 ms; the input ends after it
    os.close(writer)
    process.wait(timeout=DEADLINE)
    return process


def test_sigterm_while_encoding_leaves_no_temporary_file(tmp_path: Path, tok_dir: Path) -> None:
    """SIGTERM (timeout, kill) during bytepair encode: exit 143, "bytepair: terminated", and the hidden
    temporary .npy is removed (SIGTERM used to kill the process and leave it)."""
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    out.mkdir()
    process = sigterm_while_reading(
        ["encode", str(tok_dir), str(fifo), "-o", str(out / "ids.npy")],
        fifo,
        lambda: bool(temp_files(out)),
        dict(os.environ),
    )
    assert process.returncode == 128 + signal.SIGTERM
    assert process.stderr.read() == "bytepair: terminated\n"
    assert temp_files(out) == []


def test_sigterm_while_training_on_several_files_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM during a multi-file bytepair train: exit 143 and nothing in the temporary folder (the
    inputs used to be copied into one file under /tmp first, and SIGTERM left it there)."""
    first = tmp_path / "first.txt"
    first.write_text(TEXT)
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))
    args = ["train", str(first), str(fifo), "--vocab-size", "300", "--out", str(tmp_path / "tok")]
    # Started once it reads the FIFO: the writer's open succeeded, so there is nothing more to wait for.
    process = sigterm_while_reading(args, fifo, lambda: True, env)
    assert process.returncode == 128 + signal.SIGTERM, process.stderr.read()
    assert list(tmpdir.iterdir()) == []
    assert not (tmp_path / "tok" / "vocab.json").exists()


# --- file modes --------------------------------------------------------------------------------------


@pytest.fixture
def umask_022() -> object:
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_files_get_the_usual_mode_and_replaced_files_keep_theirs(
    tmp_path: Path, tok: Tokenizer, umask_022: object
) -> None:
    """Every writer makes new files 0666 & ~umask (0644 here), like any program, and keeps the mode of a
    file it replaces (they used to make 0600 files, and overwriting reset a file to 0600)."""
    for name, write in writers(tok, tmp_path).items():
        new = tmp_path / f"new-{name}"
        write(new)
        assert mode(new) == 0o644, name
        existing = tmp_path / f"existing-{name}"
        existing.write_text("old")
        existing.chmod(0o640)
        write(existing)
        assert mode(existing) == 0o640 and existing.read_bytes() != b"old", name
    tok.save(tmp_path / "saved")
    assert {p.name: mode(p) for p in (tmp_path / "saved").iterdir()} == {
        "vocab.json": 0o644,
        "merges.txt": 0o644,
        "special_tokens.json": 0o644,
    }
    corpus = tmp_path / "corpus.txt"
    result = run("train", str(corpus), "--vocab-size", "260", "--out", str(tmp_path / "trained"))
    assert result.returncode == 0, result.stderr
    assert {mode(p) for p in (tmp_path / "trained").iterdir()} == {0o644}


def test_symbolic_link_outputs_stay_links(tmp_path: Path, tok: Tokenizer) -> None:
    """An output that is a symbolic link to a file: the file it points to is replaced, the link stays."""
    for name, write in writers(tok, tmp_path).items():
        target = tmp_path / f"target-{name}"
        target.write_text("old")
        link = tmp_path / f"link-{name}"
        link.symlink_to(target)
        write(link)
        assert link.is_symlink() and target.read_bytes() != b"old", name
    assert json.loads((tmp_path / "target-to_hf").read_text())["model"]["type"] == "BPE"
