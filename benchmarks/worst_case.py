"""Worst-case inputs for encoding: long runs that make naive BPE quadratic.

Times `encode` of 1 MB of one letter, of spaces, of one digit, of one emoji and of "ab" repeated, and
reports each as a multiple of the per-byte time of 1 MB of ordinary prose (goal: at most 5x). A
bytepair Tokenizer keeps its caches between calls, which speeds up prose but not long runs (pieces
that long are never cached), so bytepair is timed twice: *cold*, a fresh Tokenizer for every call, and
*warm*, one Tokenizer called again on the same text. tiktoken is measured alongside, on the same GPT-2
ranks, when installed. One process, best of --repeat runs each; pin it with `taskset -c 0` for one
core.

    python benchmarks/worst_case.py [--shared DIR] [--repeat 3]

The prose and the GPT-2 vocabulary come from the project's shared data (``--shared DIR``, else
``$BYTEPAIR_SHARED``, else ``../shared`` beside the repository): ``corpora/prose_en.txt.xz`` and
``fixtures/cs336/``.
"""

from __future__ import annotations

import argparse
import lzma
import os
import time
from pathlib import Path
from typing import Callable

import bytepair

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "1 MB 'a'": "a" * 1_000_000,
    "1 MB spaces": " " * 1_000_000,
    "1 MB '7'": "7" * 1_000_000,
    "1 MB emoji": "\U0001f642" * 250_000,
    "1 MB 'ab'": "ab" * 500_000,
}


def best_ns_per_byte(make: Callable[[], Callable[[str], object]], text: str, repeat: int) -> float | str:
    """Best time per byte of ``make()(text)`` (``make`` is not timed), or the error a peer raised
    (tiktoken's regex overflows its stack on 1 MB of spaces; its binding turns the Rust panic into a
    BaseException)."""
    best = float("inf")
    for _ in range(repeat):
        encode = make()
        start = time.perf_counter()
        try:
            encode(text)
        except BaseException as e:  # noqa: B036 - PanicException derives from BaseException
            if isinstance(e, KeyboardInterrupt):
                raise
            return f"crash: {type(e).__name__}"
        best = min(best, time.perf_counter() - start)
    return best / len(text.encode()) * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_shared = os.environ.get("BYTEPAIR_SHARED", str(ROOT.parent / "shared"))
    parser.add_argument("--shared", type=Path, default=Path(default_shared), help="the project's shared data")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cs336 = args.shared / "fixtures" / "cs336"
    tok = bytepair.Tokenizer.from_files(
        cs336 / "gpt2_vocab.json", cs336 / "gpt2_merges.txt", ["<|endoftext|>"]
    )
    with lzma.open(args.shared / "corpora" / "prose_en.txt.xz", "rt", encoding="utf-8") as f:
        prose = f.read(1_000_000)
    encoders: dict[str, Callable[[], Callable[[str], object]]] = {
        "bytepair cold": lambda: bytepair.Tokenizer(tok.vocab, tok.merges, tok.special_tokens).encode,
        "bytepair warm": lambda: tok.encode,
    }
    try:
        import tiktoken

        ranks = {t: i for i, t in tok.vocab.items() if t != b"<|endoftext|>"}
        enc = tiktoken.Encoding(
            "gpt2-bench", pat_str=bytepair.GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={}
        )
        encoders[f"tiktoken {tiktoken.__version__}"] = lambda: enc.encode_ordinary
    except ImportError:
        pass
    print(f"affinity: cores {sorted(os.sched_getaffinity(0))}")
    print("| input | " + " | ".join(f"{name} ns/byte | x prose" for name in encoders) + " |")
    print("|---|" + "---|---|" * len(encoders))
    base = {name: best_ns_per_byte(fn, prose, args.repeat) for name, fn in encoders.items()}
    print("| 1 MB prose | " + " | ".join(f"{base[n]:.1f} | 1.0" for n in encoders) + " |")
    for case, text in CASES.items():
        cells = []
        for name, fn in encoders.items():
            ns = best_ns_per_byte(fn, text, args.repeat)
            cells.append(ns + " | -" if isinstance(ns, str) else f"{ns:.1f} | {ns / float(base[name]):.1f}")
        print(f"| {case} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
