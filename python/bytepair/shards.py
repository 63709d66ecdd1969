"""Token shards, as :meth:`bytepair.Tokenizer.encode_dataset` writes them, read back: :func:`open`.

A shard set is a directory of shards and a manifest. Each shard is two files named after it:

- ``"megatron"``: ``NAME.bin`` (the ids) and ``NAME.idx``, Megatron-LM's indexed dataset, which
  ``megatron.core.datasets.indexed_dataset.IndexedDataset("OUT/NAME")`` reads: the header ``MMIDIDX\\0\\0``,
  version 1 (uint64), the dtype's code (uint8: 8 for uint16, 4 for int32), the number of sequences and
  of document indices (uint64 each), then each document's length (int32), its offset in the ``.bin`` in
  bytes (int64), and the document indices ``0, 1, ..., n`` (int64): each document is one sequence.
- ``"bin"``: ``NAME.bin``, nanoGPT's raw little-endian ids for ``np.memmap``, and ``NAME.idx.npy``, where
  each document starts (in ids, int64), then the total: one more entry than documents.
- ``"npy"``: ``NAME.npy``, the ids as a NumPy array, and ``NAME.offsets.npy``, the same offsets.

Ids are ``uint16`` when the vocabulary fits (at most 65,536 ids), else ``uint32`` (``int32`` for Megatron,
which has no ``uint32``). The manifest, ``manifest.json`` (or ``manifest.I-of-N.json`` for part ``I`` of
a job array), records the tokenizer (a SHA-256 of its vocabulary, merges and special tokens), the options,
the inputs, and each complete shard with its inputs' sizes and modification times, its tokens and
documents, and each file's size and CRC-32 (as ``zlib.crc32`` computes it). A shard is complete when
the manifest lists it, and only then: files of a shard it does not list are from a run that stopped.

>>> import os, tempfile, bytepair
>>> d = tempfile.mkdtemp()
>>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
>>> _ = tok.encode_dataset(iter(["hi", "there"]), os.path.join(d, "out"), format="npy")
>>> shards = bytepair.shards.open(os.path.join(d, "out"))
>>> len(shards), shards.tokens, shards[0].tolist(), shards[1].tolist()
(2, 9, [104, 105, 256], [116, 104, 101, 114, 101, 256])
>>> shards.verify()
"""

from __future__ import annotations

import builtins
import json
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from ._common import PathLike, path_str

__all__ = ["MANIFEST_VERSION", "Shard", "ShardSet", "manifest_paths", "open", "read_manifest"]

#: The version of the manifest's layout, in its ``"bytepair_shards"`` field.
MANIFEST_VERSION = 1

_MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
_MEGATRON_DTYPES = {8: "uint16", 4: "int32"}
_MANIFEST_NAME = re.compile(r"manifest(\.(\d+)-of-(\d+))?\.json")


def manifest_paths(folder: PathLike) -> list[str]:
    """The manifests in ``folder``: ``manifest.json`` and the parts' ``manifest.I-of-N.json``, sorted.

    >>> import tempfile
    >>> manifest_paths(tempfile.mkdtemp())
    []
    """
    folder = path_str(folder, "folder")
    names = [n for n in os.listdir(folder) if _MANIFEST_NAME.fullmatch(n)]
    return [os.path.join(folder, n) for n in sorted(names)]


def read_manifest(path: PathLike) -> dict[str, Any]:
    """The manifest at ``path``; ValueError naming it when it is not JSON or not a bytepair shard
    manifest of a version this bytepair reads.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "manifest.json")
    >>> _ = builtins.open(path, "w").write('{"rows": 3}')
    >>> read_manifest(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: .../manifest.json: not the manifest of a bytepair shard set
    """
    name = path_str(path)
    try:
        with builtins.open(name, encoding="utf-8") as f:
            manifest = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{name}: not the manifest of a bytepair shard set ({e})") from None
    if not isinstance(manifest, dict) or "bytepair_shards" not in manifest:
        raise ValueError(f"{name}: not the manifest of a bytepair shard set")
    if manifest["bytepair_shards"] != MANIFEST_VERSION:
        raise ValueError(
            f"{name}: a shard set manifest of version {manifest['bytepair_shards']!r}; this bytepair reads "
            f"version {MANIFEST_VERSION}"
        )
    return manifest


class Shard(Sequence[Any]):
    """One shard's documents: ``shard[i]`` is the ids of its ``i``-th document (a NumPy view into the
    memory-mapped ids), ``shard.ids`` all its ids, ``shard.offsets`` where each document starts and, last,
    the total (int64)."""

    def __init__(self, folder: str, record: dict[str, Any], file_format: str, dtype: str) -> None:
        self.name: str = record["name"]
        self.record = record
        suffixes, read = FORMATS[file_format]
        data, index = (os.path.join(folder, self.name + suffix) for suffix in suffixes)
        self.paths = (data, index)
        self.ids, self.offsets = read(data, index, dtype)
        if len(self.offsets) != record["documents"] + 1 or int(self.offsets[-1]) != len(self.ids):
            raise ValueError(f"{index}: the index does not match the manifest or the ids")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        return self.ids[int(self.offsets[i]) : int(self.offsets[i + 1])]

    @property
    def tokens(self) -> int:
        """The ids in the shard.

        >>> import tempfile, bytepair
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> out = tempfile.mkdtemp() + "/out"
        >>> _ = tok.encode_dataset(iter(["hi", "there"]), out, format="bin")
        >>> open(out).shards[0].tokens
        9
        """
        return len(self.ids)

    def verify(self) -> None:
        """Checks each file's size and CRC-32 against the manifest; ValueError naming the first file
        that differs.

        >>> import tempfile, bytepair
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> out = tempfile.mkdtemp() + "/out"
        >>> _ = tok.encode_dataset(iter(["hi", "there"]), out, format="bin")
        >>> shard = open(out).shards[0]
        >>> shard.verify()
        >>> _ = builtins.open(shard.paths[0], "r+b").write(b"!")
        >>> shard.verify()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: .../00000-iterable.bin: its size or checksum (18 bytes, CRC-32 ...) is not the ...
        """
        for path, expected in zip(self.paths, self.record["files"]):
            size = os.path.getsize(path)
            crc = 0
            with builtins.open(path, "rb") as f:
                while block := f.read(1 << 22):
                    crc = zlib.crc32(block, crc)
            if size != expected["bytes"] or f"{crc:08x}" != expected["crc32"]:
                raise ValueError(
                    f"{path}: its size or checksum ({size} bytes, CRC-32 {crc:08x}) is not the manifest's "
                    f"({expected['bytes']} bytes, {expected['crc32']}): the file changed or is damaged"
                )


def _memmap(data: str, dtype: Any) -> Any:
    """The ids in the raw file ``data``, memory-mapped (``np.memmap`` cannot map an empty file)."""
    import numpy as np

    return np.memmap(data, dtype=dtype, mode="r") if os.path.getsize(data) else np.zeros(0, dtype)


def _read_bin(data: str, index: str, dtype: str) -> tuple[Any, Any]:
    """The ids and document offsets of a ``.bin``/``.idx.npy`` pair."""
    import numpy as np

    return _memmap(data, np.dtype(dtype).newbyteorder("<")), np.load(index)


def _read_npy(data: str, index: str, dtype: str) -> tuple[Any, Any]:
    """The ids and document offsets of a ``.npy``/``.offsets.npy`` pair (the arrays say their dtype)."""
    import numpy as np

    return np.load(data, mmap_mode="r"), np.load(index)


def _read_megatron(data: str, index: str, dtype: str) -> tuple[Any, Any]:
    """The ids and document offsets of a Megatron ``.bin``/``.idx`` pair, read as the published layout
    says (see the module's docstring; the index says the dtype)."""
    import numpy as np

    with builtins.open(index, "rb") as f:
        header = f.read(34)
    if len(header) < 34 or header[:9] != _MEGATRON_MAGIC:
        raise ValueError(f"{index}: not a Megatron index (no MMIDIDX header)")
    version = int.from_bytes(header[9:17], "little")
    code = header[17]
    sequences = int.from_bytes(header[18:26], "little")
    if version != 1 or code not in _MEGATRON_DTYPES:
        raise ValueError(
            f"{index}: a Megatron index of version {version} and dtype code {code}, not read here"
        )
    ids = _memmap(data, np.dtype(_MEGATRON_DTYPES[code]).newbyteorder("<"))
    lengths = np.fromfile(index, dtype="<i4", count=sequences, offset=34)
    pointers = np.fromfile(index, dtype="<i8", count=sequences, offset=34 + 4 * sequences)
    offsets = np.empty(sequences + 1, dtype=np.int64)
    offsets[:-1] = pointers // ids.dtype.itemsize
    offsets[-1] = len(ids)
    if sequences and not np.array_equal(np.diff(offsets), lengths):
        raise ValueError(f"{index}: its lengths and pointers do not agree")
    return ids, offsets


#: Each format by name: its two files' suffixes (the ids, the index) and how they are read into the
#: ids and where each document starts, then the total.
FORMATS = {
    "megatron": ((".bin", ".idx"), _read_megatron),
    "bin": ((".bin", ".idx.npy"), _read_bin),
    "npy": ((".npy", ".offsets.npy"), _read_npy),
}


class ShardSet(Sequence[Any]):
    """The documents of a shard set, in order: ``len()``, ``shards[i]`` (a document's ids, as a NumPy
    array), iteration; ``.shards`` (each a :class:`Shard`), ``.manifest``, ``.tokens``, ``.documents``,
    ``.tokenizer`` (the SHA-256 of the tokenizer), :meth:`verify`."""

    def __init__(self, folder: str, manifests: list[dict[str, Any]]) -> None:
        import numpy as np

        self.folder = folder
        self.manifest = manifests[0]
        self.format: str = self.manifest["format"]
        records = sorted((s for m in manifests for s in m["shards"]), key=lambda s: s["name"])
        self.shards = [Shard(folder, r, self.format, self.manifest["dtype"]) for r in records]
        self._starts = np.cumsum([0] + [len(s) for s in self.shards])

    @property
    def tokens(self) -> int:
        """The ids in all shards.

        >>> import tempfile, bytepair
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> out = tempfile.mkdtemp() + "/out"
        >>> _ = tok.encode_dataset(iter(["hi", "there"]), out, format="bin")
        >>> open(out).tokens
        9
        """
        return sum(s.tokens for s in self.shards)

    @property
    def documents(self) -> int:
        """The documents in all shards.

        >>> import tempfile, bytepair
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> out = tempfile.mkdtemp() + "/out"
        >>> _ = tok.encode_dataset(iter(["hi", "there"]), out, format="bin")
        >>> open(out).documents
        2
        """
        return int(self._starts[-1])

    @property
    def tokenizer(self) -> str:
        """The SHA-256 of the tokenizer that wrote the shards (:func:`bytepair.dataset.tokenizer_hash`).

        >>> import tempfile, bytepair
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> out = tempfile.mkdtemp() + "/out"
        >>> _ = tok.encode_dataset(iter(["hi", "there"]), out, format="bin")
        >>> open(out).tokenizer == bytepair.dataset.tokenizer_hash(tok)
        True
        """
        return str(self.manifest["tokenizer"]["sha256"])

    def __len__(self) -> int:
        return self.documents

    def __getitem__(self, i: Any) -> Any:
        import numpy as np

        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        shard = int(np.searchsorted(self._starts, i, side="right")) - 1
        return self.shards[shard][i - int(self._starts[shard])]

    def __iter__(self) -> Iterator[Any]:
        for shard in self.shards:
            yield from shard

    def verify(self) -> None:
        """Checks every file's size and CRC-32 against the manifest; ValueError naming the first that
        differs (:meth:`Shard.verify`).

        >>> import tempfile, bytepair
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> out = tempfile.mkdtemp() + "/out"
        >>> _ = tok.encode_dataset(iter(["hi", "there"]), out, format="bin")
        >>> open(out).verify()
        """
        for shard in self.shards:
            shard.verify()


def open(folder: PathLike) -> ShardSet:
    """The shard set in ``folder``, every complete shard of it (all its manifests' shards, by name).

    Raises FileNotFoundError for a folder with no manifest, ValueError for a manifest that is not
    bytepair's, manifests that disagree, or an index that does not match its ids.

    >>> import tempfile, bytepair
    >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    >>> out = tempfile.mkdtemp() + "/out"
    >>> _ = tok.encode_dataset([iter(["hi"]), iter(["a", "b"])], out, format="megatron")
    >>> shards = open(out)
    >>> [s.name for s in shards.shards], len(shards), shards[2].tolist()
    (['00000-iterable', '00001-iterable'], 3, [98, 256])
    """
    folder = path_str(folder, "folder")
    paths = manifest_paths(folder)
    if not paths:
        raise FileNotFoundError(2, "no shard set here (no manifest.json)", folder)
    manifests = [read_manifest(p) for p in paths]
    for path, m in zip(paths[1:], manifests[1:]):
        for key in ("format", "tokenizer", "eot", "inputs"):
            if m.get(key) != manifests[0].get(key):
                raise ValueError(f"{path}: its {key} differs from {paths[0]}'s: not the same shard set")
    return ShardSet(folder, manifests)
