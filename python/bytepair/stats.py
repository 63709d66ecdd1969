"""What a vocabulary holds and how well it compresses text: the numbers behind ``bytepair train``'s
summary, ``bytepair inspect`` and the HTML report (:mod:`bytepair.report` only draws them).

They answer the CS336 "tokenizer experiments" questions: bytes per token on a corpus, the share of the
vocabulary a corpus uses, token lengths, the longest tokens, and what two vocabularies do not share.
Special tokens are left out of every count of the vocabulary: they are not learned from text.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ._common import ordinary_tokens
from .tokenizer import Tokenizer

__all__ = [
    "CorpusResult",
    "VocabStats",
    "bytes_per_token",
    "describe_token",
    "length_histogram",
    "longest_tokens",
    "measure",
    "VocabOverlap",
    "percent_more",
    "vocab_overlap",
    "vocab_stats",
]

_BLOCK = 1 << 22  # ids counted at a time


def describe_token(token: bytes, quote: bool = True) -> str:
    """A token as readable text: the Python literal of its text, or of its bytes when not UTF-8.

    >>> describe_token(b" the"), describe_token(b"\\xe2\\x82"), describe_token(b"a\\n", quote=False)
    ("' the'", "b'\\\\xe2\\\\x82'", 'a\\\\n')
    """
    try:
        shown = repr(token.decode("utf-8"))
    except UnicodeDecodeError:
        shown = repr(token)
        return shown if quote else shown[2:-1]
    return shown if quote else shown[1:-1]


def bytes_per_token(size: int, tokens: int) -> float:
    """``size`` bytes of text over the ``tokens`` it encodes to: higher means shorter sequences (no text
    counts as one token, so that nothing divides by zero).

    >>> bytes_per_token(1000, 400), bytes_per_token(0, 0)
    (2.5, 0.0)
    """
    return size / max(tokens, 1)


def percent_more(tokens: int, base: int) -> float:
    """How many more ``tokens`` are than ``base``, in percent (negative: fewer).

    >>> percent_more(150, 100), percent_more(75, 100)
    (50.0, -25.0)
    """
    return 100 * (tokens / max(base, 1) - 1)


def longest_tokens(vocab: Mapping[int, bytes], special_tokens: Sequence[str], n: int) -> list[bytes]:
    """The ``n`` longest tokens other than special tokens, longest first, then by id.

    >>> longest_tokens({0: b"a", 1: b"abc", 2: b"ab", 3: b"<s>"}, ["<s>"], 2)
    [b'abc', b'ab']
    """
    tokens = sorted(ordinary_tokens(vocab, special_tokens).items(), key=lambda item: (-len(item[1]), item[0]))
    return [t for _, t in tokens[:n]]


def length_histogram(
    vocab: Mapping[int, bytes], special_tokens: Sequence[str], cap: int | None = None
) -> dict[int, int]:
    """How many tokens (special tokens aside) have each length in bytes, from 1 to the longest, or to
    ``cap``, which then counts every token at least that long.

    >>> length_histogram({0: b"a", 1: b"b", 2: b"abc", 3: b"abcd"}, [])
    {1: 2, 2: 0, 3: 1, 4: 1}
    >>> length_histogram({0: b"a", 1: b"b", 2: b"abc", 3: b"abcd"}, [], cap=3)
    {1: 2, 2: 0, 3: 2}
    """
    lengths = [len(t) for t in ordinary_tokens(vocab, special_tokens).values()]
    longest = max(lengths, default=0) if cap is None else cap
    counts = dict.fromkeys(range(1, longest + 1), 0)
    for length in lengths:
        counts[min(length, longest)] += 1
    return counts


@dataclass(frozen=True)
class VocabStats:
    """The tokens of a vocabulary other than special tokens: how many, how long, how many start with a
    space (the mark of a word after a space in GPT-2's pre-tokens)."""

    tokens: int
    single_bytes: int
    mean_length: float
    median_length: int
    longest: int
    space_prefixed: int


def vocab_stats(vocab: Mapping[int, bytes], special_tokens: Sequence[str]) -> VocabStats:
    """The :class:`VocabStats` of ``vocab``, special tokens aside; the median is the upper one of an even
    count.

    >>> vocab_stats({0: b"a", 1: b"b", 2: b" ab", 3: b" abcd", 4: b"<s>"}, ["<s>"])
    VocabStats(tokens=4, single_bytes=2, mean_length=2.5, median_length=3, longest=5, space_prefixed=2)
    """
    ordinary = list(ordinary_tokens(vocab, special_tokens).values())
    lengths = sorted(len(t) for t in ordinary)
    return VocabStats(
        tokens=len(ordinary),
        single_bytes=sum(length == 1 for length in lengths),
        mean_length=sum(lengths) / len(lengths),
        median_length=lengths[len(lengths) // 2],
        longest=lengths[-1],
        space_prefixed=sum(t.startswith(b" ") for t in ordinary),
    )


@dataclass(frozen=True)
class VocabOverlap:
    """What two vocabularies share, and the longest tokens each has that the other does not (special
    tokens aside), longest first, then in byte order."""

    shared: int
    only_first: list[bytes]
    only_second: list[bytes]


def vocab_overlap(first: Tokenizer, second: Tokenizer, n: int) -> VocabOverlap:
    """The :class:`VocabOverlap` of two tokenizers, with ``n`` tokens at most in each list.

    >>> base = {i: bytes([i]) for i in range(256)}
    >>> a = Tokenizer(base | {256: b"ab", 257: b"abc"}, [(b"a", b"b"), (b"ab", b"c")])
    >>> b = Tokenizer(base | {256: b"ab"}, [(b"a", b"b")])
    >>> vocab_overlap(a, b, 5)
    VocabOverlap(shared=257, only_first=[b'abc'], only_second=[])
    """
    ours, theirs = (set(ordinary_tokens(t.vocab, t.special_tokens).values()) for t in (first, second))

    def longest(tokens: set[bytes]) -> list[bytes]:
        return sorted(tokens, key=lambda t: (-len(t), t))[:n]

    return VocabOverlap(len(ours & theirs), longest(ours - theirs), longest(theirs - ours))


@dataclass(frozen=True)
class CorpusResult:
    """One tokenizer on one corpus: its size, the tokens it takes, and the distinct ids used.

    >>> r = CorpusResult("tok", "a.txt", bytes=1000, tokens=400, ids_used=50, vocab_size=500)
    >>> r.bytes_per_token, r.vocab_share
    (2.5, 0.1)
    """

    tokenizer: str
    corpus: str
    bytes: int
    tokens: int
    ids_used: int
    vocab_size: int

    @property
    def bytes_per_token(self) -> float:
        """Bytes of the corpus over the tokens it encodes to (:func:`bytes_per_token`).

        >>> CorpusResult("tok", "a.txt", 10, 4, 3, 300).bytes_per_token
        2.5
        """
        return bytes_per_token(self.bytes, self.tokens)

    @property
    def vocab_share(self) -> float:
        """The distinct ids the corpus uses over the size of the vocabulary.

        >>> CorpusResult("tok", "a.txt", 10, 4, 3, 300).vocab_share
        0.01
        """
        return self.ids_used / self.vocab_size


def measure(
    name: str,
    tok: Tokenizer,
    corpus: str,
    num_threads: int | None = None,
    progress: bool | Callable[[str, int, int], None] = False,
    label: str | None = None,
) -> CorpusResult:
    """Encodes the file ``corpus`` (through a temporary ``.npy``) and counts its tokens and distinct ids;
    the result names the corpus ``label``, by default the file's name.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "c.txt")
    >>> _ = open(path, "w").write("abab")
    >>> r = measure("bytes", Tokenizer({i: bytes([i]) for i in range(256)}, []), path)
    >>> r.bytes_per_token, r.ids_used
    (1.0, 2)
    """
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="bytepair-") as tmp:
        out = os.path.join(tmp, "ids.npy")
        tokens = tok.encode_file(corpus, out, num_threads=num_threads, progress=progress)
        ids = np.load(out, mmap_mode="r")
        seen = np.zeros(tok.vocab_size, dtype=bool)
        # In blocks: bincount copies its input to int64, which for a whole corpus is 4x the .npy.
        for start in range(0, len(ids), _BLOCK):
            seen |= np.bincount(ids[start : start + _BLOCK], minlength=tok.vocab_size) > 0
        used = int(np.count_nonzero(seen))
    label = os.path.basename(corpus) if label is None else label
    return CorpusResult(name, label, os.path.getsize(corpus), tokens, used, len(tok.vocab))
