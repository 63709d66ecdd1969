"""Files other tokenizer libraries read: HF ``tokenizer.json`` and tiktoken ``.tiktoken`` rank files.

Both sides encode exactly as bytepair does (tests hold them to it on real text):

- HF: a BPE model over GPT-2's byte-to-unicode characters, the ``ByteLevel`` pre-tokenizer (GPT-2's
  pattern, no prefix space) and decoder, and the special tokens as added tokens. ``ignore_merges`` is
  on because bytepair, like tiktoken, takes a pre-token that is itself a token whole.
- tiktoken: one ``base64(token) rank`` line per token, rank = id, special tokens left out (tiktoken
  takes them separately). Give ``tiktoken.Encoding`` ``pat_str=bytepair.GPT2_PATTERN``.

Importing a rank file rebuilds the merges tiktoken implies: each token, by rank, splits into the two
parts tiktoken's own merging of its bytes ends with when only lower ranks may merge (as
``tiktoken/_educational.py`` and HF's conversion scripts do).

These functions work on ``(vocab, merges, special_tokens)``; :class:`bytepair.Tokenizer` wraps them as
``from_hf``, ``from_tiktoken``, ``to_hf`` and ``to_tiktoken``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence

from ._common import (
    PathLike,
    decode_token,
    encode_token,
    ordinary_tokens,
    path_str,
    special_token_ids,
    write_atomically,
)

Vocab = Mapping[int, bytes]
Merges = Sequence[tuple[bytes, bytes]]

__all__ = ["load_hf", "load_tiktoken", "merges_from_ranks", "save_hf", "save_tiktoken"]


def save_hf(vocab: Vocab, merges: Merges, special_tokens: Sequence[str], path: PathLike) -> None:
    """Writes a HF ``tokenizer.json`` that ``tokenizers.Tokenizer.from_file`` loads.

    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b" t", 257: b"<|endoftext|>"}
    >>> save_hf(vocab, [(b" ", b"t")], ["<|endoftext|>"], path)
    >>> model = json.load(open(path, encoding="utf-8"))["model"]
    >>> model["merges"], model["vocab"]["Ġt"]
    ([['Ġ', 't']], 256)
    """
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": token_id,
                "content": token,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for token, token_id in special_token_ids(vocab, special_tokens).items()
        ],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": {encode_token(token): token_id for token_id, token in sorted(vocab.items())},
            "merges": [[encode_token(a), encode_token(b)] for a, b in merges],
        },
    }
    write_atomically(path, json.dumps(document, ensure_ascii=False, indent=1) + "\n")


def load_hf(path: PathLike) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]], list[str]]:
    """Reads a byte-level BPE ``tokenizer.json`` (GPT-2's pre-tokenizer) into ``(vocab, merges,
    special_tokens)``; every added token becomes a special token.

    Raises ValueError for a file that is not one: another model or pre-tokenizer, a prefix space, or
    tokens outside GPT-2's byte table.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> save_hf({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")], [], path)
    >>> vocab, merges, specials = load_hf(path)
    >>> vocab[256], merges, specials
    (b'hi', [(b'h', b'i')], [])
    """
    name = path_str(path)
    with open(name, encoding="utf-8") as f:
        try:
            document = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{name}: not a JSON tokenizer: {e}") from None
    model = document.get("model") if isinstance(document, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise ValueError(f"{name}: not a BPE tokenizer.json (model.type must be 'BPE')")
    pre = document.get("pre_tokenizer") or {}
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True) or pre.get("add_prefix_space"):
        raise ValueError(
            f"{name}: the pre-tokenizer must be ByteLevel with use_regex and no prefix space "
            "(GPT-2's, the only one bytepair applies)"
        )
    vocab = {token_id: decode_token(text, name) for text, token_id in model.get("vocab", {}).items()}
    merges = []
    for i, merge in enumerate(model.get("merges", [])):
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if len(parts) != 2:
            raise ValueError(f"{name}: merges[{i}] is not a pair: {merge!r}")
        merges.append((decode_token(parts[0], name), decode_token(parts[1], name)))
    specials = []
    for added in document.get("added_tokens", []):
        content = added["content"].encode("utf-8")
        # The model's vocabulary may hold the same text (GPT-2's does); the added token's id wins.
        vocab = {i: t for i, t in vocab.items() if t != content}
        vocab[added["id"]] = content
        specials.append(added["content"])
    return dict(sorted(vocab.items())), merges, specials


def _check_ranks_are_ids(vocab: Vocab, ordinary: Vocab, merges: Merges) -> None:
    """tiktoken ranks are ids; they encode as bytepair does when ids grow with merge order, and tokens
    no merge builds (bytepair ranks them after every merge) come last. ``ordinary`` is ``vocab`` without
    its special tokens, which tiktoken takes apart."""
    ids = {token: token_id for token_id, token in vocab.items()}
    built = list(dict.fromkeys(ids[a + b] for a, b in merges))
    built_set = set(built)
    unbuilt = [i for i, t in ordinary.items() if len(t) > 1 and i not in built_set]
    order = built + sorted(unbuilt)
    if order != sorted(order):
        raise ValueError("token ids are not in merge order, so they cannot be tiktoken ranks")


def save_tiktoken(vocab: Vocab, merges: Merges, special_tokens: Sequence[str], path: PathLike) -> None:
    """Writes a ``.tiktoken`` rank file that ``tiktoken.load.load_tiktoken_bpe`` loads: every token but
    the special ones, with its id as rank.

    Raises ValueError when ids do not grow with merge order (tiktoken merges by rank).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "bpe.tiktoken")
    >>> save_tiktoken({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")], [], path)
    >>> open(path).read().splitlines()[-1]
    'aGk= 256'
    """
    ordinary = ordinary_tokens(vocab, special_tokens)
    _check_ranks_are_ids(vocab, ordinary, merges)
    lines = [
        f"{base64.b64encode(token).decode('ascii')} {token_id}\n"
        for token_id, token in sorted(ordinary.items())
    ]
    write_atomically(path, "".join(lines))


def load_tiktoken(path: PathLike) -> dict[int, bytes]:
    """Reads a ``.tiktoken`` rank file into ``{rank: token}``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "bpe.tiktoken")
    >>> _ = open(path, "w").write("aA== 0\\naQ== 1\\naGk= 2\\n")
    >>> load_tiktoken(path)
    {0: b'h', 1: b'i', 2: b'hi'}
    """
    name = path_str(path)
    with open(name, "rb") as f:
        lines = f.read().splitlines()
    ranks: dict[int, bytes] = {}
    for lineno, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[int(rank)] = base64.b64decode(token, validate=True)
        except (ValueError, binascii.Error):
            raise ValueError(f"{name}:{lineno}: expected 'base64-token rank', got {line[:60]!r}") from None
    return dict(sorted(ranks.items()))


def _split_by_lower_ranks(token: bytes, ranks: Mapping[bytes, int], below: int) -> list[bytes]:
    """The parts tiktoken's merge loop ends with on ``token`` when only ranks below ``below`` merge."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 1:
        candidates = [(ranks.get(parts[i] + parts[i + 1], below), i) for i in range(len(parts) - 1)]
        rank, i = min(candidates)
        if rank >= below:
            break
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def merges_from_ranks(vocab: Vocab) -> list[tuple[bytes, bytes]]:
    """The merges that tiktoken's ranks imply, in rank order. A token whose bytes do not merge into two
    parts of lower rank (none in a trained vocabulary) gets no merge; bytepair ranks such tokens after
    every merge, in id order.

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"hi", 257: b"hi!"}
    >>> merges_from_ranks(vocab)
    [(b'h', b'i'), (b'hi', b'!')]
    """
    ranks = {token: rank for rank, token in vocab.items()}
    merges = []
    for rank, token in sorted(vocab.items()):
        if len(token) > 1:
            parts = _split_by_lower_ranks(token, ranks, rank)
            if len(parts) == 2:
                merges.append((parts[0], parts[1]))
    return merges
