"""The ``bytepair`` command line.

    bytepair train INPUT --vocab-size N [--special-token TOK]... [--out DIR] [--threads N]

trains on INPUT, writes DIR/vocab.json and DIR/merges.txt, and prints a summary. Errors are one line on
stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

from . import save_bpe, train_bpe


def _train(args: argparse.Namespace) -> None:
    size = os.path.getsize(args.input)
    start = time.monotonic()
    vocab, merges = train_bpe(
        args.input, args.vocab_size, args.special_token, num_threads=args.threads, progress=True
    )
    seconds = time.monotonic() - start
    os.makedirs(args.out, exist_ok=True)
    save_bpe(vocab, merges, os.path.join(args.out, "vocab.json"), os.path.join(args.out, "merges.txt"))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    longest = sorted(vocab.values(), key=len, reverse=True)[:5]
    print(
        f"trained on {args.input}: {size / 1e6:,.1f} MB in {seconds:.2f} s ({size / 1e6 / seconds:,.0f} MB/s)"
    )
    print(f"vocab {len(vocab)} ({len(merges)} merges), peak memory {peak_mb:,.0f} MB")
    print("longest tokens: " + ", ".join(repr(t) for t in longest))
    print(f"wrote {os.path.join(args.out, 'vocab.json')} and {os.path.join(args.out, 'merges.txt')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bytepair", description="Byte-level BPE tokenizers.")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train a vocabulary and merges on a UTF-8 text file")
    train.add_argument("input", help="UTF-8 text file")
    train.add_argument("--vocab-size", type=int, required=True, help="256 bytes + merges + special tokens")
    train.add_argument(
        "--special-token", action="append", default=[], help="e.g. '<|endoftext|>'; may be repeated"
    )
    train.add_argument("--out", default=".", help="folder for vocab.json and merges.txt (default: .)")
    train.add_argument("--threads", type=int, default=None, help="threads (default: all cores)")
    args = parser.parse_args(argv)
    try:
        _train(args)
    except (OSError, ValueError, TypeError) as e:
        print(f"bytepair: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bytepair: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
