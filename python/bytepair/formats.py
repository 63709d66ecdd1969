"""GPT-2's ``vocab.json`` and ``merges.txt`` only (HF and tiktoken files are in :mod:`bytepair.interop`).

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

import json
from collections.abc import Iterable, Mapping

from ._common import PathLike, bytes_to_unicode, decode_token, encode_token, path_str, write_atomically

__all__ = ["bytes_to_unicode", "load_bpe", "save_bpe"]


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
        text = encode_token(token)
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
        lines.append(f"{encode_token(merge[0])} {encode_token(merge[1])}\n")
    write_atomically(vocab_path, json.dumps(by_text, ensure_ascii=False, indent=0) + "\n")
    write_atomically(merges_path, "".join(lines))


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
    vocab_name, merges_name = path_str(vocab_path, "vocab_path"), path_str(merges_path, "merges_path")
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
        vocab[token_id] = decode_token(text, vocab_name)
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
        merges.append((decode_token(parts[0], where), decode_token(parts[1], where)))
    return dict(sorted(vocab.items())), merges
