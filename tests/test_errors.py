"""Clear errors: each bad input gets an exception (or a one-line CLI error) that names what the user gave
and says what is wrong, before any work is done. Each test names what the bad input now gets."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import bytepair
from bytepair import Tokenizer, cli
from bytepair.report import write_report

TEXT = "the cat sat on the mat<|endoftext|>the hat is flat, isn't it? 42 cats!\n" * 30


@pytest.fixture
def tok() -> Tokenizer:
    return Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"th"}, [(b"t", b"h")], ["<|endoftext|>"])


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT)
    return path


def file_writers(tok: Tokenizer, corpus: Path) -> dict[str, Callable[[str], object]]:
    """Each function that writes one file the caller names."""
    return {
        "save_bpe": lambda p: bytepair.save_bpe(tok.vocab, tok.merges, p, p),
        "to_hf": tok.to_hf,
        "to_tiktoken": tok.to_tiktoken,
        "write_report": lambda p: write_report({"t": tok}, [str(corpus)], p),
        "encode_file": lambda p: tok.encode_file(corpus, p),
    }


def test_write_errors_name_the_path_given(tmp_path: Path, tok: Tokenizer, corpus: Path) -> None:
    """An output in a missing folder: FileNotFoundError whose filename and message are the path given
    (they used to name the temporary file, nodir/.bytepair-v694emy9.tmp); also for save's folder and
    the CLI's export."""
    given = str(tmp_path / "nodir" / "out.json")
    for name, write in file_writers(tok, corpus).items():
        with pytest.raises(FileNotFoundError) as caught:
            write(given)
        assert caught.value.filename == given and ".tmp" not in str(caught.value), name
    (tmp_path / "a_file").write_text("")
    with pytest.raises(FileExistsError) as caught:
        tok.save(tmp_path / "a_file")
    assert caught.value.filename == str(tmp_path / "a_file")
    tok.save(tmp_path / "tok")
    result = subprocess.run(
        [sys.executable, "-m", "bytepair", "export", str(tmp_path / "tok"), "--format", "hf", "-o", given],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        result.returncode == 1 and result.stderr == f"bytepair: error: {given}: No such file or directory\n"
    )


def test_output_names_up_to_the_file_system_limit_work(tmp_path: Path, tok: Tokenizer, corpus: Path) -> None:
    """A 250-byte output name (the limit is 255) is written (encode_file's temporary name used to be
    the output's name plus a suffix, which did not fit: "File name too long")."""
    for name, write in file_writers(tok, corpus).items():
        path = tmp_path / (name[0] * 250)
        write(str(path))
        assert path.stat().st_size > 0, name
    assert np.load(tmp_path / ("e" * 250)).tolist() == tok.encode(TEXT)


def test_directory_outputs_raise_is_a_directory_error(
    tmp_path: Path, tok: Tokenizer, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An output that is a directory, or ends with a slash: IsADirectoryError naming it (encode_file gave
    "Not a directory" for 'adir/' and "Device or resource busy" for '.')."""
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    for name, write in file_writers(tok, corpus).items():
        for given in ["adir/", "adir", ".", "missing/", str(tmp_path) + "/"]:
            with pytest.raises(IsADirectoryError) as caught:
                write(given)
            assert caught.value.errno == errno.EISDIR and caught.value.filename == given, (name, given)
    assert sorted(os.listdir(tmp_path)) == ["adir", "corpus.txt"]
    assert os.listdir(tmp_path / "adir") == []


@pytest.mark.parametrize("error", [RuntimeError("bytepair internal error"), MemoryError("out of memory")])
def test_every_bytepair_error_is_one_cli_line(
    error: Exception, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """RuntimeError and MemoryError reach the user as the CLI's one-line error, exit 1 (a RuntimeError
    used to end in a traceback)."""

    def failing(folder: str) -> Tokenizer:
        raise error

    monkeypatch.setattr(Tokenizer, "from_dir", failing)
    assert cli.main(["inspect", "somewhere"]) == 1
    assert capsys.readouterr().err == f"bytepair: error: {error}\n"


def test_decode_takes_integer_ids_only(tok: Tokenizer) -> None:
    """decode of a float (even a whole one), a str or a float array: TypeError (995.7 used to decode as
    995). Ints, NumPy integers and NumPy integer arrays decode; bools are the ints 0 and 1."""
    for ids in [[104.0], [995.7], ["104"], np.array([104.0]), "hi", b"hi", np.array([[104]])]:
        with pytest.raises(TypeError, match="^decode takes"):
            tok.decode(ids)
    expected = "th!"
    for ids in [
        [256, 33],
        (256, 33),
        iter([256, 33]),
        [np.int64(256), np.uint16(33)],
        np.array([256, 33], dtype=np.uint16),
        np.array([256, 33], dtype=np.int64),
    ]:
        assert tok.decode(ids) == expected
    assert tok.decode([True, False]) == "\x01\x00"


def test_encode_batch_refuses_a_single_text(tok: Tokenizer) -> None:
    """encode_batch("hello") or of bytes: TypeError pointing to encode (a str used to be encoded as a
    batch of its characters)."""
    for texts in ["hello", b"hello"]:
        with pytest.raises(TypeError, match="use encode for one text"):
            tok.encode_batch(texts)  # type: ignore[arg-type]
    assert tok.encode_batch(["hello"]) == [tok.encode("hello")]


def test_train_checks_stats_before_training(corpus: Path) -> None:
    """train_bpe(stats=[]): TypeError before any work (it used to fail only after training)."""
    reports: list[str] = []
    with pytest.raises(TypeError, match="stats must be a dict or None, not list"):
        bytepair.train_bpe(corpus, 300, stats=[], progress=lambda phase, done, total: reports.append(phase))  # type: ignore[arg-type]
    assert reports == []


def test_bytes_paths_work_everywhere(tmp_path: Path, tok: Tokenizer, corpus: Path) -> None:
    """Paths as bytes, even a name that is not UTF-8, are taken as os.fsdecode takes them (the engine's
    functions used to refuse them confusingly). A path of another type is a TypeError naming it."""
    b = os.fsencode
    odd = tmp_path / os.fsdecode(b"corpus-\xff.txt")
    odd.write_text(TEXT)
    for text in [b(corpus), b(odd)]:
        assert bytepair.train_bpe(text, 260) == bytepair.train_bpe(corpus, 260)
        assert bytepair.train_bpe([text, text], 260) == bytepair.train_bpe([corpus, corpus], 260)
    assert tok.encode_file(b(odd), b(tmp_path / os.fsdecode(b"ids-\xfe.npy"))) == len(tok.encode(TEXT))
    folder = b(tmp_path / "tok")
    tok.save(folder)
    assert Tokenizer.from_dir(folder).encode(TEXT) == tok.encode(TEXT)
    vocab, merges = b(tmp_path / "v.json"), b(tmp_path / "m.txt")
    bytepair.save_bpe(tok.vocab, tok.merges, vocab, merges)
    assert bytepair.load_bpe(vocab, merges) == (tok.vocab, tok.merges)
    assert Tokenizer.from_files(vocab, merges).merges == tok.merges
    tok.to_hf(b(tmp_path / "t.json"))
    assert Tokenizer.from_hf(b(tmp_path / "t.json")).encode(TEXT) == tok.encode(TEXT)
    tok.to_tiktoken(b(tmp_path / "t.tiktoken"))
    assert Tokenizer.from_tiktoken(b(tmp_path / "t.tiktoken"), ["<|endoftext|>"]).encode(TEXT) == tok.encode(
        TEXT
    )
    write_report({"t": tok}, [str(corpus)], b(tmp_path / "r.html"))  # type: ignore[arg-type]
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    for call in [
        lambda: bytepair.train_bpe(3, 260),  # type: ignore[arg-type]
        lambda: tok.encode_file(corpus, 3),  # type: ignore[arg-type]
        lambda: tok.to_hf(None),  # type: ignore[arg-type]
    ]:
        with pytest.raises(TypeError, match=r"must be a path \(str, bytes or os\.PathLike\)"):
            call()
