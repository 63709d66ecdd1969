"""Encoding a dataset into token shards for training: :func:`encode_dataset`, which
:meth:`bytepair.Tokenizer.encode_dataset` calls. :mod:`bytepair.shards` reads the shards back and
describes the files.

The plan is made here: the sources resolved (:mod:`bytepair.sources`), a shard named for each input, the
output directory checked against its manifest (what is complete is skipped, a changed input or tokenizer
refused), the manifest written before anything else and again after each shard. The engine does the rest
on all cores with the GIL released: the files read (decompressed, parsed, Parquet decoded), the
documents encoded and each shard written whole under temporary names, then renamed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _core, shards
from ._common import PathLike, check_num_threads, path_str, write_atomically
from ._progress import ProgressBar
from .sources import Source, SourceFile, resolve
from .sources import shard as part_of

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

__all__ = [
    "DatasetPlan",
    "DatasetSummary",
    "ShardJob",
    "ShardWritten",
    "encode_dataset",
    "plan_dataset",
    "remove_temporary_files",
    "tokenizer_hash",
]

DEFAULT_EOT = "<|endoftext|>"
# An iterable's documents go to the engine in batches of this many characters: each batch is a piece in
# flight, a few per thread, so memory stays small.
_BATCH_CHARACTERS = 1 << 20
# The manifest is rewritten after every shard until it lists this many, then at most this often.
_EVERY_SHARD_UNTIL = 1000
_EVERY_SECONDS = 10.0
_TEMPORARY = re.compile(r"\.bp-[0-9a-f]{16}\.tmp")


@dataclass
class DatasetSummary:
    """What :func:`encode_dataset` did: the shard set's directory, format and id type (``"uint16"``, or
    ``"uint32"`` when the vocabulary does not fit, ``"int32"`` for Megatron), the shards written this run
    and those already complete (skipped), tokens and documents written this run, input bytes read, bad
    records skipped (``errors="skip"``) with the first messages, the seconds taken, and the shards written
    on each node of a Ray cluster (:mod:`bytepair.ray`; by node id, empty on one machine)."""

    out: str
    format: str
    dtype: str
    written: list[str] = field(default_factory=list)
    already_complete: list[str] = field(default_factory=list)
    tokens: int = 0
    documents: int = 0
    input_bytes: int = 0
    skipped: int = 0
    skipped_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    nodes: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [
            f"{self.out}: {len(self.written)} shard(s) written ({self.format}, ids as {self.dtype}), "
            f"{self.tokens:,} tokens in {self.documents:,} documents, {self.input_bytes / 1e6:,.1f} MB read "
            f"in {self.seconds:.1f}s"
        ]
        if self.already_complete:
            lines.append(f"{len(self.already_complete)} shard(s) already complete, skipped")
        if self.dtype != "uint16":
            lines.append(f"ids are {self.dtype}: the vocabulary has more than 65,536 ids")
        if self.skipped:
            lines.append(f"{self.skipped:,} bad record(s) skipped, the first: {self.skipped_errors[0]}")
        if self.nodes:
            lines.append(
                "shards written on Ray nodes: " + ", ".join(f"{n} ({k})" for n, k in self.nodes.items())
            )
        return "\n".join(lines)


def tokenizer_hash(tok: Tokenizer) -> str:
    """The SHA-256 of a tokenizer's vocabulary (ids and bytes), merges and special tokens, in hex: equal
    exactly when the three are.

    >>> import bytepair
    >>> a = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [])
    >>> b = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    >>> len(tokenizer_hash(a)), tokenizer_hash(a) == tokenizer_hash(b)
    (64, False)
    """
    h = hashlib.sha256(b"bytepair tokenizer 1\n")

    def add(data: bytes) -> None:
        h.update(struct.pack("<Q", len(data)))
        h.update(data)

    vocab = tok.vocab
    h.update(struct.pack("<Q", len(vocab)))
    for token_id in sorted(vocab):
        h.update(struct.pack("<Q", token_id))
        add(vocab[token_id])
    merges = tok.merges
    h.update(struct.pack("<Q", len(merges)))
    for a, b in merges:
        add(a)
        add(b)
    specials = tok.special_tokens
    h.update(struct.pack("<Q", len(specials)))
    for s in specials:
        add(s.encode("utf-8"))
    return h.hexdigest()


@dataclass
class _Input:
    """One input of the plan: its place among all inputs, and a file or an iterable."""

    index: int
    file: SourceFile | None = None
    texts: Iterable[str] | None = None

    @property
    def label(self) -> str:
        return self.file.path if self.file is not None else f"<iterable {self.index}>"

    def identity(self) -> dict[str, Any]:
        """What the manifest records of the input, to tell later whether it changed."""
        if self.file is None:
            return {"index": self.index, "iterable": True}
        st = os.stat(self.file.path)
        return {"index": self.index, "path": self.file.path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _shard_name(item: _Input) -> str:
    """``00012-train-0003``: the input's position, then its file name without the extensions, kept to
    letters, digits, ``-``, ``_`` and ``.``."""
    if item.file is None:
        stem = "iterable"
    else:
        stem = os.path.basename(item.file.path)
        stem = re.sub(r"(\.(txt|jsonl|json|parquet))?(\.(gz|zst|xz))?$", "", stem, flags=re.IGNORECASE)
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "input"
    return f"{item.index:05d}-{stem}"


def _eot(tok: Tokenizer, eot: bool | str) -> tuple[str | None, int | None, str | None]:
    """(the end-of-text token written after each document or None, its id, the special token that
    separates the documents of text files or None); ValueError for a token missing from the vocabulary."""
    if isinstance(eot, bool):
        token = DEFAULT_EOT
    elif isinstance(eot, str) and eot:
        token = eot
    else:
        raise TypeError(f"eot must be True, False or the end-of-text token (a non-empty str), not {eot!r}")
    separator = token if token in tok.special_tokens else None
    if eot is False:
        return None, None, separator
    ids = {t: i for i, t in tok.vocab.items()}
    token_id = ids.get(token.encode("utf-8"))
    if token_id is None:
        raise ValueError(
            f"the end-of-text token {token!r} is not in the vocabulary: give the tokenizer it as a special "
            f"token, name another with eot=..., or pass eot=False"
        )
    return token, token_id, separator


def _check_folder(
    out: str, config: dict[str, Any], part: tuple[int, int] | None, resume: bool
) -> tuple[str, dict[str, Any]]:
    """Checks that ``out`` is empty, missing, or this shard set; returns the path of this run's manifest
    and the manifest to continue from (its complete shards kept when resuming)."""
    name = "manifest.json" if part is None else f"manifest.{part[0]}-of-{part[1]}.json"
    mine = os.path.join(out, name)
    if not os.path.isdir(out):
        if os.path.exists(out):
            raise NotADirectoryError(20, "the output of encode_dataset is a directory", out)
        return mine, {**config, "shards": []}
    manifests = shards.manifest_paths(out)
    visible = [n for n in os.listdir(out) if not n.startswith(".")]
    if not manifests:
        if visible:
            raise ValueError(
                f"{out}: the directory holds files and no bytepair manifest, so it is not a shard set this "
                f"could resume: give an empty or new directory"
            )
        return mine, {**config, "shards": []}
    previous = None
    for path in manifests:
        manifest = shards.read_manifest(path)
        for key in ("format", "dtype", "tokenizer", "eot", "eot_id", "text_field", "inputs", "single_output"):
            if manifest.get(key) != config[key] and resume:
                raise ValueError(
                    f"{out}: a shard set made with another {key} ({_show(manifest.get(key))}, not "
                    f"{_show(config[key])}): give a new directory, or resume=False to start it over"
                )
        if path == mine:
            previous = manifest
    if not resume:
        _remove_shards(out, manifests)
        return mine, {**config, "shards": []}
    if previous is None:
        return mine, {**config, "shards": []}
    return mine, {**config, "shards": previous["shards"]}


def _show(value: Any) -> str:
    if isinstance(value, dict) and "sha256" in value:
        return f"tokenizer {value['sha256'][:12]}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _remove_shards(out: str, manifests: list[str]) -> None:
    """Removes the shards the manifests list, then the manifests: a shard set started over."""
    for path in manifests:
        manifest = shards.read_manifest(path)
        for record in manifest["shards"]:
            for f in record["files"]:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(out, f["name"]))
        os.unlink(path)


def _complete(
    manifest: dict[str, Any], plan: list[tuple[str, list[_Input]]], out: str
) -> tuple[list[dict[str, Any]], set[str]]:
    """The shards of ``manifest`` still complete, and their names. A shard made from an input that has
    changed since (size or modification time), or from an iterable (which cannot be compared), is not;
    the first raises ValueError naming the input."""
    planned = {name: inputs for name, inputs in plan}
    kept = []
    for record in manifest["shards"]:
        inputs = planned.get(record["name"])
        if inputs is None or any(i.file is None for i in inputs):
            continue
        for item, recorded in zip(inputs, record["inputs"]):
            now = item.identity()
            if now != recorded:
                raise ValueError(
                    f"{item.label} changed since its shard {record['name']} was written in {out} (size "
                    f"{recorded.get('size')} -> {now.get('size')} bytes, modified {recorded.get('mtime_ns')} "
                    f"-> {now.get('mtime_ns')} ns): give a new directory, or resume=False to start over"
                )
        if all(os.path.exists(os.path.join(out, f["name"])) for f in record["files"]):
            kept.append(record)
    return kept, {r["name"] for r in kept}


def _text_batches(texts: Iterable[str]) -> Iterator[tuple[int, list[str]]]:
    """The documents of ``texts`` in lists of about a megabyte, as the engine's reader takes them."""
    batch: list[str] = []
    size = 0
    for text in texts:
        batch.append(text)
        size += len(text) if isinstance(text, str) else 0
        if size >= _BATCH_CHARACTERS:
            yield size, batch
            batch, size = [], 0
    if batch:
        yield size, batch


def _source(item: _Input) -> Any:
    """The input as the engine's job takes it: a file it reads, or an iterator of batches."""
    f = item.file
    if f is None:
        return _text_batches(item.texts)  # type: ignore[arg-type]
    return (f.path, f.format, f.compression)


def _check_not_inside(out: str, sources: Source) -> None:
    """ValueError when ``out`` is inside a directory among ``sources``: its shards and manifest would be
    read back as inputs by the next run."""
    paths = sources if isinstance(sources, (list, tuple)) else [sources]
    real_out = os.path.realpath(out)
    for source in paths:
        if isinstance(source, (str, bytes, os.PathLike)) and os.path.isdir(source):
            folder = os.path.realpath(os.fsdecode(source))
            if os.path.commonpath([real_out, folder]) == folder:
                raise ValueError(
                    f"{out} is inside the source directory {os.fsdecode(source)}: the next run would read "
                    f"the shards as inputs; write them elsewhere"
                )


def _plan(
    sources: Source, single_output: bool | str, part: tuple[int, int] | None
) -> tuple[list[tuple[str, list[_Input]]], list[str]]:
    """The shards to make, each with its inputs, in order (one per input, or one of all), and every
    input's label (all of them, whatever part is made)."""
    resolved = resolve(sources)
    inputs = [_Input(i, file=f) for i, f in enumerate(resolved.files)]
    inputs += [_Input(len(inputs) + i, texts=t) for i, t in enumerate(resolved.texts)]
    labels = [i.label for i in inputs]
    if part is not None:
        if resolved.texts:
            raise ValueError("a part of the sources (num_shards) takes files, not iterables")
        chosen = {id(f) for f in part_of(resolved.files, *part)}
        inputs = [i for i in inputs if id(i.file) in chosen]
    if single_output:
        name = single_output if isinstance(single_output, str) else "data"
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise ValueError(
                f"single_output names the shard with letters, digits, '.', '_' and '-', not {name!r}"
            )
        return ([(name, inputs)] if inputs else []), labels
    return [(_shard_name(i), [i]) for i in inputs], labels


@dataclass(frozen=True)
class ShardJob:
    """One shard of a dataset to write from files, with all the engine needs to write it: picklable, so
    that another process or machine that sees the output directory can write it (:mod:`bytepair.ray`),
    exactly as :func:`encode_dataset` would. Made by :meth:`DatasetPlan.jobs`."""

    out: str
    name: str
    files: tuple[SourceFile, ...]
    format: str
    bits: int
    eot_id: int | None
    separator: str | None
    text_field: str
    skip: bool

    def write(self, tok: Tokenizer, num_threads: int | None = None) -> ShardWritten:
        """Writes the shard into place with the tokenizer ``tok`` (the plan's), and returns what the
        manifest records of it (:meth:`DatasetPlan.record` takes it). Raises as
        :meth:`bytepair.Tokenizer.encode_dataset` does, naming the input.

        >>> import os, tempfile, bytepair
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.txt"), "w").write("hi")
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> plan = plan_dataset(tok, os.path.join(d, "a.txt"), os.path.join(d, "out"), format="bin")
        >>> (job,) = plan.jobs()
        >>> written = job.write(tok)
        >>> written.shard[:3], sorted(os.listdir(os.path.join(d, "out")))
        (('00000-a', 3, 1), ['00000-a.bin', '00000-a.idx.npy', 'manifest.json'])
        """
        shards_written: list[tuple[Any, ...]] = []
        jobs = [(self.name, _source(_Input(0, file=f))) for f in self.files]
        tokens, documents, skipped, skipped_errors, input_bytes = _core.encode_dataset(
            tok._encoder,
            self.out,
            jobs,
            self.format,
            self.bits,
            self.eot_id,
            self.separator,
            self.text_field,
            self.skip,
            num_threads,
            None,
            sum(f.size for f in self.files),
            shards_written.append,
        )
        return ShardWritten(shards_written[0], tokens, documents, skipped, skipped_errors, input_bytes)


@dataclass(frozen=True)
class ShardWritten:
    """A shard written by :meth:`ShardJob.write`: the record the manifest keeps of it (``shard``, as the
    engine reports it) and the totals a :class:`DatasetSummary` adds up."""

    shard: tuple[Any, ...]
    tokens: int
    documents: int
    skipped: int
    skipped_errors: list[str]
    input_bytes: int


class DatasetPlan:
    """An :func:`encode_dataset` run made ready by :func:`plan_dataset`: the arguments checked, the output
    directory checked against its manifest and the manifest written, the shards still to write
    (:meth:`jobs`). The shards may be written here or elsewhere; each one written is :meth:`record`-ed,
    and :meth:`finish` writes the manifest and returns the summary. The manifest is the same bytes
    whichever process wrote which shard, in whatever order."""

    def __init__(
        self,
        out: str,
        manifest_path: str,
        manifest: dict[str, Any],
        summary: DatasetSummary,
        todo: list[tuple[str, list[_Input]]],
        settings: dict[str, Any],
    ) -> None:
        self.out, self.summary, self.todo, self.settings = out, summary, todo, settings
        self.started = time.monotonic()
        self.identities = {name: [item.identity() for item in inputs] for name, inputs in todo}
        #: The bytes of the input files still to encode, for progress.
        self.total = sum(item.file.size for _, inputs in todo for item in inputs if item.file is not None)
        self.recorder = _Recorder(manifest_path, manifest)

    def jobs(self) -> list[ShardJob]:
        """The shards still to write, each a :class:`ShardJob`; TypeError when one comes from an iterable
        (which cannot be sent to another process).

        >>> import os, tempfile, bytepair
        >>> d = tempfile.mkdtemp()
        >>> os.mkdir(os.path.join(d, "in"))
        >>> for name in ["a.txt", "b.jsonl"]:
        ...     _ = open(os.path.join(d, "in", name), "w").write('{"text": "hi"}')
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> [job.name for job in plan_dataset(tok, os.path.join(d, "in"), os.path.join(d, "out")).jobs()]
        ['00000-a', '00001-b']
        """
        jobs = []
        for name, inputs in self.todo:
            if any(item.file is None for item in inputs):
                raise TypeError(f"shard {name} comes from an iterable, which only this process can read")
            files = tuple(item.file for item in inputs if item.file is not None)
            jobs.append(ShardJob(self.out, name, files, **self.settings))
        return jobs

    def record(self, shard: tuple[Any, ...]) -> None:
        """Records in the manifest a shard now in place (:attr:`ShardWritten.shard`); the manifest is
        rewritten as :func:`encode_dataset` says.

        >>> import os, tempfile, bytepair
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.txt"), "w").write("hi")
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> plan = plan_dataset(tok, os.path.join(d, "a.txt"), os.path.join(d, "out"))
        >>> written = plan.jobs()[0].write(tok)
        >>> plan.record(written.shard)
        >>> [s.name for s in bytepair.shards.open(os.path.join(d, "out")).shards]
        ['00000-a']
        """
        name, tokens, documents, skipped, text_bytes, files = shard
        record = {
            "name": name,
            "inputs": self.identities[name],
            "tokens": tokens,
            "documents": documents,
            "text_bytes": text_bytes,
            "skipped": skipped,
            "files": [{"name": f, "bytes": size, "crc32": f"{crc:08x}"} for f, size, crc in files],
        }
        self.recorder.add(record)
        self.summary.written.append(name)

    def save(self) -> None:
        """Writes the manifest now, if a shard was recorded since it was last written: what an
        interrupted run must keep.

        >>> import os, tempfile, bytepair
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.txt"), "w").write("hi")
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> plan_dataset(tok, os.path.join(d, "a.txt"), os.path.join(d, "out")).save()
        >>> os.listdir(os.path.join(d, "out"))
        ['manifest.json']
        """
        self.recorder.write()

    def finish(
        self, tokens: int, documents: int, skipped: int, skipped_errors: list[str], input_bytes: int
    ) -> DatasetSummary:
        """Writes the manifest and returns the summary of the run, with the totals of the shards written.

        >>> import os, tempfile, bytepair
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.txt"), "w").write("hi")
        >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
        >>> plan = plan_dataset(tok, os.path.join(d, "a.txt"), os.path.join(d, "out"))
        >>> plan.finish(0, 0, 0, [], 0).written
        []
        """
        self.recorder.write()
        summary = self.summary
        summary.tokens, summary.documents, summary.input_bytes = tokens, documents, input_bytes
        summary.skipped, summary.skipped_errors = skipped, skipped_errors
        summary.seconds = time.monotonic() - self.started
        return summary


def plan_dataset(
    tok: Tokenizer,
    sources: Source,
    out: PathLike,
    *,
    format: str = "megatron",
    text_field: str = "text",
    eot: bool | str = True,
    errors: str = "strict",
    resume: bool = True,
    single_output: bool | str = False,
    part: tuple[int, int] | None = None,
) -> DatasetPlan:
    """Makes an :func:`encode_dataset` run ready, up to writing the first shard (see :class:`DatasetPlan`):
    checks the arguments, the tokenizer and the output directory, raising as
    :meth:`bytepair.Tokenizer.encode_dataset` does, removes temporary files left by killed runs, and
    writes the manifest.

    >>> import os, tempfile, bytepair
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "a.txt"), "w").write("hi")
    >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [])
    >>> plan_dataset(tok, os.path.join(d, "a.txt"), os.path.join(d, "out"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: the end-of-text token '<|endoftext|>' is not in the vocabulary: ...
    """
    if format not in shards.FORMATS:
        raise ValueError(f"format must be one of {', '.join(map(repr, shards.FORMATS))}, not {format!r}")
    if not isinstance(text_field, str) or not text_field:
        raise TypeError(f"text_field must be a non-empty str, not {text_field!r}")
    if errors not in ("strict", "skip"):
        raise ValueError(f'errors must be "strict" or "skip", not {errors!r}')
    if part is not None and not (isinstance(part, tuple) and len(part) == 2):
        raise TypeError(f"part must be (index, count), not {part!r}")
    out = path_str(out, "out")
    eot_token, eot_id, separator = _eot(tok, eot)
    bits = 16 if tok.vocab_size <= 1 << 16 else 32
    dtype = "uint16" if bits == 16 else ("int32" if format == "megatron" else "uint32")
    if format == "megatron" and tok.vocab_size > 1 << 31:
        raise ValueError("Megatron's ids are int32: a vocabulary of more than 2**31 ids does not fit")
    _check_not_inside(out, sources)
    plan, labels = _plan(sources, single_output, part)
    config: dict[str, Any] = {
        "bytepair_shards": shards.MANIFEST_VERSION,
        "bytepair_version": _version(),
        "format": format,
        "dtype": dtype,
        "tokenizer": {
            "sha256": tokenizer_hash(tok),
            "vocab_size": tok.vocab_size,
            "special_tokens": tok.special_tokens,
        },
        "eot": eot_token,
        "eot_id": eot_id,
        "text_field": text_field,
        "single_output": single_output,
        # All the inputs, whatever part this run makes: the parts of a job array share the list.
        "inputs": labels,
        "part": list(part) if part is not None else None,
    }
    manifest_path, manifest = _check_folder(out, config, part, resume)
    os.makedirs(out, exist_ok=True)
    if part is None:
        # Temporary files of a run that was killed; with parts, other jobs' live ones may be here too.
        remove_temporary_files(out)
    kept, complete = _complete(manifest, plan, out)
    manifest["shards"] = kept
    write_atomically(manifest_path, _dumps(manifest))
    summary = DatasetSummary(out=out, format=format, dtype=dtype, already_complete=sorted(complete))
    todo = [(name, inputs) for name, inputs in plan if name not in complete]
    settings = {
        "format": format,
        "bits": bits,
        "eot_id": eot_id,
        "separator": separator,
        "text_field": text_field,
        "skip": errors == "skip",
    }
    return DatasetPlan(out, manifest_path, manifest, summary, todo, settings)


def remove_temporary_files(out: str) -> None:
    """Removes from the directory ``out`` the temporary files of shards being written (``.bp-*.tmp``):
    those of a run that was killed, when no other run writes there.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name in [".bp-0123456789abcdef.tmp", "00000-a.bin"]:
    ...     _ = open(os.path.join(d, name), "w").write("")
    >>> remove_temporary_files(d)
    >>> os.listdir(d)
    ['00000-a.bin']
    """
    for name in os.listdir(out):
        if _TEMPORARY.fullmatch(name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(out, name))


def encode_dataset(
    tok: Tokenizer,
    engine: Any,
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
    part: tuple[int, int] | None = None,
    _chunk_size: int | None = None,
) -> DatasetSummary:
    """See :meth:`bytepair.Tokenizer.encode_dataset`; ``engine`` is the tokenizer's ``_core.Encoder``, and
    ``part`` ``(index, count)`` makes only that part of the inputs' shards (``bytepair encode
    --shard-index I --num-shards N``), with a manifest of its own, ``manifest.I-of-N.json``.

    >>> import os, tempfile, bytepair
    >>> d = tempfile.mkdtemp()
    >>> for name in ["a.txt", "b.txt", "c.txt"]:
    ...     _ = open(os.path.join(d, name), "w").write(name)
    >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    >>> out = os.path.join(d, "out")
    >>> encode_dataset(tok, tok._encoder, os.path.join(d, "*.txt"), out, part=(1, 3)).written
    ['00001-b']
    >>> sorted(os.listdir(out))
    ['00001-b.bin', '00001-b.idx', 'manifest.1-of-3.json']
    """
    num_threads = check_num_threads(num_threads)
    plan = plan_dataset(
        tok,
        sources,
        out,
        format=format,
        text_field=text_field,
        eot=eot,
        errors=errors,
        resume=resume,
        single_output=single_output,
        part=part,
    )
    jobs = [(name, _source(item)) for name, inputs in plan.todo for item in inputs]
    settings = plan.settings
    with ProgressBar() if progress is True else contextlib.nullcontext() as bar:
        callback = bar if progress is True else progress if callable(progress) else None
        try:
            result = _core.encode_dataset(
                engine,
                plan.out,
                jobs,
                settings["format"],
                settings["bits"],
                settings["eot_id"],
                settings["separator"],
                settings["text_field"],
                settings["skip"],
                num_threads,
                _chunk_size,
                plan.total,
                plan.record,
                callback,
            )
        except BaseException:
            # The shards finished before the error are complete: record them, unless that fails too
            # (a full disk), which must not hide the error.
            with contextlib.suppress(OSError):
                plan.save()
            raise
    return plan.finish(*result)


class _Recorder:
    """Keeps the manifest on disk: rewritten whole (atomically) after each shard while it lists fewer than
    :data:`_EVERY_SHARD_UNTIL` shards, then at most every :data:`_EVERY_SECONDS`, so that a set of tens of
    thousands of shards does not rewrite a growing file each time; the caller writes it at the end."""

    def __init__(self, path: str, manifest: dict[str, Any]) -> None:
        self.path, self.manifest = path, manifest
        self.unwritten = False
        self.written_at = time.monotonic()

    def add(self, record: dict[str, Any]) -> None:
        self.manifest["shards"].append(record)
        self.unwritten = True
        if (
            len(self.manifest["shards"]) < _EVERY_SHARD_UNTIL
            or time.monotonic() - self.written_at >= _EVERY_SECONDS
        ):
            self.write()

    def write(self) -> None:
        if self.unwritten:
            self.manifest["shards"].sort(key=lambda r: r["name"])
            write_atomically(self.path, _dumps(self.manifest))
            self.unwritten = False
            self.written_at = time.monotonic()


def _dumps(manifest: dict[str, Any]) -> str:
    import json

    return json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"


def _version() -> str:
    from . import __version__

    return __version__
