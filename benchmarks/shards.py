"""Token shards for training (issue 15): bytepair ``encode_dataset`` against its peers, in one run.

    python benchmarks/shards.py --data DIR [--subset 50] [--small 4] [--repeat 1] [--markdown FILE]
                                [--baseline DIR]
    python benchmarks/shards.py --data DIR --against-file [--subset 50] [--repeat 3]

``DIR`` is a dataset built by ``benchmarks/scale.py build`` (its ``shards/`` and ``manifest.json``). Three
sets of it: *all* its shards, the *subset* of its first ``--subset`` shards in name order (half jsonl.zst,
half parquet, as ``build`` alternates them), and the *small* set of its first ``--small``. Every tool uses
GPT-2's vocabulary (as in ``encode.py``) and writes, or returns, one token per id with the end-of-text
token after each document:

- ``bytepair-bin`` and ``bytepair-megatron``: ``Tokenizer.encode_dataset(shards, OUT, format=...)``, one
  output shard per input, written to disk; ``bin`` on every set, ``megatron`` on all the shards.
- ``gigatoken``: ``encode_files`` once with a ``JsonlFileSource`` of the jsonl.zst shards and once with a
  ``ParquetFileSource`` of the parquet ones (a call takes one kind of source), both results kept: it has no
  file sink and returns every id in memory (without end-of-text tokens, which the check adds back); on
  every set.
- ``gigatoken-bin``: the same calls, then what a user of gigatoken does to get the files bytepair writes:
  each shard's documents, in shard order, with the end-of-text id after each, written as uint16 to one
  ``train.bin`` and flushed to disk (``fsync``, as ``encode_dataset`` flushes its shards); on every
  set. The goal is measured against ``gigatoken``, which writes nothing.
- ``tiktoken``: nanoGPT's ``prepare.py`` without ``datasets``: documents read in batches of 1000 (the
  default batch of ``datasets.map``; a parquet row group), ``encode_ordinary_batch(batch,
  num_threads=cores)``, the end-of-text id appended to each, written as uint16 to one ``train.bin``; the
  timed work includes reading and decompressing the shards. On the subset.
- ``tokenizers``: the same with HF ``Tokenizer.encode_batch(batch)`` (its own thread pool). On the small
  set only: it encodes this synthetic web text (new words in every document) at well under 1 MB/s on two
  cores, so the subset would take about an hour.

Each run is a fresh process (``encode.py``'s ``run_child``); its peak RSS is the child's ``ru_maxrss`` as
the timed call returns, before the untimed check of the ids, which would add up to 64 MB; runs go
round by round, each tool once a round, and the median of ``--repeat`` is reported. ``--baseline DIR``
adds ``bytepair-bin-baseline`` to every set: ``bytepair-bin`` with the package in ``DIR/bytepair`` imported
instead (a copy of an earlier build's ``python/bytepair`` folder, its extension included; the run stops when
``DIR/bytepair`` is missing, and the child checks where ``bytepair`` came from), so that a change is
measured against the code before it in the same rounds. The shard files are read once beforehand so that
every tool starts from the page cache; before each run the previous output is deleted and ``os.sync()``
called, so that no run pays for another's writeback.

``--against-file`` (issue 15's first speed goal: ``encode_dataset`` at least as fast as ``encode_file`` on
the same text) runs, instead of the sets, ``encode_dataset`` on the subset's jsonl.zst shards, on its parquet
shards, and on all its documents as one txt, each against ``encode_file`` of the same documents joined into a
txt (written to the work folder first), round by round; ratios are to ``encode_file``.

Checks, after the timed call and outside it: every tool's token count, and the sha256 of the first
``PREFIX_TOKENS`` tokens of its output stream (as uint16, documents in shard order, which spans a jsonl.zst
and a parquet shard), compared with bytepair's on the same set. MB/s are of the documents' text (UTF-8,
from the manifest), not of the compressed files. The goal (issue 15) is at least 1.5x gigatoken's MB/s at
at most 1/10 of its peak RSS.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import io
import itertools
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import encode  # noqa: E402  (the sibling script: the same tokenizers and the same child runner)

EOT = encode.EOT
TOOLS = ("bytepair-bin", "bytepair-megatron", "gigatoken", "gigatoken-bin", "tiktoken", "tokenizers")
# bytepair-bin from the package that --baseline names: an earlier build, timed in the same rounds.
BASELINE = "bytepair-bin-baseline"
# Which tools run on which set: bytepair and gigatoken on each, as the references of the others.
SETS = {
    "all": ("bytepair-bin", BASELINE, "bytepair-megatron", "gigatoken", "gigatoken-bin"),
    "subset": ("bytepair-bin", BASELINE, "gigatoken", "gigatoken-bin", "tiktoken"),
    "small": ("bytepair-bin", BASELINE, "gigatoken", "gigatoken-bin", "tokenizers"),
}
# --against-file: encode_dataset on shards of one format against encode_file on the same documents as txt.
FILE = "bytepair-file"
KINDS = ("jsonl.zst", "parquet", "txt")
BATCH_DOCS = 1000  # datasets.map's default batch
PREFIX_TOKENS = 1 << 24


def shard_paths(data: Path, subset: int | None) -> list[Path]:
    paths = sorted(p for p in (data / "shards").iterdir() if p.name.endswith((".jsonl.zst", ".parquet")))
    return paths[:subset] if subset else paths


def documents(path: Path) -> Iterator[list[str]]:
    """The documents of one shard, in batches of ``BATCH_DOCS``."""
    if path.name.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_DOCS, columns=["text"]):
            yield batch.column(0).to_pylist()
        return
    import zstandard

    with open(path, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as z:
        lines = io.TextIOWrapper(z, encoding="utf-8")
        while batch := [json.loads(line)["text"] for line in itertools.islice(lines, BATCH_DOCS)]:
            yield batch


def write_joined(paths: list[Path], txt: Path) -> None:
    """The documents of ``paths``, in order, joined by the end-of-text token into ``txt`` (as ``scale.py``
    writes ``joined.txt``)."""
    with open(txt, "w", encoding="utf-8") as f:
        docs = (doc for path in paths for batch in documents(path) for doc in batch)
        f.write(next(docs, ""))
        for doc in docs:
            f.write(EOT)
            f.write(doc)


def write_bin(tool: str, tok: Any, eot_id: int, paths: list[Path], out: Path) -> tuple[int, int]:
    """tiktoken's or HF's ids of every document, each followed by ``eot_id``, appended to ``out`` as uint16
    batch by batch; returns (documents, tokens)."""
    docs = tokens = 0
    with open(out, "wb") as f:
        for path in paths:
            for batch in documents(path):
                if tool == "tiktoken":
                    ids = tok.encode_ordinary_batch(batch, num_threads=os.cpu_count())
                else:
                    ids = [e.ids for e in tok.encode_batch(batch, add_special_tokens=False)]
                flat = itertools.chain.from_iterable(itertools.chain(d, (eot_id,)) for d in ids)
                array = np.fromiter(flat, dtype=np.uint16)
                f.write(array.tobytes())
                docs += len(batch)
                tokens += len(array)
    return docs, tokens


def prefix_of_files(files: list[Path]) -> np.ndarray:
    """The first ``PREFIX_TOKENS`` uint16 ids of ``files`` read one after the other."""
    parts, left = [], PREFIX_TOKENS
    for f in files:
        parts.append(np.fromfile(f, dtype=np.uint16, count=left))
        left -= len(parts[-1])
        if not left:
            break
    return np.concatenate(parts)


def shard_rows(paths: list[Path], shard_docs: list[int]) -> Iterator[tuple[str, int, int]]:
    """For each shard in order, where gigatoken's results hold its documents: the kind of source
    (``results``' key), the first of them and how many. A call on one kind's shards returns their
    documents one shard after another; jsonl.zst and parquet shards alternate, and the manifest gives
    each shard's documents (``shard_docs``)."""
    taken = {"jsonl": 0, "parquet": 0}
    for path, n in zip(paths, shard_docs):
        kind = "parquet" if path.name.endswith(".parquet") else "jsonl"
        yield kind, taken[kind], n
        taken[kind] += n


def gigatoken_stream(
    paths: list[Path], shard_docs: list[int], results: dict[str, Any], eot_id: int
) -> tuple[int, int, np.ndarray]:
    """(documents, tokens with an end-of-text per document, the stream's prefix) of gigatoken's results,
    the documents put back into shard order (``shard_rows``)."""
    import awkward as ak

    docs = sum(len(r) for r in results.values())
    tokens = sum(int(ak.sum(ak.num(r, axis=1))) for r in results.values()) + docs
    parts, left = [], PREFIX_TOKENS
    for kind, first, n in shard_rows(paths, shard_docs):
        for row in results[kind][first : first + n]:
            parts.append(np.append(np.asarray(row, dtype=np.uint16), np.uint16(eot_id))[:left])
            left -= len(parts[-1])
            if not left:
                return docs, tokens, np.concatenate(parts)
    return docs, tokens, np.concatenate(parts)


def gigatoken_bin(
    paths: list[Path], shard_docs: list[int], results: dict[str, Any], eot_id: int, out: Path
) -> tuple[int, int]:
    """gigatoken's results written as ``write_bin`` writes tiktoken's: every document of every shard, in
    shard order, followed by ``eot_id``, as uint16 into ``out``, then flushed to disk; returns (documents,
    tokens)."""
    import awkward as ak

    flat = {kind: ak.to_numpy(ak.flatten(r)).astype(np.uint16) for kind, r in results.items()}
    ends = {kind: np.cumsum(ak.to_numpy(ak.num(r, axis=1))) for kind, r in results.items()}
    docs = tokens = 0
    with open(out, "wb") as f:
        for kind, first, n in shard_rows(paths, shard_docs):
            doc_ends = ends[kind]
            lo = int(doc_ends[first - 1]) if first else 0
            hi = int(doc_ends[first + n - 1]) if n else lo
            # The end-of-text id goes in at each document's end (relative to the shard's first id).
            ids = np.insert(flat[kind][lo:hi], doc_ends[first : first + n] - lo, np.uint16(eot_id))
            f.write(ids.astype("<u2", copy=False).tobytes())
            docs += n
            tokens += len(ids)
        f.flush()
        os.fsync(f.fileno())
    return docs, tokens


def since(start: float, cpu: resource.struct_rusage) -> tuple[float, float, float]:
    """Wall and CPU seconds (this process's, all threads) since ``start`` and ``cpu``, and the process's
    peak RSS so far in MB: taken as the timed call returns, so that it leaves out the untimed check after
    it (which reads 16M ids, up to 64 MB)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    seconds = time.perf_counter() - start
    cpu_seconds = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
    return seconds, cpu_seconds, used.ru_maxrss * 1024 / 1e6


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One timed run in its own process: the tool's work on the set's shards, then the (untimed) check."""
    tool, work = spec["tool"], Path(spec["work"])
    if "baseline" in spec:
        sys.path.insert(0, spec["baseline"])  # before encode.load imports bytepair
        import bytepair

        assert Path(bytepair.__file__).is_relative_to(spec["baseline"]), bytepair.__file__
    paths = [Path(p) for p in spec["paths"]]
    peer = "bytepair" if tool.startswith("bytepair") else tool.split("-")[0]
    tok = encode.load(peer, Path(spec["shared"]), work)
    eot_id = (
        encode.load("bytepair", Path(spec["shared"]), work).encode(EOT)[0] if peer != "bytepair" else None
    )
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    os.sync()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    if tool == FILE:
        tokens = tok.encode_file(paths[0], out / "ids.npy")
        seconds, cpu_seconds, call_rss_mb = since(start, cpu)
        docs = sum(spec["shard_documents"])
        prefix = np.load(out / "ids.npy", mmap_mode="r")[:PREFIX_TOKENS]
    elif peer == "bytepair":
        summary = tok.encode_dataset(paths, out, format=tool.split("-")[1])
        seconds, cpu_seconds, call_rss_mb = since(start, cpu)
        docs, tokens = summary.documents, summary.tokens
        prefix = prefix_of_files(sorted(out.glob("*.bin")))
        if spec.get("versus_file") and len(prefix) == tokens:
            prefix = prefix[:-1]  # the end-of-text token after the last document, which the txt lacks
    elif tool in ("gigatoken", "gigatoken-bin"):
        import gigatoken

        sources = {
            "jsonl": gigatoken.JsonlFileSource([str(p) for p in paths if p.name.endswith(".jsonl.zst")]),
            "parquet": gigatoken.ParquetFileSource([str(p) for p in paths if p.name.endswith(".parquet")]),
        }
        results = {kind: tok.encode_files(source) for kind, source in sources.items()}
        if tool == "gigatoken":
            seconds, cpu_seconds, call_rss_mb = since(start, cpu)
            docs, tokens, prefix = gigatoken_stream(paths, spec["shard_documents"], results, eot_id)
        else:
            docs, tokens = gigatoken_bin(paths, spec["shard_documents"], results, eot_id, out / "train.bin")
            seconds, cpu_seconds, call_rss_mb = since(start, cpu)
            prefix = prefix_of_files([out / "train.bin"])
    else:
        docs, tokens = write_bin(tool, tok, eot_id, paths, out / "train.bin")
        seconds, cpu_seconds, call_rss_mb = since(start, cpu)
        prefix = prefix_of_files([out / "train.bin"])
    shutil.rmtree(out, ignore_errors=True)
    return {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,  # of every thread, which encode.interleaved compares
        "call_rss_mb": call_rss_mb,  # the peak RSS the tables show; run_child's rss_mb includes the check
        "bytes": spec["bytes"],
        "documents": docs,
        "tokens": tokens,
        "prefix_sha256": hashlib.sha256(prefix.astype("<u2").tobytes()).hexdigest()[:16],
    }


def table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown rows; speed and RSS are compared with gigatoken's on the same set (speed as the median of
    the rounds' ratios, the lowest in brackets, from wall time and from CPU time), the ids with the first
    bytepair row's."""
    lines = [
        "| set | tool | seconds | CPU s | MB/s | peak RSS MB | speed vs gigatoken | CPU speed vs gigatoken | "
        "RSS vs gigatoken | tokens | same ids as bytepair |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['set']} | {r['tool']} | {r['error']} | | | | | | | | |")
            continue
        same = [o for o in rows if o["set"] == r["set"]]
        giga = next((o for o in same if o["tool"] == "gigatoken" and "mbps" in o), None)
        ref = next((o for o in same if o["tool"].startswith("bytepair") and "mbps" in o), None)
        speed = f"{r['ratio']:.2f}x ({r['ratio_low']:.2f}x)" if "ratio" in r else "–"
        cpu = f"{r['cpu_ratio']:.2f}x ({r['cpu_ratio_low']:.2f}x)" if "cpu_ratio" in r else "–"
        rss = f"{r['call_rss_mb'] / giga['call_rss_mb']:.3f}x" if giga else "–"
        if ref is None or ref is r:
            match = "(reference)" if ref is r else "–"
        else:
            match = (
                "yes" if (r["tokens"], r["prefix_sha256"]) == (ref["tokens"], ref["prefix_sha256"]) else "NO"
            )
        lines.append(
            f"| {r['set']} | {r['tool']} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['mbps']:.1f} | "
            f"{r['call_rss_mb']:.0f} | {speed} | {cpu} | {rss} | {r['tokens']:,} | {match} |"
        )
    return lines


def file_table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown rows of ``--against-file``: speed compared with encode_file's on the same documents (the
    median of the rounds' ratios, the lowest in brackets), the ids with encode_file's (the same first
    tokens; encode_dataset has one token more, the end-of-text token after the last document)."""
    lines = [
        "| documents | call | seconds | CPU s | MB/s | peak RSS MB | speed vs encode_file | "
        "CPU speed vs encode_file | tokens | same ids as encode_file |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        call = "encode_file(txt)" if r["tool"] == FILE else f"encode_dataset({r['input']})"
        if "error" in r:
            lines.append(f"| {r['set']} | {call} | {r['error']} | | | | | | | |")
            continue
        ref = next(o for o in rows if o["set"] == r["set"] and o["tool"] == FILE)
        match = (
            "(reference)"
            if ref is r
            else "yes"
            if r.get("prefix_sha256") == ref.get("prefix_sha256")
            else "NO"
        )
        lines.append(
            f"| {r['set']} | {call} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['mbps']:.1f} | "
            f"{r['call_rss_mb']:.0f} | {r['ratio']:.2f}x ({r['ratio_low']:.2f}x) | "
            f"{r['cpu_ratio']:.2f}x ({r['cpu_ratio_low']:.2f}x) | {r['tokens']:,} | {match} |"
        )
    return lines


def against_file(args: argparse.Namespace, shards: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    """``--against-file``: for the subset's jsonl.zst shards, its parquet shards, and all its documents as
    one txt, ``encode_dataset`` against ``encode_file`` of the same documents joined into a txt, round by
    round."""
    subset = shard_paths(args.data, args.subset)
    rows = []
    for kind in KINDS:
        paths = [p for p in subset if kind == "txt" or p.name.endswith(kind)]
        txt = tmp / f"{kind}.txt"
        write_joined(paths, txt)
        size = sum(shards[p.name]["text_bytes"] for p in paths)
        common = {
            "versus_file": True,
            "work": str(tmp),
            "shared": str(args.shared),
            "bytes": size,
            "shard_documents": [shards[p.name]["documents"] for p in paths],
            "script": __file__,
        }
        inputs = {FILE: [txt], "bytepair-bin": [txt] if kind == "txt" else paths}
        specs = {tool: {**common, "tool": tool, "paths": [str(p) for p in inputs[tool]]} for tool in inputs}
        best = encode.interleaved(specs, args.repeat, args.timeout, base=FILE)
        label = f"{kind} (of {len(paths)} shards, {size / 1e9:.2f} GB)"
        for tool in inputs:
            input_kind = "the txt" if kind == "txt" or tool == FILE else f"{len(paths)} {kind} shards"
            rows.append({"set": label, "tool": tool, "input": input_kind, **best[tool]})
            print(f"{kind} {tool}: {rows[-1]}", file=sys.stderr, flush=True)
        txt.unlink()
    return rows


def loads(averages: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.1f}" for x in averages)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    default_shared = os.environ.get("BYTEPAIR_SHARED", str(encode.ROOT.parent / "shared"))
    p.add_argument("--data", type=Path, help="a dataset of scale.py build")
    p.add_argument("--shared", type=Path, default=Path(default_shared), help="the project's shared data")
    p.add_argument("--subset", type=int, default=50, help="shards in the subset (its first N)")
    p.add_argument("--small", type=int, default=4, help="shards in the small set (its first N)")
    p.add_argument("--sets", nargs="+", choices=list(SETS), default=list(SETS))
    p.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    p.add_argument("--repeat", type=int, default=1, help="median of N fresh processes")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--work", type=Path, help="where outputs go (default: a temporary directory)")
    p.add_argument("--markdown", type=Path, help="also write the report to this file")
    p.add_argument(
        "--baseline",
        type=Path,
        help=f"a folder holding a copy of an earlier build's python/bytepair folder (DIR/bytepair, its .so "
        f"included): adds {BASELINE}",
    )
    p.add_argument(
        "--against-file",
        action="store_true",
        help="instead of the sets: encode_dataset against encode_file on the subset's documents, by format",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        spec = json.loads(args.child)
        Path(spec["out"]).write_text(json.dumps(child(spec)))
        return
    if args.data is None:
        p.error("--data is required")

    manifest = json.loads((args.data / "manifest.json").read_text())
    shards = {Path(s["file"]).name: s for s in manifest["shards"]}
    packages = {t: t.split("-")[0] for t in args.tools}
    installed = [t for t in args.tools if importlib.util.find_spec(packages[t])]
    versions = ", ".join(
        f"{n} {importlib.metadata.version(n)}" for n in sorted({packages[t] for t in installed})
    )
    if args.baseline and not (args.baseline / "bytepair" / "__init__.py").is_file():
        # Without DIR/bytepair, the import falls through to the installed package, and the baseline would
        # be the code under test timed twice.
        p.error(f"--baseline: {args.baseline / 'bytepair' / '__init__.py'} does not exist")
    if args.baseline and "bytepair-bin" in installed:
        args.tools.append(BASELINE)
        installed.append(BASELINE)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bytepair-shards-", dir=args.work) as tmp:
        encode.write_rank_file(args.shared, Path(tmp) / "gpt2.tiktoken")
        if args.against_file:
            args.sets = []
            rows = against_file(args, shards, Path(tmp))
        first = {"all": None, "subset": args.subset, "small": args.small}
        sets = {name: shard_paths(args.data, first[name]) for name in args.sets}
        for paths in sets.values():
            for path in paths:  # into the page cache, so that no tool pays for the disk
                with open(path, "rb") as f:
                    while f.read(1 << 24):
                        pass
        for name, paths in sets.items():
            size = sum(shards[p.name]["text_bytes"] for p in paths)
            specs = {
                tool: {
                    "tool": tool,
                    "paths": [str(p) for p in paths],
                    "work": tmp,
                    "shared": str(args.shared),
                    "bytes": size,
                    "shard_documents": [shards[p.name]["documents"] for p in paths],
                    "script": __file__,
                }
                | ({"baseline": str(args.baseline.resolve())} if tool == BASELINE else {})
                for tool in SETS[name]
                if tool in installed
            }
            best = encode.interleaved(specs, args.repeat, args.timeout, base="gigatoken")
            for tool in (t for t in SETS[name] if t in args.tools):
                result = best.get(tool, {"error": "not installed"})
                rows.append(
                    {"set": f"{name} ({len(paths)} shards, {size / 1e9:.2f} GB)", "tool": tool, **result}
                )
                print(f"{name} {tool}: {rows[-1]}", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    report = [
        *(file_table(rows) if args.against_file else table(rows)),
        "",
        f"- data: {args.data}; {versions}; GPT-2's vocabulary; median of {args.repeat}; "
        f"{os.cpu_count()} cores; load average (1, 5, 15 min) {loads(load_before)} before, "
        f"{loads(load_after)} after",
        f"- same ids: the same sha256 of the first {PREFIX_TOKENS:,} tokens (all but encode_dataset's last, "
        "when fewer) as encode_file's on the same documents."
        if args.against_file
        else f"- same ids: the same number of tokens and the same sha256 of the first {PREFIX_TOKENS:,} "
        "tokens as the first bytepair row of the set (gigatoken's with an end-of-text token after each "
        "document).",
    ]
    print("\n".join(report))
    if args.markdown:
        args.markdown.write_text("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
