"""The ``bytepair`` command line (also ``python -m bytepair``); ``bytepair COMMAND --help`` explains each.

A tokenizer lives in a folder DIR: ``vocab.json`` and ``merges.txt`` (GPT-2's format) and
``special_tokens.json``, as :meth:`bytepair.Tokenizer.save` writes and ``from_dir`` reads. Progress bars
go to stderr only when it is a terminal. Every error is one line ``bytepair: error: ...`` on stderr and
exit status 1 (2 for bad usage, 130 for Ctrl-C, 143 for SIGTERM, which cleans up as Ctrl-C does: no
temporary file is left behind).
"""

from __future__ import annotations

import argparse
import codecs
import os
import resource
import signal
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import PreTokenCounts, Tokenizer, count_pretokens, shards, train_bpe, train_from_counts
from ._common import check_num_threads, check_special_tokens, special_token_ids
from ._progress import ProgressBar
from .dataset import encode_dataset
from .report import write_report
from .sources import resolve, shard
from .stats import bytes_per_token, describe_token, length_histogram, longest_tokens, vocab_stats

if TYPE_CHECKING:
    import numpy as np

DEFAULT_SPECIAL_TOKEN = "<|endoftext|>"
DEFAULT_CORPUS_VOCAB_SIZE = 1000
_DECODE_BLOCK = 1 << 20  # ids
_INSPECT_HISTOGRAM_CAP = 16  # longer tokens share the last line


class _Formatter(argparse.HelpFormatter):
    """Wraps paragraphs but leaves lines that start with two spaces (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(
            line if line.startswith("  ") else super(_Formatter, self)._fill_text(line, width, indent)
            for line in text.split("\n")
        )


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line, like every other error, and examples in the help."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(formatter_class=_Formatter, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def default_corpus_files() -> list[str]:
    """The standard library's ``.py`` files that are UTF-8 (a few test files are Latin-1 on purpose),
    sorted by path as ``pathlib`` sorts, folder by folder: a corpus every machine with Python has.

    >>> files = default_corpus_files()
    >>> any(f.endswith(os.sep + "heapq.py") for f in files), all(f.endswith(".py") for f in files)
    (True, True)
    """
    root = sysconfig.get_paths()["stdlib"]
    candidates = []
    for folder, subfolders, names in os.walk(root):
        # Installed packages are not the standard library, and a site-packages can hold many times its
        # files: their folders are not walked at all.
        subfolders[:] = [d for d in subfolders if d not in ("site-packages", "dist-packages")]
        candidates += [os.path.join(folder, name) for name in names if name.endswith(".py")]
    files = []
    for path in sorted(candidates, key=lambda p: p.split(os.sep)):
        # The engine stops at a file that is not UTF-8 rather than skip it, so each file is checked here
        # first; the engine then reads it from the page cache.
        try:
            with open(path, "rb") as f:
                f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        files.append(path)
    return files


class _PhaseClock:
    """Forwards progress to a bar and notes when the last report of each phase came."""

    def __init__(self, bar: ProgressBar) -> None:
        self.bar = bar
        self.last: dict[str, float] = {}

    def __call__(self, phase: str, done: int, total: int, **details: Any) -> None:
        self.last[phase] = time.monotonic()
        self.bar(phase, done, total, **details)


def _peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _train(args: argparse.Namespace) -> None:
    specials = check_special_tokens(args.special_token)
    vocab_size = args.vocab_size
    if args.from_counts:
        if args.input:
            raise ValueError("give INPUT sources or --from-counts, not both")
        if args.ray is not None:
            raise ValueError("--ray counts on a cluster: --from-counts trains on counts already made")
        if vocab_size is None:
            raise ValueError("--vocab-size is required with --from-counts")
        _train_from_counts(args, specials, vocab_size)
        return
    if not args.input:
        specials = specials or [DEFAULT_SPECIAL_TOKEN]
        vocab_size = DEFAULT_CORPUS_VOCAB_SIZE if vocab_size is None else vocab_size
        paths = default_corpus_files()
        source = f"the Python standard library ({len(paths):,} .py files, each its own document)"
    elif vocab_size is None:
        raise ValueError("--vocab-size is required with INPUT files")
    else:
        paths = args.input
        source = paths[0] if len(paths) == 1 else f"{len(paths)} files"
    os.makedirs(args.out, exist_ok=True)  # fail before training, not after
    start = time.monotonic()
    stats: dict[str, Any] = {}
    with ProgressBar() as bar:
        clock = _PhaseClock(bar)
        options: dict[str, Any] = {"text_field": args.text_field, "errors": args.errors, "stats": stats}
        if args.ray is None:
            vocab, merges = train_bpe(
                paths, vocab_size, specials, num_threads=args.threads, progress=clock, **options
            )
        else:
            from . import ray

            vocab, merges = ray.train_bpe(
                paths, vocab_size, specials, address=args.ray or None, progress=clock, **options
            )
    trained = time.monotonic()
    Tokenizer(vocab, merges, specials).save(args.out)
    size, tokens = stats["bytes"], stats["tokens"]
    counted = clock.last.get("count", trained)
    print(f"trained on {source}: {size / 1e6:,.1f} MB, {stats['distinct_pretokens']:,} distinct pre-tokens")
    count_seconds = max(counted - start, 1e-9)
    print(f"  pre-tokenizing and counting {count_seconds:8.2f} s  ({size / 1e6 / count_seconds:,.0f} MB/s)")
    print(f"  merging                     {trained - counted:8.2f} s  ({len(merges):,} merges)")
    _print_trained(args.out, vocab, merges, specials)
    if tokens is not None:
        ratio = bytes_per_token(size, tokens)
        print(f"compression on the training text: {ratio:.2f} bytes per token ({tokens:,} tokens)")
    if "skipped" in stats:
        print(f"skipped {stats['skipped']:,} bad records")
    print(f"wrote {args.out}/ (vocab.json, merges.txt, special_tokens.json)")


def _print_trained(out: str, vocab: dict[int, bytes], merges: list[Any], specials: list[str]) -> None:
    print(f"peak memory {_peak_memory_mb():,.0f} MB")
    print(f"vocab {len(vocab):,}: 256 bytes, {len(merges):,} merges, special tokens {specials}")
    print("longest tokens: " + ", ".join(describe_token(t) for t in longest_tokens(vocab, specials, 5)))


def _train_from_counts(args: argparse.Namespace, specials: list[str], vocab_size: int) -> None:
    total = PreTokenCounts()
    for path in args.from_counts:
        total += PreTokenCounts.load(path)
    specials = specials or (total.special_tokens or [])
    os.makedirs(args.out, exist_ok=True)  # fail before training, not after
    start = time.monotonic()
    with ProgressBar() as bar:
        vocab, merges = train_from_counts(total, vocab_size, specials, progress=bar)
    Tokenizer(vocab, merges, specials).save(args.out)
    print(
        f"trained on the counts of {len(args.from_counts)} files: {total.bytes / 1e6:,.1f} MB, "
        f"{total.documents:,} documents, {len(total):,} distinct pre-tokens"
    )
    print(f"  merging {time.monotonic() - start:8.2f} s  ({len(merges):,} merges)")
    _print_trained(args.out, vocab, merges, specials)
    if total.skipped:
        print(f"the counts skipped {total.skipped:,} bad records")
    print(f"wrote {args.out}/ (vocab.json, merges.txt, special_tokens.json)")


def _part(args: argparse.Namespace) -> tuple[int, int] | None:
    """(--shard-index, --num-shards), or None without them."""
    if (args.shard_index is None) != (args.num_shards is None):
        raise ValueError("--shard-index and --num-shards go together")
    if args.num_shards is None:
        return None
    if args.num_shards < 1:
        raise ValueError(f"--num-shards must be at least 1, not {args.num_shards}")
    return args.shard_index, args.num_shards


def _count(args: argparse.Namespace) -> None:
    specials = check_special_tokens(args.special_token)
    part = _part(args)
    files = resolve(args.input).files
    if part is not None:
        files = shard(files, *part)
    start = time.monotonic()
    if args.ray is not None and files:
        from . import ray

        counts = ray.count_pretokens(
            [f.path for f in files],
            specials,
            text_field=args.text_field,
            errors=args.errors,
            address=args.ray or None,
            progress=True,
        )
    else:
        with ProgressBar() as bar:
            counts = count_pretokens(
                [f.path for f in files] if files else iter([]),
                specials,
                text_field=args.text_field,
                errors=args.errors,
                num_threads=args.threads,
                progress=bar,
            )
    seconds = max(time.monotonic() - start, 1e-9)
    counts.save(args.output)
    part = "" if args.num_shards is None else f" (part {args.shard_index} of {args.num_shards})"
    size = sum(f.size for f in files)
    print(
        f"counted {len(files):,} files{part}: {size / 1e6:,.1f} MB in {seconds:.2f} s, "
        f"{counts.documents:,} documents, {counts.total():,} pre-tokens, {len(counts):,} distinct"
    )
    print(f"peak memory {_peak_memory_mb():,.0f} MB")
    print(f"wrote {args.output}")
    if args.errors == "skip":
        print(f"skipped {counts.skipped:,} bad records" + (", the first:" if counts.skipped else ""))
        for message in counts.skipped_errors:
            print(f"  {message}")


def _encode(args: argparse.Namespace) -> None:
    tok = Tokenizer.from_dir(args.dir)
    one_file = args.format is None and _one_text_file(args.input)
    if one_file and not (args.output.endswith(("/", os.sep)) or os.path.isdir(args.output)):
        if args.ray is not None:
            raise ValueError("--ray writes token shards into a directory: give --format, or OUT/")
        _encode_file(args, tok)
        return
    part = _part(args)
    start = time.monotonic()
    options: dict[str, Any] = {
        "format": args.format or "megatron",
        "text_field": args.text_field,
        "eot": args.eot if not args.no_eot else False,
        "errors": args.errors,
        "single_output": args.single_output or False,
    }
    if args.ray is not None:
        if part is not None:
            raise ValueError("--ray writes every shard: --shard-index and --num-shards are for job arrays")
        from . import ray

        summary = ray.encode_dataset(
            tok, args.input, args.output, address=args.ray or None, progress=True, **options
        )
    else:
        with ProgressBar() as bar:
            summary = encode_dataset(
                tok,
                tok._encoder,
                args.input,
                args.output,
                num_threads=args.threads,
                progress=bar,
                part=part,
                **options,
            )
    seconds = max(time.monotonic() - start, 1e-9)
    print(summary)
    print(
        f"{summary.input_bytes / 1e6 / seconds:,.1f} MB/s of input, peak memory {_peak_memory_mb():,.0f} MB"
    )
    for message in summary.skipped_errors:
        print(f"  skipped: {message}")


def _one_text_file(inputs: list[str]) -> bool:
    """Whether ``inputs`` is one uncompressed text file (a ``.txt``, or a name that gives no kind: a FIFO,
    ``/dev/stdin``)."""
    if len(inputs) != 1 or not os.path.exists(inputs[0]) or os.path.isdir(inputs[0]):
        return False
    (f,) = resolve(inputs[0]).files
    return (f.format, f.compression) == ("txt", None)


def _encode_file(args: argparse.Namespace, tok: Tokenizer) -> None:
    """``bytepair encode DIR INPUT -o OUT.npy``: one text file into one array, as before shards."""
    (path,) = args.input
    size = os.path.getsize(path)
    start = time.monotonic()
    tokens = tok.encode_file(path, args.output, num_threads=args.threads, progress=True)
    seconds = max(time.monotonic() - start, 1e-9)
    dtype = "uint16" if tok.vocab_size <= 1 << 16 else "uint32"  # encode_file's choice
    print(
        f"encoded {path}: {size / 1e6:,.1f} MB into {tokens:,} tokens in {seconds:.2f} s "
        f"({size / 1e6 / seconds:,.1f} MB/s), {bytes_per_token(size, tokens):.2f} bytes per token"
    )
    print(f"wrote {args.output} ({dtype})")


def _shards(args: argparse.Namespace) -> None:
    shard_set = shards.open(args.out)
    manifest = shard_set.manifest
    tokens = shard_set.tokens
    text = sum(s.record.get("text_bytes", 0) for s in shard_set.shards)
    files = 2 * len(shard_set.shards)
    print(f"{args.out}: {len(shard_set.shards):,} shard(s), {manifest['format']}, ids as {manifest['dtype']}")
    print(f"  documents        {shard_set.documents:,}")
    print(f"  tokens           {tokens:,}")
    print(f"  bytes per token  {bytes_per_token(text, tokens):.2f} (of text)")
    print(f"  tokenizer        sha256 {shard_set.tokenizer} ({manifest['tokenizer']['vocab_size']:,} ids)")
    print(f"  end of text      {manifest['eot']!r}")
    shard_set.verify()
    print(f"checksums ok ({files:,} files)")


def _load_ids(path: str, vocab_size: int) -> np.ndarray:
    import pickle

    import numpy as np

    try:
        ids = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError, pickle.UnpicklingError):
        raise ValueError(f"{path}: not a NumPy .npy file") from None
    if not isinstance(ids, np.ndarray) or ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError(f"{path}: expected a 1-D array of integer ids (a .npy from bytepair encode)")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = ids.min() if ids.min() < 0 else ids.max()
        raise ValueError(f"{path}: id {bad} is out of range (the vocabulary has ids 0 to {vocab_size - 1})")
    return ids


def _decode(args: argparse.Namespace) -> None:
    tok = Tokenizer.from_dir(args.dir)
    ids = _load_ids(args.ids, tok.vocab_size)
    vocab = tok.vocab
    table = [vocab.get(i) for i in range(tok.vocab_size)]
    # Block by block, in bounded memory; the incremental decoder gives the same text as decoding all the
    # bytes at once, even where a block ends inside a character.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for start in range(0, len(ids), _DECODE_BLOCK):
        block = ids[start : start + _DECODE_BLOCK].tolist()
        tokens = [table[i] for i in block]
        if None in tokens:
            raise ValueError(f"{args.ids}: id {block[tokens.index(None)]} is not in the vocabulary")
        sys.stdout.buffer.write(decoder.decode(b"".join(tokens)).encode("utf-8"))
    sys.stdout.buffer.write(decoder.decode(b"", final=True).encode("utf-8"))
    sys.stdout.buffer.flush()


def _show_split(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    vocab = tok.vocab
    size = len(text.encode("utf-8"))
    ratio = bytes_per_token(size, len(ids))
    print(f"\n{text!r}: {size:,} bytes -> {len(ids):,} tokens, {ratio:.2f} bytes per token")
    print("|" + "|".join(describe_token(vocab[i], quote=False) for i in ids) + "|")
    print(ids)


def _inspect(args: argparse.Namespace) -> None:
    tok = Tokenizer.from_dir(args.dir)
    vocab, specials = tok.vocab, tok.special_tokens
    stats = vocab_stats(vocab, specials)
    print(
        f"{args.dir}: {len(vocab):,} tokens: {stats.single_bytes:,} bytes, "
        f"{len(tok.merges):,} merges, special tokens {specials}"
    )
    print(
        f"token length in bytes: mean {stats.mean_length:.2f}, "
        f"median {stats.median_length}, longest {stats.longest}"
    )
    histogram = length_histogram(vocab, specials, _INSPECT_HISTOGRAM_CAP)
    for length, count in histogram.items():
        label = f"{length}+" if length == _INSPECT_HISTOGRAM_CAP else str(length)
        bar = "#" * max(1, round(50 * count / stats.tokens)) if count else ""
        print(f"  {label:>3} {bar:<50} {count:,}")
    spaced = stats.space_prefixed
    print(f"tokens starting with a space: {spaced:,} ({100 * spaced / stats.tokens:.0f}%)")
    print("longest tokens: " + ", ".join(describe_token(t) for t in longest_tokens(vocab, specials, 10)))
    if args.text is not None:
        _show_split(tok, args.text)


def _export(args: argparse.Namespace) -> None:
    tok = Tokenizer.from_dir(args.dir)
    if args.format == "hf":
        tok.to_hf(args.output)
        print(f"wrote {args.output}; load it with tokenizers.Tokenizer.from_file({args.output!r})")
        return
    tok.to_tiktoken(args.output)
    special_ids = special_token_ids(tok.vocab, tok.special_tokens)
    print(
        f"wrote {args.output}; load it with\n"
        f"  tiktoken.Encoding('bytepair', pat_str=bytepair.GPT2_PATTERN, "
        f"mergeable_ranks=tiktoken.load.load_tiktoken_bpe({args.output!r}), special_tokens={special_ids})"
    )


def _report(args: argparse.Namespace) -> None:
    folders = [args.dir] + ([args.dir2] if args.dir2 else [])
    names = [os.path.basename(os.path.normpath(folder)) or folder for folder in folders]
    if len(set(names)) < len(names):
        names = folders  # tok/ and other/tok/: the paths tell them apart
    tokenizers = {name: Tokenizer.from_dir(folder) for name, folder in zip(names, folders)}
    # progress=True: a bar of its own for each encoding, so each starts at zero on a new line.
    results = write_report(tokenizers, args.corpus, args.output, num_threads=args.threads, progress=True)
    for r in results:
        print(
            f"{r.tokenizer} on {r.corpus}: {r.bytes_per_token:.2f} bytes per token, "
            f"{100 * r.vocab_share:.0f}% of the vocab used"
        )
    print(f"wrote {args.output}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="bytepair",
        description="Train, use, inspect and export byte-level BPE tokenizers (GPT-2 style). A tokenizer is "
        "a folder DIR holding vocab.json, merges.txt and special_tokens.json, as 'train' writes it.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def command(
        run: Callable[[argparse.Namespace], None], summary: str, description: str, *examples: str
    ) -> argparse.ArgumentParser:
        """A subcommand named after ``run`` (``_train`` -> ``train``); all but train take DIR first."""
        name = run.__name__.lstrip("_")
        sub = commands.add_parser(
            name, help=summary, description=description, epilog="examples:\n" + "\n".join(examples)
        )
        if name not in ("train", "count", "shards"):
            sub.add_argument("dir", metavar="DIR", help="tokenizer folder")
        sub.set_defaults(run=run)
        return sub

    def threads(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--threads", type=_threads_arg, metavar="N", help="threads (default: every core)")

    def on_ray(sub: argparse.ArgumentParser, what: str) -> None:
        sub.add_argument(
            "--ray",
            nargs="?",
            const="",
            metavar="ADDRESS",
            help=f"{what} on a Ray cluster (pip install 'bytepair[ray]'): ADDRESS is 'auto' (the cluster "
            "'ray start' runs on this machine) or the head node's HOST:PORT; --ray alone uses RAY_ADDRESS, "
            "or starts a local cluster for the command. The results are those of one machine.",
        )

    def parts(sub: argparse.ArgumentParser, verb: str) -> None:
        sub.add_argument(
            "--shard-index", type=int, metavar="I", help=f"{verb} only part I (from 0) of --num-shards"
        )
        sub.add_argument(
            "--num-shards", type=int, metavar="N", help="the number of parts (with --shard-index)"
        )

    def records(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--text-field",
            default="text",
            metavar="F",
            help="the JSON lines field or Parquet column of the text (default: text)",
        )
        sub.add_argument(
            "--errors",
            choices=["strict", "skip"],
            default="strict",
            help="stop at the first bad record (strict, the default), or skip bad records and count them",
        )
        threads(sub)

    def sources(sub: argparse.ArgumentParser) -> None:
        records(sub)
        sub.add_argument(
            "--special-token",
            action="append",
            default=[],
            metavar="TOK",
            help="e.g. '<|endoftext|>'; repeatable",
        )

    train = command(
        _train,
        "train a tokenizer on text, JSON lines or Parquet files, or on saved counts",
        "Trains a vocabulary of --vocab-size tokens on INPUT sources, writes DIR, and prints a summary. A "
        "source is a file, a directory (its files, recursively) or a glob pattern: .txt, .jsonl or .json "
        "(JSON lines), each possibly .gz, .zst or .xz, and .parquet; every file and record is its own "
        "document (no token spans two). Or trains on the counts that 'bytepair count' saved, added up "
        "(--from-counts), exactly as on the text they count. With no INPUT it trains on the Python standard "
        "library's own .py files, with special token <|endoftext|> unless one is given and --vocab-size "
        f"{DEFAULT_CORPUS_VOCAB_SIZE} unless given.",
        "  bytepair train corpus.txt --vocab-size 10000 --special-token '<|endoftext|>' --out tok",
        "  bytepair train 'fineweb/*.parquet' --vocab-size 32000 --special-token '<|endoftext|>' --out tok",
        "  bytepair train --from-counts counts-*.bpc --vocab-size 32000 --out tok",
        "  bytepair train --out stdlib-tok",
    )
    train.add_argument(
        "input",
        nargs="*",
        metavar="INPUT",
        help="files, directories, patterns (default: the standard library)",
    )
    train.add_argument(
        "--from-counts", nargs="+", metavar="FILE.bpc", help="train on these counts (bytepair count) added up"
    )
    train.add_argument(
        "--vocab-size", type=int, metavar="N", help="tokens in all: 256 bytes + merges + special tokens"
    )
    train.add_argument(
        "--out", default=".", metavar="DIR", help="folder to write the tokenizer to (default: .)"
    )
    sources(train)
    on_ray(train, "count")

    count = command(
        _count,
        "count the pre-tokens of sources into a counts file, for training later",
        "Counts the pre-tokens of INPUT sources (files, directories, glob patterns; as for 'train') and "
        "saves them to a compact counts file, written whole or not at all. Counts of parts of a corpus, "
        "counted anywhere, add up to the counts of the whole: 'bytepair train --from-counts' trains on "
        "them exactly as on the text. --shard-index I --num-shards N counts only the I-th (from 0) of N "
        "parts of the sorted file list, contiguous and about equal in bytes, for job arrays (Slurm).",
        "  bytepair count 'data/*.jsonl.zst' --special-token '<|endoftext|>' -o counts.bpc",
        "  bytepair count data/ --shard-index $I --num-shards 64 -o counts-$I.bpc  # I=$SLURM_ARRAY_TASK_ID",
    )
    count.add_argument("input", nargs="+", metavar="INPUT", help="files, directories, glob patterns")
    count.add_argument("-o", "--output", required=True, metavar="OUT.bpc", help="the counts file to write")
    parts(count, "count")
    sources(count)
    on_ray(count, "count")

    encode = command(
        _encode,
        "encode sources into token shards for training, or a text file into a .npy array",
        "Encodes every document of INPUT sources (files, directories, glob patterns: .txt, JSON lines, "
        "Parquet; as for 'train') with the tokenizer in DIR into token shards in the directory OUT, one "
        "per input, in --format megatron (Megatron-LM's .bin/.idx, the default), bin (nanoGPT's raw ids, "
        "with .idx.npy document offsets) or npy (.npy ids and .offsets.npy), with the end-of-text token "
        "after each document (unless --no-eot), and a manifest. Rerun the same command after an "
        "interruption: complete shards are skipped. 'bytepair shards OUT' describes and checks them. "
        "--shard-index I --num-shards N makes only the I-th of N parts of the inputs' shards, for job "
        "arrays writing into one OUT. With one uncompressed text file INPUT and no --format, OUT is one "
        ".npy array of all its ids instead, as before shards (uint16 when the vocabulary fits, else "
        "uint32), unless OUT is a directory.",
        "  bytepair encode tok 'fineweb/*.parquet' -o shards --format megatron",
        "  bytepair encode tok data/ -o shards --format bin --shard-index $I --num-shards 16",
        "  bytepair encode tok corpus.txt -o corpus.npy",
    )
    encode.add_argument("input", nargs="+", metavar="INPUT", help="files, directories, glob patterns")
    encode.add_argument(
        "-o", "--output", required=True, metavar="OUT", help="the shard directory (or an OUT.npy file)"
    )
    encode.add_argument(
        "--format", choices=["megatron", "bin", "npy"], help="shard format (default: megatron)"
    )
    encode.add_argument(
        "--eot", default=True, metavar="TOK", help="the end-of-text token (default: <|endoftext|>)"
    )
    encode.add_argument("--no-eot", action="store_true", help="write no end-of-text token after documents")
    encode.add_argument(
        "--single-output", metavar="NAME", help="one shard NAME of all the inputs instead of one per input"
    )
    parts(encode, "make")
    records(encode)
    on_ray(encode, "encode")

    shard_set = command(
        _shards,
        "describe a shard directory and verify its checksums",
        "Prints what the token shards in OUT hold (documents, tokens, bytes of text per token, the "
        "tokenizer's SHA-256) and checks every file's size and CRC-32 against the manifest; exits 1 on a "
        "mismatch.",
        "  bytepair shards shards/",
    )
    shard_set.add_argument("out", metavar="OUT", help="a directory that 'bytepair encode' wrote")

    decode = command(
        _decode,
        "print the text of a .npy array of ids",
        "Decodes the ids in IDS.npy with the tokenizer in DIR and prints the text (bytes that are not UTF-8 "
        "print as U+FFFD).",
        "  bytepair decode tok corpus.npy | less",
    )
    decode.add_argument("ids", metavar="IDS.npy", help="a 1-D .npy array of ids, as 'encode' writes")

    inspect = command(
        _inspect,
        "vocabulary statistics, and TEXT split into tokens",
        "Prints the vocabulary's size, token lengths and longest tokens, and, given TEXT, the tokens TEXT "
        "is split into with their ids.",
        '  bytepair inspect tok "Hello, world! It\'s 2026."',
    )
    inspect.add_argument("text", metavar="TEXT", nargs="?", help="text to show split into tokens")

    export = command(
        _export,
        "write a HF tokenizer.json or a tiktoken rank file",
        "Writes the tokenizer in DIR as a HF tokenizer.json (tokenizers.Tokenizer.from_file) or a .tiktoken "
        "rank file (tiktoken.load.load_tiktoken_bpe); both encode exactly as bytepair does. In Python, "
        "Tokenizer.from_hf(path) and Tokenizer.from_tiktoken(path, special_tokens) read them back.",
        "  bytepair export tok --format hf -o tokenizer.json",
        "  bytepair export tok --format tiktoken -o tok.tiktoken",
    )
    export.add_argument("--format", required=True, choices=["hf", "tiktoken"], help="file format")
    export.add_argument("-o", "--output", required=True, metavar="PATH", help="file to write")

    report = command(
        _report,
        "an HTML report: compression, token lengths, vocab use; two tokenizers side by side",
        "Encodes each corpus with the tokenizer in DIR (and DIR2: side by side) and writes one "
        "self-contained HTML page with inline SVG charts: bytes per token per corpus, the share of the "
        "vocabulary each corpus uses, token length histograms and the longest tokens.",
        "  bytepair report prose-tok code-tok --corpus prose.txt --corpus code.txt -o report.html",
    )
    report.add_argument("dir2", metavar="DIR2", nargs="?", help="a second tokenizer folder, side by side")
    report.add_argument(
        "--corpus",
        action="extend",
        nargs="+",
        required=True,
        metavar="FILE",
        help="UTF-8 text files: --corpus A B, or --corpus A --corpus B",
    )
    report.add_argument("-o", "--output", required=True, metavar="report.html", help="the HTML file to write")
    threads(report)
    return parser


def _error_message(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e) or ("out of memory" if isinstance(e, MemoryError) else type(e).__name__)


class _Terminated(KeyboardInterrupt):
    """SIGTERM (from ``timeout``, ``kill``), raised in the main thread as Ctrl-C is, so that the engine
    stops at its next check and ``finally`` blocks remove temporary files, instead of the process dying
    with them on disk."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


def _threads_arg(text: str) -> int | None:
    """``--threads N``, by the rule of every ``num_threads``."""
    try:
        value: object = int(text)
    except ValueError:
        value = text
    try:
        return check_num_threads(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv: list[str] | None = None) -> int:
    """Runs the command line with ``argv`` (default: ``sys.argv[1:]``) and returns the exit status.

    >>> import bytepair, tempfile
    >>> d = tempfile.mkdtemp()
    >>> bytepair.Tokenizer({i: bytes([i]) for i in range(256)} | {256: b"hi"}, [(b"h", b"i")]).save(d)
    >>> main(["inspect", d, "hi!"])  # doctest: +ELLIPSIS
    /...: 257 tokens: 256 bytes, 1 merges, special tokens []
    token length in bytes: mean 1.00, median 1, longest 2
    ...
    'hi!': 3 bytes -> 2 tokens, 1.50 bytes per token
    |hi|!|
    [256, 33]
    0
    """
    # Signal handlers can only be set from the main thread (a test may call main from another).
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    try:
        # Parsing too: out of memory, building the parser (its first use imports modules) is as likely
        # to fail as the command.
        args = _parser().parse_args(argv)
        args.run(args)
    except (OSError, ValueError, TypeError, OverflowError, RuntimeError, MemoryError) as e:
        if isinstance(e, BrokenPipeError):  # `bytepair decode ... | head`: the reader has enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        print(f"bytepair: error: {_error_message(e)}", file=sys.stderr)
        return 1
    except _Terminated:
        print("bytepair: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("bytepair: interrupted", file=sys.stderr)
        return 130
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    return 0
