"""Byte-level BPE training in plain Python: the executable specification.

This is the algorithm of Stanford CS336's assignment 1, written to be read. It is slow (it recounts every
pair after every merge), and the Rust engine behind :func:`bytepair.train_bpe` must give exactly the
same vocabulary and merges on every input; the tests check that on random and real text.

It needs the third-party ``regex`` module (``pip install regex``) for ``\\p{L}`` and ``\\p{N}``: the GPT-2
pattern is defined by what ``regex`` does with it.

>>> count_pretokens("the cat sat", [])[(b" ", b"c", b"a", b"t")]
1
>>> merge_word((b" ", b"c", b"a", b"t"), (b"a", b"t"))
(b' ', b'c', b'at')
"""

from __future__ import annotations

import re
from collections import Counter

# GPT-2's pre-tokenizer (bytepair.GPT2_PATTERN is this one): contractions, letters, digits, other symbols,
# each optionally after one space, then whitespace (a run before a word leaves its last space to the word).
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def pretokenize(text: str) -> list[str]:
    """Splits text into GPT-2 pre-tokens.

    >>> pretokenize("it's  1999!")
    ['it', "'s", ' ', ' 1999', '!']
    """
    try:
        import regex
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("bytepair.reference needs the `regex` module: pip install regex") from e
    return regex.findall(GPT2_PATTERN, text)


def split_on_special_tokens(text: str, special_tokens: list[str]) -> list[str]:
    """The parts of ``text`` between special tokens. Longer tokens are tried first, so that where
    ``"<|a|>"`` and ``"<|a|><|a|>"`` both match, the longer one is removed.

    >>> split_on_special_tokens("a<|e|>b<|e|><|e|>c", ["<|e|>", "<|e|><|e|>"])
    ['a', 'b', 'c']
    """
    if not special_tokens:
        return [text]
    alternatives = "|".join(re.escape(t) for t in sorted(special_tokens, key=len, reverse=True))
    return re.split(alternatives, text)


def count_pretokens(text: str, special_tokens: list[str]) -> Counter[tuple[bytes, ...]]:
    """How often each pre-token occurs, each written as a tuple of single bytes.

    >>> count_pretokens("a a<|e|>a", ["<|e|>"])
    Counter({(b'a',): 2, (b' ', b'a'): 1})
    """
    counts: Counter[tuple[bytes, ...]] = Counter()
    for part in split_on_special_tokens(text, special_tokens):
        for piece in pretokenize(part):
            counts[tuple(bytes([b]) for b in piece.encode("utf-8"))] += 1
    return counts


def merge_word(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """Replaces each occurrence of ``pair`` in ``word``, left to right.

    >>> merge_word((b"a", b"a", b"a"), (b"a", b"a"))
    (b'aa', b'a')
    """
    out: list[bytes] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe(
    input_path: str, vocab_size: int, special_tokens: list[str] | None = None
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Trains on a UTF-8 file; same contract and ids as :func:`bytepair.train_bpe`.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("hug pug pun bun<|endoftext|>hugs")
    >>> vocab, merges = train_bpe(f.name, 260, ["<|endoftext|>"])
    >>> merges  # "ug" 3 times; then "un", "hug" and " p" 2 times each, and the greatest pair wins
    [(b'u', b'g'), (b'u', b'n'), (b'h', b'ug')]
    >>> import bytepair  # the engine must agree
    >>> bytepair.train_bpe(f.name, 260, ["<|endoftext|>"]) == (vocab, merges)
    True
    """
    specials = list(dict.fromkeys(special_tokens or []))
    added = [t for t in specials if len(t.encode("utf-8")) > 1]  # a token of one byte has its id already
    # newline="": the text exactly as in the file (text mode would turn "\r\n" and "\r" into "\n").
    with open(input_path, encoding="utf-8", newline="") as f:
        words = count_pretokens(f.read(), specials)
    vocab = {i: bytes([i]) for i in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    while len(vocab) + len(added) < vocab_size:
        pair_counts: Counter[tuple[bytes, bytes]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pair_counts[pair] += count
        if not pair_counts:
            break
        # The most frequent pair; among equals, the greatest (left, right) tuple of bytes.
        best = max(pair_counts, key=lambda pair: (pair_counts[pair], pair))
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        merged: Counter[tuple[bytes, ...]] = Counter()
        for word, count in words.items():
            merged[merge_word(word, best)] += count
        words = merged
    for token in added:
        vocab[len(vocab)] = token.encode("utf-8")
    return vocab, merges
