"""Training benchmark: bytepair against gigatoken, rustbpe and HF tokenizers on the same corpus, in one run.

How it measures, and why:

- Every (tool, corpus) run is a fresh child process (this script with ``--run``): no tool inherits another's
  heap, thread pools or caches, and the child's peak RSS is that tool's alone. A run is one training call
  on a whole file, so repeating it in one process would only measure warm caches and a grown heap.
- The child times the training call alone with a wall clock (imports, reading the result and writing its
  merges are outside) and prints a JSON line with the seconds and the number of merges made.
- The parent reads the child's peak RSS from ``os.wait4`` (``ru_maxrss``, KiB on Linux): the kernel's
  high-water mark of the whole process, native allocations included, which no in-process Python
  tracer sees. It includes the interpreter and the tool's imports (13-18 MB here).
- Runs beyond ``--timeout`` are killed and reported as "timeout". ``--repeat N`` runs N rounds, each
  tool once a round in turn (interleaved, so that a change in the machine's load falls on every tool
  alike), and reports each tool's median wall time and highest peak RSS. The corpus is read once
  first, so every tool starts from the page cache. Ratios are tool / gigatoken (< 1.0: faster or smaller
  than gigatoken): the wall ratio of each round, their median and the worst of them.

Each tool gets special token <|endoftext|> and the GPT-2 pre-tokenization pattern:

- bytepair:  ``train_bpe(path, vocab_size, special_tokens=[EOT])``.
- gigatoken: ``train_bpe(path, vocab_size, [EOT], tie_breaking="assembled_bytes")`` (GPT-2 pattern built
  in). It breaks ties by the concatenated bytes, not by the (left, right) pair as the CS336 reference and
  bytepair do, so its merges depart from bytepair's at some point; the notes say at which merge.
- rustbpe:   ``Tokenizer().train_from_iterator(docs, vocab_size - 1, pattern=GPT2_PATTERN)``, the pattern
  imported from ``bytepair.reference`` (so its peak RSS includes bytepair's import, about 8 MB). It has no
  special tokens, so it is fed the documents between the <|endoftext|> separators, read 1 MiB at a
  time (the split bytepair and gigatoken make themselves), and asked for one token fewer (its vocab_size
  counts only the 256 bytes and the merges) so that it makes as many merges as the others.
- hf:        ``Tokenizer(BPE())`` with the ByteLevel pre-tokenizer (GPT-2 pattern, no prefix space) and
  ``BpeTrainer(vocab_size, special_tokens=[EOT], initial_alphabet=ByteLevel.alphabet())``,
  ``train([path])``. Its trainer reads the file by lines and does not split at the special token.

Peers: ``pip install -r benchmarks/requirements.txt``. Usage:

    python benchmarks/train.py [--corpora DIR] [--corpus prose_en,code_c] [--tools bytepair,gigatoken,...]
                               [--timeout S] [--repeat N] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import lzma
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The project's shared data (the packed corpora and their build script), as benchmarks/README.md says.
SHARED = Path(os.environ.get("BYTEPAIR_SHARED", ROOT.parent / "shared"))
EOT = "<|endoftext|>"
CORPORA = {"prose_en": 10_000, "code_c": 32_000}
MODULES = {"bytepair": "bytepair", "gigatoken": "gigatoken", "rustbpe": "rustbpe", "hf": "tokenizers"}
RESULT = "RESULT "  # marks the child's JSON line: the tools print progress of their own to stdout
Merges = list[tuple[bytes, bytes]]


@dataclass
class Result:
    """One tool's measurement on one corpus, or why there is none."""

    seconds: float = 0.0
    rss_mb: float = 0.0
    merges: int = 0
    error: str | None = None


def documents(path: str) -> Iterator[str]:
    """The text of ``path`` between <|endoftext|> separators, read 1 MiB at a time."""
    rest = ""
    with open(path, encoding="utf-8", newline="") as f:
        while block := f.read(1 << 20):
            *parts, rest = (rest + block).split(EOT)
            yield from (p for p in parts if p)
    if rest:
        yield rest


def train(tool: str, path: str, vocab_size: int) -> tuple[float, Merges | int]:
    """Trains once; returns the seconds of the training call alone and the merges (their count, for
    tools that do not give them as byte pairs)."""
    if tool == "bytepair":
        import bytepair

        start = time.perf_counter()
        merges = bytepair.train_bpe(path, vocab_size, special_tokens=[EOT])[1]
        return time.perf_counter() - start, merges
    if tool == "gigatoken":
        import gigatoken

        start = time.perf_counter()
        merges = gigatoken.train_bpe(path, vocab_size, [EOT], tie_breaking="assembled_bytes")[1]
        return time.perf_counter() - start, merges
    if tool == "rustbpe":
        import rustbpe

        from bytepair.reference import GPT2_PATTERN

        tok = rustbpe.Tokenizer()
        start = time.perf_counter()
        tok.train_from_iterator(documents(path), vocab_size - 1, pattern=GPT2_PATTERN)
        return time.perf_counter() - start, len(tok.get_mergeable_ranks()) - 256
    if tool == "hf":
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        start = time.perf_counter()
        hf.train([path], trainer)
        return time.perf_counter() - start, len(json.loads(hf.to_str())["model"]["merges"])
    raise ValueError(f"unknown tool {tool!r}")


def child(tool: str, path: str, vocab_size: int, merges_out: str) -> None:
    """The ``--run`` mode: trains, writes byte-pair merges as hex pairs, prints the JSON result."""
    seconds, merges = train(tool, path, vocab_size)
    if isinstance(merges, list):
        with open(merges_out, "w") as f:
            f.writelines(f"{a.hex()} {b.hex()}\n" for a, b in merges)
    count = merges if isinstance(merges, int) else len(merges)
    print(RESULT + json.dumps({"seconds": seconds, "merges": count}), flush=True)


def run_once(tool: str, path: Path, vocab_size: int, merges_out: Path, timeout: float) -> Result:
    """One fresh child process: its own timing and merge count, and its peak RSS from ``os.wait4``."""
    args = [sys.executable, str(Path(__file__).resolve()), "--run", tool, str(path), str(vocab_size)]
    # Output goes to files, not pipes, so that a chatty child cannot block on a full pipe while the parent
    # only waits; its own session lets a timeout kill any helper processes with it.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [*args, str(merges_out)], stdout=out, stderr=err, text=True, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while not (waited := os.wait4(proc.pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                proc.returncode = -signal.SIGKILL
                return Result(error=f"timeout (> {timeout:.0f} s)")
            time.sleep(0.02)
        _, status, usage = waited
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        lines = [line for line in out.read().splitlines() if line.startswith(RESULT)]
        errors = err.read().strip().splitlines()
    if proc.returncode != 0 or not lines:
        reason = errors[-1][:100] if errors else f"exit status {proc.returncode}"
        return Result(error=f"failed: {reason}")
    data = json.loads(lines[-1][len(RESULT) :])
    return Result(seconds=data["seconds"], rss_mb=usage.ru_maxrss / 1024, merges=data["merges"])


def measure_rounds(
    tools: list[str], path: Path, vocab_size: int, tmp: Path, name: str, timeout: float, rounds: int
) -> tuple[dict[str, Result], dict[str, list[float]]]:
    """Runs every tool once a round, the tools in turn, for ``rounds`` rounds, so that a change in the
    machine's load falls on all of them alike. Returns each tool's median wall time and highest peak RSS
    (or its first failure, after which it is not run again), and each tool's wall time per round."""
    walls: dict[str, list[float]] = {tool: [] for tool in tools}
    rss: dict[str, float] = {tool: 0.0 for tool in tools}
    merges: dict[str, int] = {}
    failed = {
        tool: Result(error="not installed")
        for tool in tools
        if importlib.util.find_spec(MODULES[tool]) is None
    }
    for _ in range(rounds):
        for tool in tools:
            if tool in failed:
                continue
            r = run_once(tool, path, vocab_size, tmp / f"{name}-{tool}.hex", timeout)
            if r.error:
                failed[tool] = r
                continue
            walls[tool].append(r.seconds)
            rss[tool] = max(rss[tool], r.rss_mb)
            merges[tool] = r.merges
    results = {
        tool: failed.get(tool)
        or Result(seconds=statistics.median(walls[tool]), rss_mb=rss[tool], merges=merges[tool])
        for tool in tools
    }
    return results, walls


def first_difference(a: Path, b: Path) -> str:
    left, right = a.read_text().splitlines(), b.read_text().splitlines()
    index = next((i for i, (x, y) in enumerate(zip(left, right)) if x != y), min(len(left), len(right)))
    return "none: identical merges" if left == right else f"merge {index} (0-based)"


def corpus_path(corpora: Path, name: str) -> Path | None:
    """``corpora/NAME.txt``, decompressed from ``../shared/corpora/NAME.txt.xz`` if it is missing."""
    path = corpora / f"{name}.txt"
    packed = SHARED / "corpora" / f"{name}.txt.xz"
    if not path.exists() and packed.exists():
        print(f"decompressing {packed} to {path}", file=sys.stderr)
        corpora.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".txt.partial")
        with lzma.open(packed) as src, open(partial, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        partial.rename(path)  # never leave a truncated corpus under the real name
    return path if path.exists() else None


def names(allowed: list[str]) -> Callable[[str], list[str]]:
    """An argparse type: a comma-separated list of names from ``allowed``."""

    def parse(value: str) -> list[str]:
        chosen = [v for v in value.split(",") if v]
        unknown = sorted(set(chosen) - set(allowed))
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown)}; choose from {', '.join(allowed)}"
            )
        return chosen

    return parse


def bench_corpus(name: str, path: Path, args: argparse.Namespace, tmp: Path) -> tuple[list[str], list[str]]:
    """Runs every tool on one corpus; returns its table rows and its notes."""
    with open(path, "rb") as f:  # into the page cache, so that the first tool reads no disk
        while f.read(1 << 24):
            pass
    vocab = CORPORA[name]
    results, walls = measure_rounds(args.tools, path, vocab, tmp, name, args.timeout, args.repeat)
    for tool, r in results.items():
        print(
            f"{name} {tool}: {r.error or f'{r.seconds:.2f} s, {r.rss_mb:.0f} MB, {r.merges} merges'}",
            file=sys.stderr,
        )
    rows = []
    giga = results.get("gigatoken", Result(error="not run"))
    for tool, r in results.items():
        if r.error:
            rows.append(f"| {name} | {vocab} | {tool} | {r.error} | | | | |")
            continue
        if giga.error:
            wall = rounds = rss = "-"
        else:
            # Each round's ratio, of the two runs made one after the other; the median and the worst.
            per_round = [t / g for t, g in zip(walls[tool], walls["gigatoken"])]
            wall = f"{statistics.median(per_round):.2f} ({max(per_round):.2f})"
            rounds = ", ".join(f"{x:.2f}" for x in per_round)
            rss = f"{r.rss_mb / giga.rss_mb:.2f}"
        rows.append(
            f"| {name} | {vocab} | {tool} | {r.seconds:.2f} | {r.rss_mb:.0f} | {wall} | {rounds} | {rss} |"
        )
    made = ", ".join(f"{tool} {r.merges}" for tool, r in results.items() if not r.error)
    notes = [f"{name}: merges made: {made or 'none'}"]
    if not giga.error and not results.get("bytepair", Result(error="not run")).error:
        diff = first_difference(tmp / f"{name}-bytepair.hex", tmp / f"{name}-gigatoken.hex")
        notes.append(f"{name}: first merge where gigatoken differs from bytepair: {diff}")
    return rows, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", nargs=4, metavar=("TOOL", "PATH", "VOCAB", "OUT"), help=argparse.SUPPRESS)
    default_corpora = os.environ.get("BYTEPAIR_CORPORA", str(ROOT.parent / "corpora"))
    parser.add_argument("--corpora", type=Path, default=Path(default_corpora), help="dir of NAME.txt files")
    parser.add_argument("--corpus", type=names(list(CORPORA)), default=list(CORPORA))
    parser.add_argument("--tools", type=names(list(MODULES)), default=list(MODULES))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=1, help="rounds: every tool runs once a round")
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    if args.run:
        tool, path, vocab, merges_out = args.run
        child(tool, path, int(vocab), merges_out)
        return

    rows = [
        "| corpus | vocab | tool | wall s | peak RSS MB | wall vs gigatoken (worst) | per round "
        "| RSS vs gigatoken |",
        "|---|---|---|---:|---:|---:|---|---:|",
    ]
    notes = []
    with tempfile.TemporaryDirectory(prefix="bytepair-train-bench-") as tmp:
        for name in args.corpus:
            path = corpus_path(args.corpora, name)
            if path is None:
                notes.append(
                    f"{name}: skipped, {args.corpora}/{name}.txt is missing; build it (as root, a few "
                    f"minutes) with `python3 {SHARED}/corpora/build.py {args.corpora} {name}`"
                )
                continue
            corpus_rows, corpus_notes = bench_corpus(name, path, args, Path(tmp))
            rows += corpus_rows
            notes += corpus_notes
    installed = [tool for tool in args.tools if importlib.util.find_spec(MODULES[tool])]
    notes.append(
        "versions: "
        + (", ".join(f"{t} {importlib.metadata.version(MODULES[t])}" for t in installed) or "none")
    )
    report = "\n".join([*rows, "", *(f"- {note}" for note in notes)]) + "\n"
    print(report, end="")
    if args.markdown:
        args.markdown.write_text(report)


if __name__ == "__main__":
    main()
