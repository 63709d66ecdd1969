"""Counting pre-tokens: the first phase of training, made a value of its own that merges and saves.

:func:`count_pretokens` counts any sources (:mod:`bytepair.sources`) into :class:`PreTokenCounts`;
counts of shards add up (``a + b``) to exactly the counts of the whole, and
:func:`bytepair.train_from_counts` trains on them as :func:`bytepair.train_bpe` trains on the text. So a
corpus can be counted in parts, on many machines or at many times, and the parts saved
(:meth:`PreTokenCounts.save`) and merged later.

Files of every kind (text, JSON lines, compressed or not, and Parquet) are read by the engine, all at
once on ``num_threads`` threads with the GIL released: a large text file in chunks and a Parquet file in
row groups, which any thread takes, the others a file a thread. An iterable of ``str`` is taken in
batches of about a megabyte of text, each counted on ``num_threads`` threads with the GIL released.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import _core
from ._common import (
    PathLike,
    check_errors,
    check_num_threads,
    check_special_tokens,
    check_text_field,
    path_str,
    write_atomically,
)
from ._progress import ProgressBar
from .sources import Source, SourceFile, resolve

__all__ = ["CountPart", "PreTokenCounts", "count_part", "count_parts", "count_pretokens", "plan_parts"]

ProgressCallback = Callable[[str, int, int], None]

# An iterable's documents go to the engine in batches of this many characters (or more, for a longer
# document): large enough that starting threads and merging their counts cost little, small enough that
# a batch's copy is no memory to speak of.
_BATCH_CHARACTERS = 1 << 20


class PreTokenCounts(_core.PreTokenCounts):
    """How often each distinct pre-token occurs in a corpus, with what was counted.

    Made by :func:`count_pretokens`, or empty (``PreTokenCounts()``). Counts are 64-bit.

    - ``a + b`` and ``a.update(b)`` add counts: associative and commutative, exactly the counts of the
      texts counted together. ``sum(parts)`` works. Counts made with different special tokens do not
      add (ValueError): the text was split differently.
    - ``len(counts)``: distinct pre-tokens; ``counts.total()``: pre-tokens (special tokens are not);
      ``counts[b" the"]``: one pre-token's count (0 if absent); ``counts.most_common(n)``: the ``n``
      most common as ``(bytes, count)``, most common first, ties in byte order (all when ``n`` is None).
    - ``counts.bytes``: bytes of text counted (special tokens included); ``counts.documents``:
      documents (records of JSON lines and Parquet, items of an iterable, and one for each text file);
      ``counts.special_occurrences``; ``counts.special_tokens``: the special tokens the text was split
      at (None before anything was counted).
    - ``counts.skipped``: bad records skipped under ``errors="skip"``, and ``counts.skipped_errors``:
      the messages of the first ten, in source order (kept in memory only, not saved).
    - ``counts.save(path)``, ``PreTokenCounts.load(path)``: a compact, versioned, checksummed file
      (:meth:`save`), the same bytes for the same counts. Pickling (how counts move between processes:
      multiprocessing, Ray) takes a faster, larger form, checksummed, messages of skipped records
      included, which only the same version of bytepair reads: save counts to keep them.

    Equal counts (``==``) have the same pre-tokens and counts, totals and special tokens.

    >>> a = count_pretokens(iter(["the cat", "the hat"]))
    >>> b = count_pretokens(iter(["a cat"]))
    >>> len(a), a.total(), a[b" cat"], a.most_common(2)
    (3, 4, 1, [(b'the', 2), (b' cat', 1)])
    >>> (a + b).total(), (a + b).documents, (a + b)[b" cat"]
    (6, 3, 2)
    >>> (a + b) == (b + a) == sum([b, a])
    True
    """

    __hash__ = None  # type: ignore[assignment]  # counts change: no hash

    def __add__(self, other: object) -> PreTokenCounts:
        if not isinstance(other, _core.PreTokenCounts):
            return NotImplemented
        total = type(self)()
        total.update(self)
        total.update(other)
        return total

    def __radd__(self, other: object) -> PreTokenCounts:
        # sum() starts from 0.
        if isinstance(other, int) and other == 0:
            return self + type(self)()
        return NotImplemented

    def __iadd__(self, other: object) -> PreTokenCounts:
        if not isinstance(other, _core.PreTokenCounts):
            return NotImplemented
        self.update(other)
        return self

    def __repr__(self) -> str:
        return (
            f"PreTokenCounts({len(self):,} distinct, {self.total():,} pre-tokens, {self.bytes:,} bytes, "
            f"{self.documents:,} documents, special_tokens={self.special_tokens!r}"
            + (f", {self.skipped:,} skipped" if self.skipped else "")
            + ")"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles move counts between processes (multiprocessing, Ray), so they take the transfer form,
        # written and read at the cost of adding the counts, not the file's, sorted and compressed.
        return (_from_transfer, (type(self), self._to_transfer()))

    def prune(self, min_count: int) -> None:
        """Drops the pre-tokens counted fewer than ``min_count`` times: for counts too large to train on
        in the memory at hand. ``bytes`` and ``documents`` stay those of the text; ``len()`` and
        ``total()`` count what is kept.
        Training on pruned counts is **approximate**: the pairs inside the dropped pre-tokens are not
        counted, so late merges can differ from exact training (the frequent ones, made first, rarely
        do). Exact is the default everywhere; this is opt-in (``bytepair.ray``'s ``min_count``).

        >>> counts = count_pretokens(iter(["the cat the hat the end"]))
        >>> counts.prune(2)
        >>> counts.most_common(), counts.total(), counts.bytes
        ([(b' the', 2)], 2, 23)
        """
        if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
            raise ValueError(f"min_count must be a positive int, not {min_count!r}")
        self._retain_at_least(min_count)

    def save(self, path: PathLike) -> None:
        """Writes the counts to ``path``, replacing it whole or not at all (through a temporary file and a
        rename), in a few bytes a distinct pre-token.

        The file: the magic ``BPCOUNTS``, a version, then one zstd frame with its checksum holding the
        totals, the special tokens, and the pre-tokens in byte order with their counts. The same counts
        always make the same bytes, whatever order they were counted or merged in.

        >>> import os, tempfile
        >>> counts = count_pretokens(iter(["low lower lowest"]))
        >>> path = os.path.join(tempfile.mkdtemp(), "counts.bpc")
        >>> counts.save(path)
        >>> PreTokenCounts.load(path) == counts
        True
        """
        write_atomically(path, self._to_bytes())

    @classmethod
    def load(cls, path: PathLike) -> PreTokenCounts:
        """The counts saved in the file ``path`` (:meth:`save`).

        Raises ValueError, naming the file, for one that is not a counts file, was written by a newer
        bytepair, or is truncated or corrupt; OSError when it cannot be read.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
        >>> _ = open(path, "w").write("not counts")
        >>> PreTokenCounts.load(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: .../notes.txt: not a bytepair counts file
        """
        name = path_str(path)
        with open(name, "rb") as f:
            data = f.read()
        counts = cls()
        counts._load_bytes(data, name)
        return counts


def _from_transfer(cls: type[PreTokenCounts], data: bytes) -> PreTokenCounts:
    """Counts unpickled: ``cls`` with the counts of the transfer form ``data``."""
    counts = cls()
    counts._add_transfer(data, "pickled counts")
    return counts


def count_pretokens(
    sources: Source,
    special_tokens: Iterable[str] | None = None,
    *,
    text_field: str = "text",
    errors: str = "strict",
    num_threads: int | None = None,
    progress: bool | ProgressCallback = False,
    _chunk_size: int | None = None,
) -> PreTokenCounts:
    """Counts the pre-tokens of ``sources``: files, directories, patterns or iterables of ``str``, in any
    mix (see :mod:`bytepair.sources`).

    Every record and every file is its own document: no pre-token (and so no pair) spans two. The
    counts are exactly those of one text with the documents joined by a special token (without that
    token), and do not depend on ``num_threads`` or on the order of the sources. Special tokens split
    the text inside a document too.

    Args:
        sources: what to count (:mod:`bytepair.sources`): a path, a directory, a glob pattern, a list of
            these, or an iterable of str, each item a document.
        special_tokens: tokens such as ``"<|endoftext|>"`` that split documents and are not pre-tokens;
            the counts remember them, and train with them (:func:`bytepair.train_from_counts`).
        text_field: the field of JSON lines records, and the column of Parquet files, that holds the text.
        errors: ``"strict"`` (the default) fails on the first bad record in source order; ``"skip"``
            skips bad records (bad JSON, no text field, a text that is null, not a string or not UTF-8),
            and counts them in ``counts.skipped`` with the first messages in ``counts.skipped_errors``.
            A corrupt or truncated compressed stream skips the rest of its file, and damaged Parquet data
            (invalid UTF-8 included) the rest of its row group, or the whole file when it is not
            Parquet, each counting once. Invalid UTF-8 in a ``.txt`` file is an error either way: a
            text file has no records to skip, and cutting out the bad bytes would join the text around
            them into pre-tokens that are not in the file.
        num_threads: threads for reading and counting: a positive int, or None for every core.
        progress: True for a progress bar on stderr (when it is a terminal), or a callable
            ``progress("count", done, total)`` in bytes of the files (as stored, compressed or not).

    Raises:
        FileNotFoundError, PermissionError, IsADirectoryError: a file that cannot be read (all are
            looked up before counting starts), or a pattern that matches nothing.
        ValueError: a bad record in strict mode (the message names the file and line, or row, or the
            item of an iterable), a corrupt or truncated compressed stream or Parquet file (naming it,
            and the rows that cannot be read), a file in a directory or pattern whose name gives no
            kind, a Parquet file without the column or whose column is not strings (in either mode),
            a Parquet row group whose text pages use a delta encoding (refused as damaged: the decoder
            can abort on a damaged one), an empty directory or list, a bad argument.
        TypeError: an item of an iterable that is not a str (naming its index), or no source at all.
        KeyboardInterrupt: Ctrl-C, which stops counting promptly.

    >>> import gzip, json, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with gzip.open(os.path.join(d, "part-0.jsonl.gz"), "wt") as f:
    ...     _ = f.write(json.dumps({"text": "the cat"}) + "\\n" + json.dumps({"text": "the hat"}) + "\\n")
    >>> _ = open(os.path.join(d, "part-1.txt"), "w").write("the cat<|endoftext|>the end")
    >>> counts = count_pretokens(d, ["<|endoftext|>"])
    >>> counts.most_common(3), counts.documents
    ([(b'the', 4), (b' cat', 2), (b' end', 1)], 3)
    >>> _ = open(os.path.join(d, "part-2.jsonl"), "w").write('{"text": "ok"}\\n{"text": 7}\\n')
    >>> count_pretokens(d, ["<|endoftext|>"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: .../part-2.jsonl:2: field "text" is a number, not a string
    >>> counts = count_pretokens(d, ["<|endoftext|>"], errors="skip")
    >>> counts.skipped, counts.documents
    (1, 4)
    """
    specials = check_special_tokens(special_tokens)
    text_field = check_text_field(text_field)
    skip = check_errors(errors)
    num_threads = check_num_threads(num_threads)
    if _chunk_size is not None and _chunk_size < 1:
        raise ValueError("_chunk_size must be positive")
    resolved = resolve(sources)
    counts = PreTokenCounts()
    with ProgressBar() if progress is True else contextlib.nullcontext() as bar:
        callback = bar if progress is True else progress if callable(progress) else None
        if resolved.files:
            counts._count_files(
                [(f.path, f.format, f.compression) for f in resolved.files],
                specials,
                text_field,
                skip,
                num_threads,
                _chunk_size,
                callback,
            )
        for texts in resolved.texts:
            _count_iterable(counts, texts, specials, skip, num_threads)
    if counts.special_tokens is None:
        # Nothing was counted (an empty iterable): the counts are still counts of text split at these.
        counts._count_texts([], 0, specials, skip)
    return counts


@dataclass(frozen=True)
class CountPart:
    """A part of the counting work that a process can do on its own (:func:`count_part`), made by
    :func:`plan_parts`: a whole file (``start=0, end=None``); the bytes ``[start, end)`` of an uncompressed
    text file, each end moved to the first safe cut at or after it (a place where cutting cannot change
    the pre-tokens, and where no special token straddles), so that the parts of a file add up to it;
    or the row groups ``[start, end)`` of a Parquet file. ``size`` is its share of the file's bytes."""

    file: SourceFile
    start: int = 0
    end: int | None = None
    size: int = 0


def plan_parts(files: list[SourceFile], part_bytes: int) -> list[CountPart]:
    """``files`` (:func:`bytepair.sources.resolve`) cut into parts of about ``part_bytes`` each, in order:
    an uncompressed text file into byte ranges, a Parquet file into runs of whole row groups (read from
    its footer; one part when it has none or cannot be read, which counting then reports), any other file
    whole. The parts' counts (:func:`count_part`) add up to the files' (:func:`count_pretokens`).

    >>> import os, tempfile
    >>> from bytepair.sources import resolve
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> _ = open(path, "w").write("the cat sat on the mat " * 100)
    >>> parts = plan_parts(resolve(path).files, 1000)
    >>> [(p.start, p.end) for p in parts]
    [(0, 766), (766, 1533), (1533, 2300)]
    >>> sum((count_part(p) for p in parts), PreTokenCounts()) == count_pretokens(path)
    True
    """
    if part_bytes < 1:
        raise ValueError(f"part_bytes must be positive, not {part_bytes}")
    parts = []
    for f in files:
        if f.format == "txt" and f.compression is None and f.size > part_bytes:
            n = -(-f.size // part_bytes)
            cuts = [f.size * i // n for i in range(n + 1)]
            parts += [CountPart(f, a, b, b - a) for a, b in zip(cuts, cuts[1:])]
        elif f.format == "parquet" and f.size > part_bytes:
            parts += _parquet_parts(f, part_bytes)
        else:
            parts.append(CountPart(f, size=f.size))
    return parts


def _parquet_parts(f: SourceFile, part_bytes: int) -> list[CountPart]:
    """The Parquet file ``f`` as runs of row groups of about ``part_bytes`` of the file each."""
    try:
        group_rows = _core.parquet_row_groups(f.path)
    except (OSError, ValueError):  # counting the whole file reports it, as it should
        return [CountPart(f, size=f.size)]
    rows = max(sum(group_rows), 1)
    parts: list[CountPart] = []
    start = size = 0
    for i, n in enumerate(group_rows):
        size += f.size * n // rows
        if size >= part_bytes or i + 1 == len(group_rows):
            parts.append(CountPart(f, start, i + 1, size))
            start, size = i + 1, 0
    return parts or [CountPart(f, size=f.size)]


def count_part(
    part: CountPart,
    special_tokens: Iterable[str] | None = None,
    *,
    text_field: str = "text",
    errors: str = "strict",
    num_threads: int | None = None,
) -> PreTokenCounts:
    """Counts one part (:func:`plan_parts`) as :func:`count_pretokens` counts the whole: the counts of all
    the parts of some files add up to the counts of the files, exactly. Errors are those of
    :func:`count_pretokens`, naming the file and the line, row or byte offset.

    >>> import os, tempfile
    >>> from bytepair.sources import resolve
    >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
    >>> _ = open(path, "w").write('{"text": "the cat"}\\n{"text": "the hat"}\\n')
    >>> (part,) = plan_parts(resolve(path).files, 1 << 20)
    >>> count_part(part).most_common(1), count_part(part).documents
    ([(b'the', 2)], 2)
    """
    return count_parts([part], special_tokens, text_field=text_field, errors=errors, num_threads=num_threads)


def count_parts(
    parts: list[CountPart],
    special_tokens: Iterable[str] | None = None,
    *,
    text_field: str = "text",
    errors: str = "strict",
    num_threads: int | None = None,
) -> PreTokenCounts:
    """The counts of ``parts`` (:func:`plan_parts`) added up: equal to the sum of their
    :func:`count_part`, and cheaper, since the whole files among them are counted together in one pass
    of the engine, each thread's counts kept from one file to the next rather than made and added up
    once a file. Errors as :func:`count_part`.

    >>> import os, tempfile
    >>> from bytepair.sources import resolve
    >>> d = tempfile.mkdtemp()
    >>> for name in ["a.txt", "b.txt"]:
    ...     _ = open(os.path.join(d, name), "w").write("the cat sat on the mat " * 100)
    >>> parts = plan_parts(resolve(d).files, 1000)
    >>> len(parts), count_parts(parts) == sum((count_part(p) for p in parts), PreTokenCounts())
    (6, True)
    """
    specials = check_special_tokens(special_tokens)
    text_field = check_text_field(text_field)
    skip = check_errors(errors)
    num_threads = check_num_threads(num_threads)
    counts = PreTokenCounts()
    whole = [(p.file.path, p.file.format, p.file.compression) for p in parts if p.end is None]
    if whole:
        counts._count_files(whole, specials, text_field, skip, num_threads)
    for part in parts:
        if part.end is None:
            continue
        f = part.file
        if f.format == "parquet":
            counts._count_row_groups(f.path, part.start, part.end, specials, text_field, skip, num_threads)
        else:
            counts._count_range(f.path, part.start, part.end, specials)
    if counts.special_tokens is None:
        counts._count_texts([], 0, specials, skip)
    return counts


def _count_iterable(
    counts: PreTokenCounts, texts: Iterable[str], specials: list[str], skip: bool, num_threads: int | None
) -> None:
    """Counts the documents of ``texts`` into ``counts``, a batch at a time."""
    batch: list[str] = []
    size = first = 0
    for i, text in enumerate(texts):
        batch.append(text)
        size += len(text) if isinstance(text, str) else 0
        if size >= _BATCH_CHARACTERS:
            counts._count_texts(batch, first, specials, skip, num_threads)
            batch, size, first = [], 0, i + 1
    if batch:
        counts._count_texts(batch, first, specials, skip, num_threads)
    counts._add_kept()
