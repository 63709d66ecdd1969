"""Encoding text to token ids and back: :class:`Tokenizer`."""

from __future__ import annotations

import io
import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable

from . import _core, interop
from ._common import PathLike, check_num_threads, check_special_tokens, path_str, write_atomically
from ._progress import ProgressBar
from .formats import load_bpe, save_bpe

if TYPE_CHECKING:
    import numpy

    from .dataset import DatasetSummary
    from .sources import Source

__all__ = ["Tokenizer"]

# encode_iterable encodes text once it holds this many bytes, so that small pieces (lines of a file) are
# encoded a batch per call rather than one call each; smaller batches streamed slower, larger ones no
# faster, and this size keeps the memory held to a few MB.
_STREAM_BATCH = 1 << 18


class Tokenizer:
    """A byte-level BPE tokenizer: a vocabulary, its merges, and special tokens.

    Text is split at special tokens, then into GPT-2 pre-tokens, and each pre-token is encoded with the
    merges (the lowest-ranked merge first): ids equal tiktoken's for the same ranks. A ``Tokenizer`` is
    immutable, can be shared by threads (long calls release the GIL), and pickles.

    >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"th", 257: b"the", 258: b" the"}
    >>> merges = [(b"t", b"h"), (b"th", b"e"), (b" ", b"the")]
    >>> tok = Tokenizer(vocab, merges, special_tokens=["<|endoftext|>"])
    >>> tok.encode("the theme<|endoftext|>")
    [257, 258, 109, 101, 259]
    >>> tok.decode([257, 258, 259])
    'the the<|endoftext|>'
    """

    def __init__(
        self,
        vocab: Mapping[int, bytes],
        merges: Iterable[tuple[bytes, bytes]],
        special_tokens: Iterable[str] | None = None,
    ) -> None:
        """Builds a tokenizer from ``vocab`` (id -> bytes), ``merges`` in order of creation, and
        ``special_tokens``; a special token missing from ``vocab`` is added with the next id, one already
        in it (such as a token of one byte, ``"\\n"``) keeps its id. Text is split at every special token.

        Raises ValueError for a vocabulary that cannot encode: two ids with the same bytes, a byte
        value with no id, or a merge whose parts or result are not in the vocabulary; and for a special
        token of more than 1024 bytes (UTF-8).
        """
        specials = check_special_tokens(special_tokens)
        vocab = dict(vocab)
        merges = [tuple(m) for m in merges]
        for token_id, token in vocab.items():
            if not isinstance(token_id, int) or not 0 <= token_id < 1 << 32:
                raise ValueError(f"vocab ids must be ints from 0 to 2**32 - 1, not {token_id!r}")
            if not isinstance(token, bytes):
                raise TypeError(f"vocab[{token_id}] must be bytes, not {type(token).__name__}")
        for i, m in enumerate(merges):
            if len(m) != 2 or not all(isinstance(t, bytes) for t in m):
                raise TypeError(f"merges[{i}] must be a pair of bytes, not {m!r}")
        known = set(vocab.values())
        for token in specials:
            if token.encode("utf-8") not in known:
                vocab[max(vocab, default=-1) + 1] = token.encode("utf-8")
        self._vocab = vocab
        self._merges = merges
        self._specials = specials
        self._encoder = _core.Encoder(list(vocab.items()), merges, specials)

    @classmethod
    def from_files(
        cls, vocab_filepath: PathLike, merges_filepath: PathLike, special_tokens: Iterable[str] | None = None
    ) -> Tokenizer:
        """Loads GPT-2 ``vocab.json`` and ``merges.txt`` (see :func:`bytepair.load_bpe`).

        >>> import os, tempfile, bytepair
        >>> d = tempfile.mkdtemp()
        >>> vocab = {i: bytes([i]) for i in range(256)} | {256: b"hi"}
        >>> bytepair.save_bpe(vocab, [(b"h", b"i")], os.path.join(d, "v.json"), os.path.join(d, "m.txt"))
        >>> Tokenizer.from_files(os.path.join(d, "v.json"), os.path.join(d, "m.txt")).encode("hi!")
        [256, 33]
        """
        vocab, merges = load_bpe(vocab_filepath, merges_filepath)
        return cls(vocab, merges, special_tokens)

    @classmethod
    def from_dir(cls, folder: PathLike) -> Tokenizer:
        """Loads a folder written by :meth:`save` or ``bytepair train``: ``vocab.json``, ``merges.txt``
        and ``special_tokens.json`` (a JSON list; optional).

        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).save(d)
        >>> Tokenizer.from_dir(d)
        Tokenizer(vocab_size=257, merges=0, special_tokens=['<|endoftext|>'])
        """
        folder = path_str(folder, "folder")
        if not os.path.isfile(os.path.join(folder, "vocab.json")):
            raise FileNotFoundError(f"{folder}: not a tokenizer folder (no vocab.json)")
        specials_path = os.path.join(folder, "special_tokens.json")
        specials = []
        if os.path.exists(specials_path):
            with open(specials_path, encoding="utf-8") as f:
                try:
                    specials = json.load(f)
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise ValueError(f"{specials_path}: not a JSON list of strings: {e}") from None
            if not isinstance(specials, list) or not all(isinstance(t, str) for t in specials):
                raise ValueError(f"{specials_path}: not a JSON list of strings")
        return cls.from_files(
            os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt"), specials
        )

    def save(self, folder: PathLike) -> None:
        """Writes ``vocab.json``, ``merges.txt`` and ``special_tokens.json`` into ``folder`` (created if
        missing), for :meth:`from_dir` and the ``bytepair`` commands; each file whole or not at all, as
        :func:`bytepair.save_bpe` writes.

        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).save(d)
        >>> sorted(os.listdir(d))
        ['merges.txt', 'special_tokens.json', 'vocab.json']
        """
        folder = path_str(folder, "folder")
        os.makedirs(folder, exist_ok=True)
        save_bpe(
            self._vocab, self._merges, os.path.join(folder, "vocab.json"), os.path.join(folder, "merges.txt")
        )
        specials = json.dumps(self._specials, ensure_ascii=False) + "\n"
        write_atomically(os.path.join(folder, "special_tokens.json"), specials)

    @classmethod
    def from_hf(cls, path: PathLike) -> Tokenizer:
        """Loads a byte-level BPE HF ``tokenizer.json`` (GPT-2's pre-tokenizer), added tokens as special
        tokens; see :func:`bytepair.interop.load_hf`.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
        >>> Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")]).to_hf(path)
        >>> Tokenizer.from_hf(path).encode("hi!")
        [256, 33]
        """
        return cls(*interop.load_hf(path))

    @classmethod
    def from_tiktoken(
        cls, path: PathLike, special_tokens: Mapping[str, int] | Iterable[str] | None = None
    ) -> Tokenizer:
        """Loads a ``.tiktoken`` rank file (ids are ranks) and rebuilds its merges; ``special_tokens``
        is tiktoken's ``{token: id}`` or a list (given the next ids). Encodes as
        ``tiktoken.Encoding(pat_str=bytepair.GPT2_PATTERN, ...)`` does; see :mod:`bytepair.interop`.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "bpe.tiktoken")
        >>> Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")]).to_tiktoken(path)
        >>> tok = Tokenizer.from_tiktoken(path, {"<|endoftext|>": 257})
        >>> tok.merges, tok.encode("hi<|endoftext|>")
        ([(b'h', b'i')], [256, 257])
        """
        vocab = interop.load_tiktoken(path)
        merges = interop.merges_from_ranks(vocab)  # before the special tokens join: never merged
        if isinstance(special_tokens, Mapping):
            vocab.update((i, s.encode("utf-8")) for s, i in special_tokens.items())
        return cls(vocab, merges, special_tokens)

    def to_hf(self, path: PathLike) -> None:
        """Writes a HF ``tokenizer.json`` that encodes as this tokenizer does (written as
        :func:`bytepair.save_bpe` writes its files).

        >>> import json, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).to_hf(path)
        >>> json.load(open(path, encoding="utf-8"))["added_tokens"][0]["content"]
        '<|endoftext|>'
        """
        interop.save_hf(self._vocab, self._merges, self._specials, path)

    def to_tiktoken(self, path: PathLike) -> None:
        """Writes a ``.tiktoken`` rank file (special tokens left out, as tiktoken takes them apart).

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "bpe.tiktoken")
        >>> Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")]).to_tiktoken(path)
        >>> open(path).read().splitlines()[-1]
        'aGk= 256'
        """
        interop.save_tiktoken(self._vocab, self._merges, self._specials, path)

    @property
    def vocab(self) -> dict[int, bytes]:
        """A copy of the vocabulary, id -> bytes, special tokens included.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"]).vocab[256]
        b'<|endoftext|>'
        """
        return dict(self._vocab)

    @property
    def merges(self) -> list[tuple[bytes, bytes]]:
        """A copy of the merges, in order of creation.

        >>> Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")]).merges
        [(b'h', b'i')]
        """
        return list(self._merges)

    @property
    def special_tokens(self) -> list[str]:
        """The special tokens, deduplicated, in the order given.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<b>", "<a>", "<b>"]).special_tokens
        ['<b>', '<a>']
        """
        return list(self._specials)

    @property
    def vocab_size(self) -> int:
        """One more than the largest id (the number of tokens when ids have no gaps).

        >>> Tokenizer({i: bytes([i]) for i in range(256)} | {300: b"hi"}, [(b"h", b"i")]).vocab_size
        301
        """
        return self._encoder.vocab_size

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``. Special tokens are always recognized (longest first where they overlap).
        Ctrl-C stops a long text promptly (KeyboardInterrupt), as it does :meth:`encode_batch`.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode("hi")
        [104, 105]
        """
        if not isinstance(text, str):
            raise TypeError(f"encode takes a str, not {type(text).__name__}")
        return self._encoder.encode(text)

    def encode_to_numpy(self, text: str) -> numpy.ndarray:
        """The ids of ``text`` as a NumPy ``uint32`` array: the ids of :meth:`encode`, without a Python
        int or list per id, so faster on long texts (tiktoken's method of the same name). The array is
        writable and owns its memory. Ctrl-C stops a long text promptly, as in :meth:`encode`.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_to_numpy("hi")
        array([104, 105], dtype=uint32)
        """
        return self._encoder.encode_to_numpy(text)

    def encode_batch(self, texts: list[str], num_threads: int | None = None) -> list[list[int]]:
        """The ids of each text, encoded in parallel on ``num_threads`` threads: a positive int, or None
        for every core. More than four per core are not started; fewer run when not all can start.
        ``texts`` is a list (or any iterable) of str; a single str or bytes raises TypeError.

        >>> Tokenizer({i: bytes([i]) for i in range(256)}, []).encode_batch(["a", "bc"])
        [[97], [98, 99]]
        """
        if isinstance(texts, (str, bytes, bytearray)):
            kind = type(texts).__name__
            raise TypeError(f"encode_batch takes a list of str, not a single {kind}; use encode for one text")
        texts = list(texts)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"encode_batch takes str items, not {type(t).__name__}")
        return self._encoder.encode_batch(texts, check_num_threads(num_threads))

    def encode_iterable(self, iterable: Iterable[str]) -> Iterator[int]:
        """Lazily yields the ids of the concatenation of ``iterable`` (for example an open file), in
        memory bounded by the longest pre-token rather than by the text.

        The ids are exactly those of ``encode("".join(iterable))`` however the text is cut: text after
        the last place where cutting is safe (between a non-space and a space, outside any special
        token) is held back until more arrives. An open text file or ``io.StringIO`` is read in blocks
        rather than line by line, which gives the same text faster.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> list(tok.encode_iterable(["h", "i ", "there"]))
        [104, 105, 32, 116, 104, 101, 114, 101]
        """
        # An open text file's lines joined are what read() gives, so it is read in blocks: iterating it
        # line by line took a fifth of the stream's time on prose. Only the exact types: a subclass may
        # iterate otherwise.
        if type(iterable) in (io.TextIOWrapper, io.StringIO):
            read = iterable.read  # type: ignore[attr-defined]
            iterable = iter(lambda: read(_STREAM_BATCH), "")
        # Chained in C: a generator yielding each id took longer than encoding them; the engine's stream
        # yields one list per batch.
        return itertools.chain.from_iterable(self._encoder.stream(iterable, _STREAM_BATCH))

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``; bytes that are not valid UTF-8 become U+FFFD.

        ``ids`` holds ints: Python ints, NumPy integers, or a NumPy integer array. Anything else, a
        float even if whole (``995.0``) or a str of digits among them, raises TypeError rather than being
        made an int; bools are ints in Python and count as 0 and 1. Raises ValueError for an id with no
        token.

        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.decode([104, 105, 0xE2, 0x82])
        'hi\\ufffd'
        >>> tok.decode([104.0])
        Traceback (most recent call last):
        TypeError: decode takes integer ids: 'float' object cannot be interpreted as an integer
        """
        if isinstance(ids, (str, bytes, bytearray)):
            raise TypeError(f"decode takes a sequence of integer ids, not {type(ids).__name__}")
        # A NumPy array (or array.array) converts to Python numbers in C; its floats are refused below.
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)
        try:
            # The engine takes each id through __index__, as Python's own indexing does: ints and NumPy
            # integers pass, floats and strs fail.
            data = self._encoder.decode_bytes(ids)
        except TypeError as e:
            raise TypeError(f"decode takes integer ids: {e}") from None
        return data.decode("utf-8", errors="replace")

    def encode_file(
        self,
        input_path: PathLike,
        output_path: PathLike,
        *,
        num_threads: int | None = None,
        dtype: Any = None,
        progress: bool | Callable[[str, int, int], None] = False,
    ) -> int:
        """Encodes the UTF-8 file ``input_path`` into a NumPy ``.npy`` file of ids and returns the number
        of tokens. Memory stays bounded whatever the file size. ``num_threads`` is as for
        :meth:`encode_batch`: every core by default. Text with no place to cut safely in 16 MiB is cut
        there at a character boundary, as :func:`bytepair.train_bpe` does: its ids are those of the two
        parts encoded apart.

        ``dtype`` is ``numpy.uint16`` when every id fits (vocab_size <= 65536), else ``numpy.uint32``;
        forcing ``uint16`` with a larger id raises ValueError. The output appears only when complete:
        on any error (missing input, invalid UTF-8, unwritable output, Ctrl-C) no partial file is left.
        (SIGTERM kills a process outright unless it is made an exception, as ``bytepair encode`` does.)

        The output is written through a uniquely named temporary file beside it and a rename; a replaced
        file keeps its mode, a symbolic link its target. An output that is the input file (by device and
        inode) raises ValueError and a directory IsADirectoryError, before anything is written. A device
        (``/dev/null``) is written directly; a pipe or terminal raises OSError, since the header, written
        last, needs an output that can seek. Paths may be str, bytes or ``os.PathLike``.

        >>> import numpy as np, os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "in.txt"), "w").write("hi there")
        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
        >>> tok.encode_file(os.path.join(d, "in.txt"), os.path.join(d, "out.npy"))
        8
        >>> np.load(os.path.join(d, "out.npy"))[:2]
        array([104, 105], dtype=uint16)
        """
        if dtype is None:
            # No NumPy here: importing it takes 0.1 s, and its BLAS threads spin on every core for a
            # while after, which took a core from the workers at the start of the encoding.
            bits = 16 if self.vocab_size <= 1 << 16 else 32
        else:
            import numpy as np

            dtype = np.dtype(dtype)
            if dtype not in (np.dtype(np.uint16), np.dtype(np.uint32)):
                raise ValueError(f"dtype must be uint16 or uint32, not {dtype}")
            bits = dtype.itemsize * 8
        num_threads = check_num_threads(num_threads)
        args = (
            path_str(input_path, "input_path"),
            path_str(output_path, "output_path"),
            bits,
            num_threads,
            None,
        )
        if progress is True:
            with ProgressBar() as bar:
                return self._encoder.encode_file(*args, bar)
        return self._encoder.encode_file(*args, progress if callable(progress) else None)

    def encode_dataset(
        self,
        sources: Source,
        out: PathLike,
        *,
        format: str = "megatron",
        text_field: str = "text",
        eot: bool | str = True,
        errors: str = "strict",
        num_threads: int | None = None,
        progress: bool | Callable[..., None] = False,
        resume: bool = True,
        single_output: bool | str = False,
    ) -> DatasetSummary:
        """Encodes every document of ``sources`` into token shards in the directory ``out``, for training,
        and returns a :class:`bytepair.dataset.DatasetSummary`. :func:`bytepair.shards.open` reads them
        back; the module :mod:`bytepair.shards` describes the files.

        ``sources`` are what :func:`bytepair.count_pretokens` takes (:mod:`bytepair.sources`): paths,
        directories, glob patterns, lists of them, iterables of str. Every record of a JSON lines or
        Parquet file (its field or column ``text_field``) and every item of an iterable is a document,
        encoded as :meth:`encode` encodes it; a ``.txt`` file's documents are separated by the end-of-text
        token (when it is a special token of this tokenizer; else the file is one document).

        - ``format``: ``"megatron"`` (Megatron-LM's ``.bin``/``.idx``), ``"bin"`` (nanoGPT's raw ids for
          ``np.memmap``, with ``.idx.npy`` document offsets) or ``"npy"`` (``.npy`` ids and
          ``.offsets.npy``). Ids are uint16 when the vocabulary fits, else uint32 (int32 for Megatron);
          the summary says which.
        - ``eot``: True writes ``"<|endoftext|>"`` after each document, as nanoGPT and Megatron's
          ``--append-eod`` do; a str names another token; False writes none (document boundaries are
          then only in the index). A token that is not in the vocabulary raises ValueError before
          anything is written.
        - One shard per input, named after its position and file name (``00003-train-0003``), or one
          shard of everything: ``single_output=True`` (named ``data``) or the shard's name.
        - The bytes written are the same for any ``num_threads`` and any run. Memory stays bounded (a few
          pieces of text per thread) whatever the sizes.
        - ``resume``: the manifest (``out/manifest.json``) is written first and after each shard; a rerun
          (after Ctrl-C, SIGTERM, a crash) skips the shards it lists as complete and makes the rest,
          byte for byte as an uninterrupted run would. A shard set made with another tokenizer or other
          options, or whose input has changed since its shard was written, raises ValueError (give a new
          directory, or ``resume=False`` to start over there). Shards of iterables are always remade.
        - A directory that holds files but no manifest raises ValueError: nothing is overwritten.
        - ``errors="skip"`` skips bad records and counts them in the summary, as
          :func:`bytepair.count_pretokens` does; ``progress`` is True for a bar on stderr (bytes,
          documents, tokens, time left; only on a terminal) or a callable ``progress("encode", done,
          total, documents, tokens)``, ``done`` and ``total`` in bytes of input.

        Raises OSError for an input that cannot be read (naming it; the shards finished before it are
        kept), ValueError for a bad record (naming its file and line or row) or the cases above, and
        KeyboardInterrupt on Ctrl-C, which stops promptly and leaves no partial shard.

        >>> import os, tempfile, bytepair
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.jsonl"), "w").write('{"text": "hi"}\\n{"text": "there"}\\n')
        >>> tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> summary = tok.encode_dataset(os.path.join(d, "a.jsonl"), os.path.join(d, "out"), format="bin")
        >>> summary.written, summary.documents, summary.tokens, summary.dtype
        (['00000-a'], 2, 9, 'uint16')
        >>> sorted(os.listdir(os.path.join(d, "out")))
        ['00000-a.bin', '00000-a.idx.npy', 'manifest.json']
        >>> [ids.tolist() for ids in bytepair.shards.open(os.path.join(d, "out"))]
        [[104, 105, 256], [116, 104, 101, 114, 101, 256]]
        """
        from .dataset import encode_dataset

        return encode_dataset(
            self,
            self._encoder,
            sources,
            out,
            format=format,
            text_field=text_field,
            eot=eot,
            errors=errors,
            num_threads=num_threads,
            progress=progress,
            resume=resume,
            single_output=single_output,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (Tokenizer, (self._vocab, self._merges, self._specials))

    def __repr__(self) -> str:
        return (
            f"Tokenizer(vocab_size={self.vocab_size}, merges={len(self._merges)}, "
            f"special_tokens={self._specials})"
        )
