"""bytepair: byte-level BPE tokenizers, trained exactly as the reference does, with a Rust core.

>>> import bytepair, tempfile, os
>>> d = tempfile.mkdtemp()
>>> path = os.path.join(d, "corpus.txt")
>>> _ = open(path, "w").write("the cat sat on the mat<|endoftext|>the hat")
>>> vocab, merges = bytepair.train_bpe(path, 260, special_tokens=["<|endoftext|>"])
>>> merges[:2]  # "at" 4 times; then ("t", "h") and ("h", "e") tie at 3, and the greater pair wins
[(b'a', b't'), (b't', b'h')]

Public API:

- :func:`train_bpe`: train a vocabulary and merges from a text file, a list of them, or any other sources
  (:mod:`bytepair.sources`).
- :func:`count_pretokens`, :class:`PreTokenCounts`, :func:`train_from_counts`: count corpora as they ship
  (directories of text, JSON lines and Parquet files, compressed or not; iterables of str) into counts that
  add up, save, and train exactly as ``train_bpe`` does.
- :class:`Tokenizer`: encode and decode; whole files to NumPy arrays; datasets to token shards for training
  (:meth:`Tokenizer.encode_dataset`), which the module :mod:`shards` reads back (``bytepair.shards.open``).
- :func:`save_bpe`, :func:`load_bpe`: GPT-2 ``vocab.json`` and ``merges.txt``; :func:`bytes_to_unicode`,
  the table through which those files write token bytes as text.
- :func:`pretokenize`: the GPT-2 pre-tokenizer, a hand-written scanner that splits text exactly as
  ``regex.findall(GPT2_PATTERN, text)`` does; :data:`GPT2_PATTERN` is the pattern, as tiktoken and the
  ``regex`` module take it (defined in :mod:`bytepair.reference`).
- :mod:`bytepair.reference`: the same training in plain Python, the executable specification.
"""

from __future__ import annotations

from . import _core, shards
from .counting import PreTokenCounts, count_pretokens
from .formats import bytes_to_unicode, load_bpe, save_bpe
from .reference import GPT2_PATTERN
from .tokenizer import Tokenizer
from .training import train_bpe, train_from_counts

__all__ = [
    "GPT2_PATTERN",
    "PreTokenCounts",
    "Tokenizer",
    "bytes_to_unicode",
    "count_pretokens",
    "load_bpe",
    "pretokenize",
    "save_bpe",
    "shards",
    "train_bpe",
    "train_from_counts",
]
__version__ = "0.1.0"


def pretokenize(text: str) -> list[str]:
    """Splits ``text`` into GPT-2 pre-tokens, exactly as ``regex.findall(GPT2_PATTERN, text)`` does.

    >>> pretokenize("it's  1999!\\n")
    ['it', "'s", ' ', ' 1999', '!', '\\n']
    """
    return _core.pretokenize(text)
