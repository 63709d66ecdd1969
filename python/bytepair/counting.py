"""Counting pre-tokens: the first phase of training, made a value of its own that merges and saves.

:func:`count_pretokens` counts any sources (:mod:`bytepair.sources`) into :class:`PreTokenCounts`;
counts of shards add up (``a + b``) to exactly the counts of the whole, and
:func:`bytepair.train_from_counts` trains on them as :func:`bytepair.train_bpe` trains on the text. So a
corpus can be counted in parts, on many machines or at many times, and the parts saved
(:meth:`PreTokenCounts.save`) and merged later.

Text files and JSON lines files (compressed or not) are read by the engine, all at once on
``num_threads`` threads. Parquet files are read with pyarrow, a row group's batches of rows at a time,
the row groups on ``num_threads`` threads, each batch's strings handed to the engine in place (Arrow's
buffers, without copying) with the GIL released. An iterable of ``str`` is taken in batches of about a
megabyte of text, each counted on ``num_threads`` threads with the GIL released.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
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
from .sources import PARQUET_READING, Source, SourceFile, parquet_batch_rows, resolve

__all__ = ["CountPart", "PreTokenCounts", "count_part", "count_parts", "count_pretokens", "plan_parts"]

ProgressCallback = Callable[[str, int, int], None]

# An iterable's documents go to the engine in batches of this many characters (or more, for a longer
# document): large enough that starting threads and merging their counts cost little, small enough that
# a batch's copy is no memory to speak of.
_BATCH_CHARACTERS = 1 << 20
# Parquet rows are read in batches of about this many bytes of text (sources.parquet_batch_rows): each
# thread holds one, and the cost of a batch is small against counting it.
_PARQUET_BATCH_BYTES = 16 << 20


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
            A corrupt or truncated compressed stream skips the rest of its file, and a Parquet row group
            or file that cannot be read is skipped, each counting once. Invalid UTF-8 in a ``.txt`` file
            is an error either way: a text file has no records to skip, and cutting out the bad bytes
            would join the text around them into pre-tokens that are not in the file.
        num_threads: threads for reading and counting: a positive int, or None for every core.
        progress: True for a progress bar on stderr (when it is a terminal), or a callable
            ``progress("count", done, total)`` in bytes of the files (as stored, compressed or not).

    Raises:
        FileNotFoundError, PermissionError, IsADirectoryError: a file that cannot be read (all are
            looked up before counting starts), or a pattern that matches nothing.
        ValueError: a bad record in strict mode (the message names the file and line, or row, or the
            item of an iterable), a corrupt or truncated compressed stream or Parquet file (naming it),
            a file in a directory or pattern whose name gives no kind, a Parquet file without the column
            or whose column is not strings, an empty directory or list, a bad argument.
        TypeError: an item of an iterable that is not a str (naming its index), or no source at all.
        ImportError: a Parquet file without pyarrow installed (``pip install 'bytepair[parquet]'``).
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
    engine_files = [f for f in resolved.files if f.format != "parquet"]
    parquet_files = [f for f in resolved.files if f.format == "parquet"]
    engine_bytes = sum(f.size for f in engine_files)
    total = engine_bytes + sum(f.size for f in parquet_files)
    with ProgressBar() if progress is True else contextlib.nullcontext() as bar:
        callback = bar if progress is True else progress if callable(progress) else None
        if engine_files:
            report = None if callback is None else _Offset(callback, 0, total)
            counts._count_files(
                [(f.path, f.format, f.compression) for f in engine_files],
                specials,
                text_field,
                skip,
                num_threads,
                _chunk_size,
                report,
            )
        if parquet_files:
            report = None if callback is None else _Offset(callback, engine_bytes, total)
            _count_parquet(counts, parquet_files, specials, text_field, skip, num_threads, report)
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
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(f.path, **PARQUET_READING).metadata
    except Exception:  # no pyarrow, or a damaged file: counting the whole part says which, as it should
        return [CountPart(f, size=f.size)]
    rows = max(meta.num_rows, 1)
    parts: list[CountPart] = []
    start = size = 0
    for i in range(meta.num_row_groups):
        size += f.size * meta.row_group(i).num_rows // rows
        if size >= part_bytes or i + 1 == meta.num_row_groups:
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
    :func:`count_part`, and cheaper, since the whole files among them are counted together (the text and
    JSON lines files in one pass of the engine, the Parquet files in another), each thread's counts kept
    from one file to the next rather than made and added up once a file. Errors as :func:`count_part`.

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
    whole = [p.file for p in parts if p.end is None]
    engine_files = [(f.path, f.format, f.compression) for f in whole if f.format != "parquet"]
    if engine_files:
        counts._count_files(engine_files, specials, text_field, skip, num_threads)
    parquet_files = [f for f in whole if f.format == "parquet"]
    if parquet_files:
        _count_parquet(counts, parquet_files, specials, text_field, skip, num_threads, None)
    for part in parts:
        if part.end is None:
            continue
        f = part.file
        if f.format == "parquet":
            _count_parquet(counts, [f], specials, text_field, skip, num_threads, None, (part.start, part.end))
        else:
            counts._count_range(f.path, part.start, part.end, specials)
    if counts.special_tokens is None:
        counts._count_texts([], 0, specials, skip)
    return counts


class _Offset:
    """A progress callback for one part of a count: its bytes come after ``before`` of ``total``."""

    def __init__(self, callback: ProgressCallback, before: int, total: int) -> None:
        self.callback, self.before, self.total = callback, before, total

    def __call__(self, phase: str, done: int, total: int) -> None:
        # A pipe's size is 0 until read: the engine's total grows with what was read.
        self.total = max(self.total, self.before + total)
        self.callback(phase, self.before + done, self.total)


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


def _cores() -> int:
    """The cores this process may use, as the engine counts them."""
    return max(1, _core.max_threads() // 4)


class _RowGroup:
    """One row group of a Parquet file to count: where it is, its first row, and its share of the file's
    bytes (for progress)."""

    def __init__(self, path: str, index: int, first_row: int, size: int, batch_rows: int) -> None:
        self.path, self.index, self.first_row, self.size = path, index, first_row, size
        self.batch_rows = batch_rows


def _count_parquet(
    counts: PreTokenCounts,
    files: list[SourceFile],
    specials: list[str],
    text_field: str,
    skip: bool,
    num_threads: int | None,
    report: ProgressCallback | None,
    row_groups: tuple[int, int] | None = None,
) -> None:
    """Counts the column ``text_field`` of the Parquet ``files`` into ``counts``, row group by row group on
    ``num_threads`` threads; the row groups' counts are merged in order, so that messages come in source
    order and the first error raised is the first in source order. ``row_groups`` ``(start, end)`` counts
    only those of each file."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            "reading .parquet files needs pyarrow: pip install 'bytepair[parquet]' (or pyarrow)"
        ) from None
    tasks: list[_RowGroup] = []
    for f in files:
        try:
            parquet = pq.ParquetFile(f.path, **PARQUET_READING)
        except (pa.ArrowException, OSError) as e:
            counts._add_skipped(_damaged(e, f"{f.path}: not a Parquet file, or a corrupt one ({e})", skip))
            continue
        _check_column(parquet.schema_arrow, f.path, text_field)
        meta = parquet.metadata
        rows = max(meta.num_rows, 1)
        first = 0
        for i in range(meta.num_row_groups):
            group_rows = meta.row_group(i).num_rows
            if row_groups is None or row_groups[0] <= i < row_groups[1]:
                batch_rows = parquet_batch_rows(meta, text_field, _PARQUET_BATCH_BYTES, i)
                tasks.append(_RowGroup(f.path, i, first, f.size * group_rows // rows, batch_rows))
            first += group_rows
    # Each thread counts all its row groups into one set of counts: the first thread into ``counts``
    # itself, the others into counts of their own, added to ``counts`` at the end. Adding each row
    # group's counts to a total instead would go through most of a row group's distinct pre-tokens once
    # more, on one thread; and a set of counts a thread besides ``counts`` would hold one more map of
    # the corpus's pre-tokens. What is kept in source order is what is reported: the messages of skipped
    # rows and the first error, which come back with each row group. ``counts`` is not touched by this
    # thread until the others are done; the skipped rows are gathered in ``skipped`` meanwhile.
    local = threading.local()
    unclaimed, own_counts = [counts], []
    lock = threading.Lock()
    skipped = PreTokenCounts()

    def count(task: _RowGroup) -> list[str]:
        thread_counts = getattr(local, "counts", None)
        if thread_counts is None:
            with lock:
                thread_counts = unclaimed.pop() if unclaimed else PreTokenCounts()
                if thread_counts is not counts:
                    own_counts.append(thread_counts)
            local.counts = thread_counts
        messages: list[str] = []
        row = task.first_row
        try:
            files_open = getattr(local, "files", None)
            if files_open is None or task.path not in files_open:
                local.files = {task.path: pq.ParquetFile(task.path, **PARQUET_READING)}
            batches = local.files[task.path].iter_batches(
                batch_size=task.batch_rows, row_groups=[task.index], columns=[text_field], use_threads=False
            )
            for batch in batches:
                column = _strings(batch.column(0), pa)
                large = pa.types.is_large_string(column.type)
                validity, offsets, data = column.buffers()
                messages += thread_counts._count_arrow(
                    validity, offsets, data, column.offset, len(column), large, task.path, row, specials, skip
                )
                row += len(column)
        except (pa.ArrowException, OSError) as e:
            message = f"{task.path}: rows from {row} (row group {task.index}) cannot be read: {e}"
            messages.append(_damaged(e, message, skip))
        return messages

    threads = min(num_threads or _cores(), max(len(tasks), 1))
    total = sum(f.size for f in files)
    done = total - sum(t.size for t in tasks)  # files skipped whole
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        pending: list[concurrent.futures.Future[list[str]]] = []
        queue = iter(tasks)
        sizes = iter(tasks)
        try:
            # At most two row groups a thread are in flight, so that the messages waiting to be
            # reported in order stay few.
            for task in queue:
                pending.append(pool.submit(count, task))
                if len(pending) >= 2 * threads:
                    break
            while pending:
                for message in pending.pop(0).result():
                    skipped._add_skipped(message)
                done += next(sizes).size
                if report is not None:
                    report("count", done, total)
                task = next(queue, None)
                if task is not None:
                    pending.append(pool.submit(count, task))
        except BaseException:
            for future in pending:
                future.cancel()
            raise
    for thread_counts in [*own_counts, skipped]:
        counts.update(thread_counts)


def _damaged(e: Exception, message: str, skip: bool) -> str:
    """Parquet data pyarrow cannot read (``e``): ``message``, to be counted as skipped, or a ValueError
    with it. pyarrow reports damaged data as an OSError without an errno; one with an errno is the
    system's, raised as it is whatever ``skip`` says."""
    if isinstance(e, OSError) and e.errno is not None:
        raise e
    if not skip:
        raise ValueError(message) from None
    return message


def _check_column(schema: Any, path: str, text_field: str) -> None:
    """ValueError unless the Arrow ``schema`` of the file ``path`` has a string column ``text_field``."""
    import pyarrow as pa

    index = schema.get_field_index(text_field)
    if index < 0:
        names = ", ".join(repr(n) for n in schema.names)
        raise ValueError(f"{path}: no column {text_field!r} (its columns: {names})")
    kind = schema.field(index).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise ValueError(f"{path}: column {text_field!r} is {kind}, not a column of strings")


def _strings(column: Any, pa: Any) -> Any:
    """``column`` as an Arrow ``string`` or ``large_string`` array, whose buffers the engine reads."""
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return column
    return column.cast(pa.large_string())
