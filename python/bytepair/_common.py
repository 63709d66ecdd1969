"""What the public modules share, defined once: how arguments are checked and files are written.

- Paths: :data:`PathLike` and :func:`path_str`, so every function takes str, bytes and ``os.PathLike``
  alike and names a bad argument the same way.
- ``num_threads``: :func:`check_num_threads`, the one rule for training, encoding, the report and the
  command line.
- Sources: :func:`check_errors` and :func:`check_text_field`, taken by counting, training and the
  command line alike.
- Special tokens: :func:`check_special_tokens` (type checks, duplicates dropped), and the vocabulary
  with or without them (:func:`ordinary_tokens`, :func:`special_token_ids`).
- Outputs: :func:`write_atomically`, which never leaves a partial file where the user's was.
- Token text: GPT-2's byte-to-character table (:func:`bytes_to_unicode`, public as
  ``bytepair.bytes_to_unicode``), with :func:`encode_token` and :func:`decode_token`, which
  ``vocab.json``, ``merges.txt`` and HF's ``tokenizer.json`` all write tokens with.

The module is private; its names carry no underscore so that importing them is not reaching into another
module's internals.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import operator
import os
import secrets
import stat
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Union

from . import _core

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def path_str(path: PathLike, what: str = "path") -> str:
    """``path`` as a str: a str, an ``os.PathLike``, or bytes (decoded as the file system does, like
    ``os.fsdecode``, so that any file name works); ``what`` names the argument in the TypeError.

    >>> import pathlib
    >>> path_str(pathlib.Path("/tmp/a.txt")), path_str(b"/tmp/b.txt")
    ('/tmp/a.txt', '/tmp/b.txt')
    >>> path_str(3, "input_path")
    Traceback (most recent call last):
    TypeError: input_path must be a path (str, bytes or os.PathLike), not int
    """
    try:
        return os.fsdecode(path)
    except TypeError:
        raise TypeError(
            f"{what} must be a path (str, bytes or os.PathLike), not {type(path).__name__}"
        ) from None


def check_num_threads(num_threads: Any) -> int | None:
    """``num_threads`` as the engine takes it: None (every core) or a positive int, capped at four
    threads per core (more cannot make the work faster, and each costs memory).

    >>> check_num_threads(None), check_num_threads(1)
    (None, 1)
    >>> check_num_threads(10**6) == _core.max_threads()
    True
    >>> check_num_threads(0)
    Traceback (most recent call last):
    ...
    ValueError: num_threads must be a positive int or None, not 0
    """
    if num_threads is None:
        return None
    try:
        n = operator.index(num_threads) if not isinstance(num_threads, bool) else 0
    except TypeError:
        n = 0
    if n < 1:
        raise ValueError(f"num_threads must be a positive int or None, not {num_threads!r}")
    return min(n, _core.max_threads())


def check_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    """``special_tokens`` as a list of str without duplicates, in the order given (None is none).

    A single str or bytes is refused rather than taken as a sequence of one-character tokens.

    >>> check_special_tokens(["<|endoftext|>", "<|pad|>", "<|endoftext|>"])
    ['<|endoftext|>', '<|pad|>']
    >>> check_special_tokens("<|endoftext|>")
    Traceback (most recent call last):
    TypeError: special_tokens must be a list of str, not a single str
    """
    if special_tokens is None:
        return []
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError("special_tokens must be a list of str, not a single " + type(special_tokens).__name__)
    tokens = list(special_tokens)
    for t in tokens:
        if not isinstance(t, str):
            raise TypeError(f"special tokens must be str, not {type(t).__name__}: {t!r}")
    return list(dict.fromkeys(tokens))


def check_errors(errors: Any) -> bool:
    """Whether ``errors`` (``"strict"`` or ``"skip"``, how sources treat bad records) skips them.

    >>> check_errors("strict"), check_errors("skip")
    (False, True)
    >>> check_errors("ignore")
    Traceback (most recent call last):
    ValueError: errors must be "strict" or "skip", not 'ignore'
    """
    if errors not in ("strict", "skip"):
        raise ValueError(f'errors must be "strict" or "skip", not {errors!r}')
    return errors == "skip"


def check_text_field(text_field: Any) -> str:
    """``text_field``, the JSON field or Parquet column of a source's text: a non-empty str.

    >>> check_text_field("content")
    'content'
    >>> check_text_field("")
    Traceback (most recent call last):
    ValueError: text_field must be a non-empty str, not ''
    """
    if not isinstance(text_field, str):
        raise TypeError(f"text_field must be a str, not {type(text_field).__name__}")
    if not text_field:
        raise ValueError("text_field must be a non-empty str, not ''")
    return text_field


def ordinary_tokens(vocab: Mapping[int, bytes], special_tokens: Iterable[str]) -> dict[int, bytes]:
    """The tokens of ``vocab`` that are not special tokens, by id.

    >>> ordinary_tokens({0: b"a", 1: b"<s>"}, ["<s>"])
    {0: b'a'}
    """
    specials = {s.encode("utf-8") for s in special_tokens}
    return {i: t for i, t in vocab.items() if t not in specials}


def special_token_ids(vocab: Mapping[int, bytes], special_tokens: Iterable[str]) -> dict[str, int]:
    """The id of each special token in ``vocab``, as tiktoken and HF's added tokens take them.

    >>> special_token_ids({0: b"a", 1: b"<s>"}, ["<s>"])
    {'<s>': 1}
    """
    ids = {token: token_id for token_id, token in vocab.items()}
    return {s: ids[s.encode("utf-8")] for s in special_tokens}


def _error_about(e: OSError, name: str) -> OSError:
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


def write_atomically(path: PathLike, text: str | bytes) -> None:
    """Writes ``text`` (str as UTF-8, or bytes as they are) to the file ``path``, losing nothing whatever
    happens.

    A regular file, or a new one, is written through a temporary file beside it and a rename, so that it
    is either the old file or the whole new one, never a partial write; a replaced file keeps its mode,
    a new one gets the usual mode under the umask, and a symbolic link stays a link (its target is
    replaced). A device or a pipe (``/dev/null``, ``/dev/stdout``, a FIFO) is written directly, as a
    shell redirection would: a rename would replace the device node itself. A directory, or a path
    ending in a slash, raises IsADirectoryError. Errors name ``path``, never the temporary file.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> write_atomically(os.path.join(d, "a.txt"), "hello\\n")
    >>> open(os.path.join(d, "a.txt")).read(), os.listdir(d)
    ('hello\\n', ['a.txt'])
    >>> write_atomically(d, "hello\\n")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    IsADirectoryError: [Errno 21] Is a directory: ...
    """
    name = path_str(path)
    if name.endswith(("/", os.sep)) or os.path.isdir(name):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    try:
        existing = os.stat(name)
    except FileNotFoundError:
        existing = None
    data = text.encode("utf-8") if isinstance(text, str) else text
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(name, "wb") as f:
            f.write(data)
        return
    target = os.path.realpath(name) if existing is not None else name
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else None
    try:
        fd, tmp = _create_temp(os.path.dirname(target) or ".", mode)
    except OSError as e:
        raise _error_about(e, name) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise _error_about(e, name) from None
        raise


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from byte values to the characters that stand for them in vocab and merges files.

    Printable Latin-1 bytes stand for themselves and the rest (space, control bytes, ...) for characters
    from U+0100 on, so that every token, even invalid UTF-8 or one holding a space, is a short printable
    string.

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


def encode_token(token: bytes) -> str:
    """The text that stands for ``token`` in GPT-2's files (:func:`bytes_to_unicode`).

    >>> encode_token(b" the\\n")
    'ĠtheĊ'
    """
    table = bytes_to_unicode()
    return "".join(table[b] for b in token)


def decode_token(text: str, where: str) -> bytes:
    """The token that ``text`` stands for in GPT-2's files; ``where`` (a file, a line) starts the
    ValueError raised for a character outside the table.

    >>> decode_token("ĠtheĊ", "vocab.json")
    b' the\\n'
    >>> decode_token("€", "merges.txt:3")
    Traceback (most recent call last):
    ValueError: merges.txt:3: '€' is not a character of the GPT-2 byte table
    """
    table = _unicode_to_bytes()
    try:
        return bytes(table[c] for c in text)
    except KeyError as e:
        raise ValueError(f"{where}: {e.args[0]!r} is not a character of the GPT-2 byte table") from None


def check_vocab_size(vocab_size: Any, specials: list[str]) -> int:
    """``vocab_size`` checked against the special tokens, and capped where training stops anyway.

    >>> check_vocab_size(1000, ["<|endoftext|>"])
    1000
    >>> check_vocab_size(256, ["<|endoftext|>"])
    Traceback (most recent call last):
    ValueError: vocab_size 256 is too small: the 256 byte tokens and the special tokens need at least 257
    """
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, not {type(vocab_size).__name__}")
    added = [t for t in specials if len(t.encode("utf-8")) > 1]  # one byte: that byte's token already
    if vocab_size < 256 + len(added):
        raise ValueError(
            f"vocab_size {vocab_size} is too small: the 256 byte tokens and the special tokens need at least "
            f"{256 + len(added)}"
        )
    # Training stops when no pair is left, long before any vocab_size beyond sys.maxsize.
    return min(vocab_size, sys.maxsize)
