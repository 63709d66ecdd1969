"""Training benchmark: bytepair against gigatoken, rustbpe and HF tokenizers, in one run.

Each (tool, corpus) run is a fresh child process (`--child`), so no tool inherits another's memory or
warm caches of its own. The child times only the training call and reports seconds and merges; the
parent reads the child's peak RSS from `os.wait4` (ru_maxrss, KiB on Linux). Ratios are against
gigatoken in the same run (< 1.0: faster or smaller than gigatoken).

How each peer is fed (each with special token <|endoftext|> where it supports one):
- bytepair:   train_bpe(path, vocab_size, ["<|endoftext|>"])
- gigatoken:  train_bpe(path, vocab_size, ["<|endoftext|>"], tie_breaking="assembled_bytes")
- rustbpe:    Tokenizer().train_from_iterator(documents, vocab_size, pattern=GPT-2) — it has no special
              tokens, so the file is streamed as documents split at <|endoftext|> lines.
- hf:         tokenizers BPE + ByteLevel pre-tokenizer + BpeTrainer, train([path]).

The merges of bytepair and gigatoken are compared: gigatoken breaks ties by the concatenated bytes, so
it departs from the reference at some merge; the table says where.

    python benchmarks/train.py [--corpora DIR] [--corpus prose_en,code_c] [--tools ...] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EOT = "<|endoftext|>"
CORPORA = {"prose_en": 10_000, "code_c": 32_000}
TOOLS = ["bytepair", "gigatoken", "rustbpe", "hf"]


def documents(path: str):
    """The documents of a corpus file, one at a time (they end with a line holding only EOT)."""
    lines: list[str] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.rstrip("\n") == EOT:
                yield "".join(lines)
                lines = []
            else:
                lines.append(line)
    if lines:
        yield "".join(lines)


def train(tool: str, path: str, vocab_size: int) -> list[tuple[bytes, bytes]] | None:
    """Trains with one tool; returns its merges as bytes pairs where the tool exposes them."""
    if tool == "bytepair":
        import bytepair

        return bytepair.train_bpe(path, vocab_size, [EOT])[1]
    if tool == "gigatoken":
        import gigatoken

        return gigatoken.train_bpe(path, vocab_size, [EOT], tie_breaking="assembled_bytes")[1]
    if tool == "rustbpe":
        import rustbpe

        import bytepair

        rustbpe.Tokenizer().train_from_iterator(documents(path), vocab_size, pattern=bytepair.GPT2_PATTERN)
        return None
    if tool == "hf":
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train([path], trainer)
        return None
    raise ValueError(tool)


def child(tool: str, path: str, vocab_size: int, merges_out: str) -> None:
    start = time.perf_counter()
    merges = train(tool, path, vocab_size)
    seconds = time.perf_counter() - start
    if merges is not None:
        with open(merges_out, "w") as f:
            f.writelines(f"{a.hex()} {b.hex()}\n" for a, b in merges)
    print(json.dumps({"seconds": seconds, "merges": None if merges is None else len(merges)}))


def run(tool: str, path: Path, vocab_size: int, merges_out: str, timeout: float) -> dict:
    """Runs one child; returns seconds, merges and peak RSS, or an error."""
    args = [sys.executable, __file__, "--child", tool, str(path), str(vocab_size), merges_out]
    # Output goes to files, not pipes: a chatty child (gigatoken logs to stdout) cannot block on a full
    # pipe while the parent waits for it.
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        proc = subprocess.Popen(args, stdout=out_f, stderr=err_f, text=True)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                return {"error": f"timeout ({timeout:.0f} s)"}
            time.sleep(0.05)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if status != 0:
        last = (err.strip().splitlines() or [f"exit status {status}"])[-1]
        return {"error": "not installed" if "ModuleNotFoundError" in err else last[:80]}
    result = json.loads(out.strip().splitlines()[-1])
    result["rss_mb"] = usage.ru_maxrss / 1024
    return result


def first_difference(a: str, b: str) -> str:
    with open(a) as fa, open(b) as fb:
        left, right = fa.read().splitlines(), fb.read().splitlines()
    for i, (x, y) in enumerate(zip(left, right)):
        if x != y:
            return f"merge {i}"
    return "none" if len(left) == len(right) else f"merge {min(len(left), len(right))}"


def corpus_path(corpora: Path, name: str) -> Path | None:
    path = corpora / f"{name}.txt"
    packed = ROOT.parent / "shared" / "corpora" / f"{name}.txt.xz"
    if not path.exists() and packed.exists():
        corpora.mkdir(parents=True, exist_ok=True)
        with lzma.open(packed) as src, open(path, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
    return path if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    default_corpora = os.environ.get("BYTEPAIR_CORPORA", str(ROOT.parent / "corpora"))
    parser.add_argument("--corpora", type=Path, default=Path(default_corpora))
    parser.add_argument("--corpus", default=",".join(CORPORA))
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--repeat", type=int, default=1, help="best wall time of N runs")
    args = parser.parse_args()
    if args.child:
        tool, path, vocab, merges_out = args.child
        child(tool, path, int(vocab), merges_out)
        return
    rows = [
        "| corpus | vocab | tool | wall s | peak RSS MB | wall vs gigatoken | RSS vs gigatoken |",
        "|---|---|---|---|---|---|---|",
    ]
    notes = []
    tmp = tempfile.mkdtemp(prefix="bytepair-bench-")
    for name in args.corpus.split(","):
        path = corpus_path(args.corpora, name)
        if path is None:
            notes.append(
                f"{name}: missing; build it with `python3 ../shared/corpora/build.py {args.corpora} {name}`"
            )
            continue
        vocab = CORPORA[name]
        results = {}
        for tool in args.tools.split(","):
            runs = [
                run(tool, path, vocab, f"{tmp}/{name}-{tool}.txt", args.timeout) for _ in range(args.repeat)
            ]
            ok = [r for r in runs if "error" not in r]
            results[tool] = min(ok, key=lambda r: r["seconds"]) if ok else runs[0]
            print(f"{name} {tool}: {results[tool]}", file=sys.stderr)
        giga = results.get("gigatoken", {})
        for tool, r in results.items():
            if "error" in r:
                rows.append(f"| {name} | {vocab} | {tool} | {r['error']} | | | |")
                continue
            wall = f"{r['seconds'] / giga['seconds']:.2f}" if "seconds" in giga else "-"
            rss = f"{r['rss_mb'] / giga['rss_mb']:.2f}" if "rss_mb" in giga else "-"
            rows.append(
                f"| {name} | {vocab} | {tool} | {r['seconds']:.2f} | {r['rss_mb']:.0f} | {wall} | {rss} |"
            )
        if "error" not in results.get("bytepair", {"error": 1}) and "seconds" in giga:
            diff = first_difference(f"{tmp}/{name}-bytepair.txt", f"{tmp}/{name}-gigatoken.txt")
            notes.append(f"{name}: first merge where gigatoken differs from bytepair: {diff}")
    print("\n".join(rows))
    print("\n".join(notes))


if __name__ == "__main__":
    main()
