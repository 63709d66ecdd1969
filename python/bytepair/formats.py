"""GPT-2 style files: ``vocab.json`` and ``merges.txt``.

GPT-2 (and HF tokenizers, and the CS336 fixtures) write token bytes as text through a fixed table that
maps each of the 256 bytes to a printable character (:func:`bytes_to_unicode`): printable Latin-1 bytes
map to themselves and the rest (space, control bytes, ...) to characters from U+0100 on. So every token,
even invalid UTF-8 or one holding a space or a newline, is a short printable string, and a merges line
``"Ġt he"`` splits unambiguously on its one space.

- ``vocab.json``: a JSON object ``{token_text: id}``.
- ``merges.txt``: one merge per line, ``left right``, in merge order. An optional first line
  ``#version: ...`` (as in OpenAI's ``vocab.bpe``) is skipped when reading and not written.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from typing import Union

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

__all__ = ["bytes_to_unicode", "load_bpe", "save_bpe"]


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from byte values to the characters that stand for them in vocab and merges files.

    >>> table = bytes_to_unicode()
    >>> table[ord("a")], table[ord(" ")], table[ord("\\n")]
    ('a', 'Ġ', 'Ċ')
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


@functools.cache
def _unicode_to_bytes() -> dict[str, int]:
    return {c: b for b, c in bytes_to_unicode().items()}


def _encode_token(token: bytes) -> str:
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def _decode_token(text: str, where: str) -> bytes:
    table = _unicode_to_bytes()
    try:
        return bytes(table[c] for c in text)
    except KeyError as e:
        raise ValueError(f"{where}: {e.args[0]!r} is not a character of the GPT-2 byte table") from None


def _path(path: PathLike, what: str = "path") -> str:
    """``path`` as a str: a str, an ``os.PathLike``, or bytes (decoded as the file system does, like
    ``os.fsdecode``, so that any file name works)."""
    try:
        return os.fsdecode(path)
    except TypeError:
        raise TypeError(
            f"{what} must be a path (str, bytes or os.PathLike), not {type(path).__name__}"
        ) from None


def _naming(e: OSError, name: str) -> OSError:
    """``e`` about the file ``name`` (the path the caller gave) instead of a temporary file."""
    if e.errno is None:
        return OSError(f"{name}: {e}")
    return OSError(e.errno, e.strerror, name)  # OSError picks the subclass (FileNotFoundError, ...)


def _create_temp(folder: str, mode: int | None) -> tuple[int, str]:
    """A new file in ``folder`` with a short name unique to this call (random, created with O_EXCL), and
    mode ``mode`` or, when None, the usual mode under the umask; returns its descriptor and path."""
    while True:
        tmp = os.path.join(folder, f".bp-{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except BaseException:
                os.close(fd)
                os.unlink(tmp)
                raise
        return fd, tmp


def _write_atomically(path: PathLike, text: str) -> None:
    """Writes ``text`` (UTF-8) to the file ``path``, losing nothing whatever happens.

    A regular file, or a new one, is written through a temporary file beside it and a rename, so that it
    is either the old file or the whole new one, never a partial write; a replaced file keeps its mode,
    a new one gets the usual mode under the umask, and a symbolic link stays a link (its target is
    replaced). A device or a pipe (``/dev/null``, ``/dev/stdout``, a FIFO) is written directly, as a
    shell redirection would: a rename would replace the device node itself. A directory, or a path
    ending in a slash, raises IsADirectoryError. Errors name ``path``, never the temporary file.
    """
    name = _path(path)
    if name.endswith(("/", os.sep)) or os.path.isdir(name):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    try:
        existing = os.stat(name)
    except FileNotFoundError:
        existing = None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(name, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        return
    target = os.path.realpath(name) if existing is not None else name
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else None
    try:
        fd, tmp = _create_temp(os.path.dirname(target) or ".", mode)
    except OSError as e:
        raise _naming(e, name) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _naming(e, name) from None
        raise


def save_bpe(
    vocab: Mapping[int, bytes],
    merges: Iterable[tuple[bytes, bytes]],
    vocab_path: PathLike,
    merges_path: PathLike,
) -> None:
    """Writes ``vocab`` and ``merges`` as GPT-2 ``vocab.json`` and ``merges.txt``, each atomically.

    Each file is written through a uniquely named temporary file and a rename, so it is the old file or
    the whole new one; a new file gets the usual mode under the umask, a replaced one keeps its mode, a
    symbolic link stays a link. A device or a pipe (``/dev/stdout``) is written directly; a directory
    raises IsADirectoryError. Errors name the path given. (``to_hf``, ``to_tiktoken`` and
    ``Tokenizer.save`` write the same way.)

    Raises ValueError if two ids share the same bytes (``vocab.json`` maps bytes to ids, so it cannot
    hold both) or a merge is not a pair of bytes.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b" t"}
    >>> save_bpe(vocab, [(b" ", b"t")], os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt"))
    >>> open(os.path.join(d, "merges.txt"), encoding="utf-8").read()
    'Ġ t\\n'
    """
    by_text: dict[str, int] = {}
    for token_id, token in sorted(vocab.items()):
        if not isinstance(token, bytes):
            raise TypeError(f"vocab[{token_id}] must be bytes, not {type(token).__name__}")
        text = _encode_token(token)
        if text in by_text:
            raise ValueError(
                f"vocab ids {by_text[text]} and {token_id} are both {token!r}; "
                "vocab.json needs distinct tokens"
            )
        by_text[text] = token_id
    lines = []
    for i, merge in enumerate(merges):
        if not (isinstance(merge, tuple) and len(merge) == 2 and all(isinstance(t, bytes) for t in merge)):
            raise ValueError(f"merges[{i}] must be a pair of bytes, not {merge!r}")
        lines.append(f"{_encode_token(merge[0])} {_encode_token(merge[1])}\n")
    _write_atomically(vocab_path, json.dumps(by_text, ensure_ascii=False, indent=0) + "\n")
    _write_atomically(merges_path, "".join(lines))


def load_bpe(
    vocab_path: PathLike, merges_path: PathLike
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Reads GPT-2 ``vocab.json`` and ``merges.txt`` (as written by :func:`save_bpe`, HF tokenizers or
    OpenAI's GPT-2 release) into ``(vocab, merges)``.

    Errors name the file and, for merges, the line: OSError subclasses for unreadable files, ValueError
    for malformed content.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> v, m = os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")
    >>> save_bpe({0: b"a", 1: b"b", 2: b"ab"}, [(b"a", b"b")], v, m)
    >>> load_bpe(v, m)
    ({0: b'a', 1: b'b', 2: b'ab'}, [(b'a', b'b')])
    """
    vocab_name, merges_name = _path(vocab_path, "vocab_path"), _path(merges_path, "merges_path")
    with open(vocab_name, encoding="utf-8") as f:
        try:
            raw = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{vocab_name}: not a JSON vocabulary: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{vocab_name}: expected a JSON object of token -> id")
    vocab: dict[int, bytes] = {}
    for text, token_id in raw.items():
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise ValueError(f"{vocab_name}: id of {text!r} must be a non-negative integer, not {token_id!r}")
        if token_id in vocab:
            raise ValueError(f"{vocab_name}: id {token_id} is given to two tokens")
        vocab[token_id] = _decode_token(text, vocab_name)
    merges: list[tuple[bytes, bytes]] = []
    with open(merges_name, encoding="utf-8") as f:
        try:
            lines = f.read().splitlines()
        except UnicodeDecodeError as e:
            raise ValueError(f"{merges_name}: not UTF-8 text: {e}") from None
    for lineno, line in enumerate(lines, 1):
        if not line or (lineno == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(
                f"{merges_name}:{lineno}: expected two tokens separated by one space, got {line!r}"
            )
        where = f"{merges_name}:{lineno}"
        merges.append((_decode_token(parts[0], where), _decode_token(parts[1], where)))
    return dict(sorted(vocab.items())), merges
