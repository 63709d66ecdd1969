"""Training a byte-level BPE vocabulary: the public entry point over the Rust engine."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from . import _core
from ._common import (
    check_errors,
    check_num_threads,
    check_special_tokens,
    check_text_field,
    check_vocab_size,
)
from ._progress import ProgressBar
from .counting import PreTokenCounts, count_pretokens
from .sources import Source, resolve

ProgressCallback = Callable[[str, int, int], None]

__all__ = ["train_bpe", "train_from_counts"]


def train_bpe(
    input_path: Source,
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    text_field: str = "text",
    errors: str = "strict",
    num_threads: int | None = None,
    progress: bool | ProgressCallback = False,
    stats: dict[str, Any] | None = None,
    _chunk_size: int | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Trains a byte-level BPE tokenizer on a corpus: a UTF-8 text file, or any sources
    (:mod:`bytepair.sources`): files, directories and patterns of text, JSON lines and Parquet files,
    compressed or not, and iterables of str.

    The text is split at the special tokens (longest first where they overlap), each part is split into
    GPT-2 pre-tokens, and merges are chosen one at a time: the most frequent adjacent pair of tokens
    within a pre-token, ties going to the lexicographically greatest pair of byte strings. This is exactly
    what the CS336 reference does (:mod:`bytepair.reference` is the same algorithm in plain Python).
    Training on sources is :func:`bytepair.count_pretokens` then :func:`train_from_counts`.

    Args:
        input_path: a UTF-8 text file (a path: str, bytes or ``os.PathLike``), or a list of them, each
            its own document: no pre-token or pair spans two files, exactly as if they were joined by a
            special token. Read in bounded pieces on ``num_threads`` threads; a pipe works too. Text
            with no place to cut safely (whitespace after a non-space) in 16 MiB is cut there anyway,
            at a character boundary: the pre-token across that cut counts as two. No real one is so long.
            Or any sources (:mod:`bytepair.sources`): a directory, a glob pattern, JSON lines and Parquet
            files, compressed files, iterables of str, and lists of these; every record is a document.
        text_field: the field of JSON lines records, and the column of Parquet files, that holds the text.
        errors: ``"strict"`` fails on the first bad record; ``"skip"`` skips bad records and counts them
            (``stats["skipped"]``); see :func:`bytepair.count_pretokens`.
        vocab_size: the size of the result, counting the 256 bytes and the special tokens. Training
            stops early, without error, when no pair is left to merge.
        special_tokens: tokens such as ``"<|endoftext|>"``: they split documents, are never merged,
            and are added to the vocabulary once each (duplicates are dropped). A token of one byte
            (``"\\n"``) is that byte's token already: it keeps the byte's id, is not added again and so
            counts once in ``vocab_size`` (one more merge fits), and the text is still split at it.
            A special token is at most 1024 bytes (UTF-8).
        num_threads: threads for reading and counting: a positive int, or None for every core. More than
            four per core are not started (they cannot make it faster); fewer run when not all can
            start.
        progress: True for a progress bar on stderr (when it is a terminal), or a callable
            ``progress(phase, done, total)`` with phase ``"count"`` (bytes) or ``"merge"`` (merges).
        stats: a dict to fill with facts about the training text: ``"distinct_pretokens"``, the number of
            distinct pre-tokens it had; ``"bytes"``, its size in bytes; ``"tokens"``, the number of
            tokens it encodes to with the result (``len(Tokenizer(vocab, merges, special_tokens).encode(
            text))``, exactly, computed from the counts without encoding the text again; None in the odd
            case where two merges made the same bytes, which no tokenizer can take); with
            ``errors="skip"``, ``"skipped"``, the records skipped.

    Returns:
        ``(vocab, merges)``: ``vocab`` maps ids 0..len-1 to bytes: the 256 single bytes in byte order,
        then one token per merge in the order made, then the special tokens. ``merges`` lists the pairs
        merged, in order.

    Raises:
        FileNotFoundError, IsADirectoryError, PermissionError: an input cannot be read (checked for
            every file before training starts).
        ValueError: the input is not UTF-8 (the message gives the file and byte offset), ``vocab_size``
            is below 256 + the number of special tokens (of more than one byte), a special token is
            empty or longer than 1024 bytes, or ``input_path`` is an empty list; a bad record or a corrupt
            file (see :func:`bytepair.count_pretokens`).
        TypeError: an argument of the wrong type (``stats`` not a dict), before any work.
        KeyboardInterrupt: Ctrl-C, which stops training promptly.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("low lower lowest<|endoftext|>low")
    >>> vocab, merges = train_bpe(f.name, 259, ["<|endoftext|>"])
    >>> merges
    [(b'o', b'w'), (b'l', b'ow')]
    >>> vocab[256], vocab[257], vocab[258]
    (b'ow', b'low', b'<|endoftext|>')
    >>> stats = {}
    >>> _ = train_bpe([f.name, f.name], 259, ["<|endoftext|>"], stats=stats)  # two documents
    >>> stats
    {'distinct_pretokens': 3, 'bytes': 64, 'tokens': 24}
    """
    specials = check_special_tokens(special_tokens)
    vocab_size = check_vocab_size(vocab_size, specials)
    check_text_field(text_field)
    check_errors(errors)
    num_threads = check_num_threads(num_threads)
    if _chunk_size is not None and _chunk_size < 1:
        raise ValueError("_chunk_size must be positive")
    if stats is not None and not isinstance(stats, MutableMapping):
        raise TypeError(f"stats must be a dict or None, not {type(stats).__name__}")
    resolved = resolve(input_path, "input_path")
    # Text files alone are trained on as they always were, in one call that counts and trains.
    plain = not resolved.texts and all(f.format == "txt" and f.compression is None for f in resolved.files)
    with ProgressBar() if progress is True else contextlib.nullcontext() as bar:
        callback = bar if progress is True else progress if callable(progress) else None
        # Counting the tokens costs one more pass over the counts, and memory on long pre-tokens: only when
        # asked.
        count_tokens = stats is not None
        if plain:
            paths = [f.path for f in resolved.files]
            vocab, merges, (pretokens, size, tokens) = _core.train_bpe(
                paths, vocab_size, specials, num_threads, _chunk_size, callback, count_tokens
            )
            skipped = 0
        else:
            counts = count_pretokens(
                input_path,
                specials,
                text_field=text_field,
                errors=errors,
                num_threads=num_threads,
                progress=callback or False,
                _chunk_size=_chunk_size,
            )
            skipped = counts.skipped
            # These counts are this call's own: training takes them and frees them as it goes.
            trained = counts._train(vocab_size, specials, callback, count_tokens, consume=True)
            vocab, merges, (pretokens, size, tokens) = trained
    if stats is not None:
        stats.update(distinct_pretokens=pretokens, bytes=size, tokens=tokens)
        if errors == "skip":
            stats["skipped"] = skipped
    return dict(enumerate(vocab)), merges


def train_from_counts(
    counts: PreTokenCounts,
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    progress: bool | ProgressCallback = False,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Trains on pre-token counts (:func:`bytepair.count_pretokens`), exactly as :func:`train_bpe` trains
    on the text they count: the counts of shards added up give the vocabulary and merges of the whole.

    Args:
        counts: a :class:`bytepair.PreTokenCounts`.
        vocab_size: as for :func:`train_bpe`: the 256 bytes, the merges and the special tokens.
        special_tokens: the special tokens to add to the vocabulary, in this order: those the counts were
            made with (in any order), or None for those, in the order they were counted with.
        progress: True for a progress bar on stderr (when it is a terminal), or a callable
            ``progress("merge", done, total)``.

    Returns:
        ``(vocab, merges)``, as :func:`train_bpe` returns them.

    Raises:
        ValueError: ``special_tokens`` are not those the counts were made with, or ``vocab_size`` is too
            small for them.
        TypeError: ``counts`` is not a PreTokenCounts.

    >>> from bytepair import count_pretokens
    >>> part1 = count_pretokens(iter(["low lower"]), ["<|endoftext|>"])
    >>> part2 = count_pretokens(iter(["lowest<|endoftext|>low"]), ["<|endoftext|>"])
    >>> vocab, merges = train_from_counts(part1 + part2, 259)
    >>> merges, vocab[258]
    ([(b'o', b'w'), (b'l', b'ow')], b'<|endoftext|>')
    """
    if not isinstance(counts, PreTokenCounts):
        raise TypeError(f"counts must be a PreTokenCounts, not {type(counts).__name__}")
    counted_with = counts.special_tokens or []
    specials = counted_with if special_tokens is None else check_special_tokens(special_tokens)
    vocab_size = check_vocab_size(vocab_size, specials)
    with ProgressBar() if progress is True else contextlib.nullcontext() as bar:
        callback = bar if progress is True else progress if callable(progress) else None
        vocab, merges, _ = counts._train(vocab_size, specials, callback, False)
    return dict(enumerate(vocab)), merges
