"""Sources: what a corpus is given as, resolved to the files and texts to count.

A *source* is any of:

- a path (str, bytes or ``os.PathLike``) to a file;
- a path to a directory: its files, recursively, sorted by path. Names starting with ``.`` are skipped,
  files and directories alike (``.git``, ``.cache``, editors' and ``bytepair``'s own temporary files);
  symbolic links are followed, each directory once;
- a glob pattern (``"data/*.parquet"``, ``"shards/**/*.jsonl.zst"``), its matches sorted by path (each
  file once, however many links lead to it), a directory matched taken as above;
- a list or tuple of these;
- any other iterable (a generator, an iterator, a ``datasets`` column...) of ``str``, each item one
  document. A list is always a list of sources: pass a list of documents as ``iter(texts)``.

A file's kind comes from its name, in any case: ``.txt`` (documents separated by the special tokens),
``.jsonl`` or ``.json`` (JSON lines: one object a line, its text in the field ``text_field``), each
possibly compressed as ``.gz``, ``.zst`` or ``.xz``, and ``.parquet`` (the column ``text_field``). In a
directory or a pattern's matches, any other name is an error. A file named on its own whose name is
none of these (``corpus.en``, ``/dev/stdin``) is read as plain text, as ``train_bpe`` always has; unless
its name ends in ``.gz``, ``.zst`` or ``.xz``, which says it is not plain text.
"""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from . import _core
from ._common import PathLike

Source = Union[PathLike, Iterable[str], "list[Any]", "tuple[Any, ...]"]

__all__ = ["SourceFile", "Sources", "resolve", "shard"]

_PATTERN_CHARACTERS = ("*", "?", "[")


@dataclass(frozen=True)
class SourceFile:
    """A file to count: its path, format (``"txt"``, ``"jsonl"`` or ``"parquet"``), compression
    (``"gzip"``, ``"zstd"``, ``"xz"`` or None) and size on disk in bytes."""

    path: str
    format: str
    compression: str | None
    size: int


@dataclass
class Sources:
    """Sources resolved: the files in order, and the iterables of documents in order."""

    files: list[SourceFile] = field(default_factory=list)
    texts: list[Iterable[str]] = field(default_factory=list)


def _kind(path: str, named: bool) -> tuple[str, str | None]:
    """The (format, compression) of the file ``path``: from its name, or plain text for a file ``named``
    on its own whose name gives no kind and no compression."""
    try:
        return _core.source_kind(path)
    except ValueError:
        if named and not path.lower().endswith((".gz", ".zst", ".xz")):
            return "txt", None
        raise


def _file(path: str, named: bool) -> SourceFile:
    file_format, compression = _kind(path, named)
    try:
        size = os.stat(path).st_size
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    return SourceFile(path, file_format, compression, size)


def _walk(folder: str) -> list[str]:
    """The files under ``folder``, recursively, sorted, without names starting with a dot; each
    directory is entered once, however many links lead to it."""
    seen: set[str] = set()
    found = []

    def fail(e: OSError) -> None:
        raise e

    for root, dirs, files in os.walk(folder, onerror=fail, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(os.path.join(root, f) for f in files if not f.startswith("."))
    return sorted(found)


def _expand(spec: PathLike) -> list[SourceFile]:
    """The files of one path, directory or pattern."""
    path = os.fsdecode(spec)
    if os.path.isdir(path):
        names = _walk(path)
        if not names:
            raise ValueError(f"{path}: the directory holds no files (names starting with '.' are skipped)")
        return [_file(name, named=False) for name in names]
    if os.path.exists(path):
        return [_file(path, named=True)]
    if any(c in path for c in _PATTERN_CHARACTERS):
        matches = sorted(glob.glob(path, recursive=True))
        if not matches:
            raise FileNotFoundError(errno.ENOENT, "no file matches the pattern", path)
        files = []
        for match in matches:
            files.extend(_expand(match) if os.path.isdir(match) else [_file(match, named=False)])
        # "**" follows links to directories, a link to a parent over and over: each file once.
        seen: set[str] = set()
        unique = []
        for f in files:
            real = os.path.realpath(f.path)
            if real not in seen:
                seen.add(real)
                unique.append(f)
        return unique
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _is_path(source: object) -> bool:
    return isinstance(source, (str, bytes, os.PathLike))


def resolve(sources: Source, what: str = "sources") -> Sources:
    """The files and iterables of documents that ``sources`` stands for (see the module's docstring).

    Every file is looked up before anything is read. Raises FileNotFoundError for a missing path or a
    pattern that matches nothing, ValueError for an empty directory or list, or a file in a directory
    or pattern whose name gives no kind (the message names it), TypeError for what is no source (naming
    it as ``what``).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name in ["b.jsonl.zst", "a.txt", ".hidden.txt", "sub/c.parquet"]:
    ...     os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
    ...     _ = open(os.path.join(d, name), "w").write("x")
    >>> [(os.path.relpath(f.path, d), f.format, f.compression) for f in resolve(d).files]
    [('a.txt', 'txt', None), ('b.jsonl.zst', 'jsonl', 'zstd'), ('sub/c.parquet', 'parquet', None)]
    >>> docs = iter(["one document", "another"])
    >>> resolved = resolve([os.path.join(d, "*.txt"), docs])
    >>> [os.path.basename(f.path) for f in resolved.files], resolved.texts == [docs]
    (['a.txt'], True)
    >>> resolve(os.path.join(d, "*.csv"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    FileNotFoundError: [Errno 2] no file matches the pattern: '.../*.csv'
    """
    resolved = Sources()
    if _is_path(sources):
        resolved.files = _expand(sources)  # type: ignore[arg-type]
        return resolved
    if isinstance(sources, (list, tuple)):
        if not sources:
            raise ValueError(f"{what} is an empty list: give at least one path, pattern or iterable")
        for i, source in enumerate(sources):
            if _is_path(source):
                resolved.files.extend(_expand(source))
            elif isinstance(source, (list, tuple)):
                raise TypeError(f"{what}[{i}] is a list: sources are a flat list of paths and iterables")
            else:
                resolved.texts.append(_documents(source, f"{what}[{i}]"))
        return resolved
    resolved.texts.append(_documents(sources, what))
    return resolved


def _documents(source: object, what: str) -> Iterable[str]:
    """``source`` as an iterable of documents, or TypeError naming it as ``what``."""
    if isinstance(source, Mapping):
        raise TypeError(
            f"{what} is a mapping: give its text, e.g. (row['text'] for row in rows), not the records"
        )
    if not isinstance(source, Iterable):
        raise TypeError(
            f"{what} must be a path (str, bytes or os.PathLike), a pattern, a list of them or an iterable "
            f"of str, not {type(source).__name__}"
        )
    return source


def shard(files: list[SourceFile], index: int, count: int) -> list[SourceFile]:
    """The ``index``-th (from 0) of ``count`` parts of ``files``: contiguous runs, in order, cut where
    the bytes before the cut come closest to ``index / count`` of all the bytes. Every file is in
    exactly one part, and the parts depend only on the files and their sizes, so jobs that each count
    one part (a Slurm array) together count everything once. A part may be empty when there are fewer
    files than parts.

    >>> files = [SourceFile(f"{i}.txt", "txt", None, size) for i, size in enumerate([5, 1, 1, 1, 4, 4])]
    >>> [[f.path for f in shard(files, i, 3)] for i in range(3)]
    [['0.txt'], ['1.txt', '2.txt', '3.txt', '4.txt'], ['5.txt']]
    """
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} is not in 0..{count - 1}")
    total = sum(f.size for f in files)

    def cut(part: int) -> int:
        """How many files come before part ``part``: the prefix whose bytes are nearest part/count."""
        target = total * part / count
        before, best, best_distance = 0, 0, abs(target)
        for i, f in enumerate(files):
            before += f.size
            distance = abs(before - target)
            if distance < best_distance:
                best, best_distance = i + 1, distance
        return best

    return files[cut(index) : cut(index + 1)] if index + 1 < count else files[cut(index) :]
