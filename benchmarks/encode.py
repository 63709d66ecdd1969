"""Encoding throughput of bytepair against gigatoken, tiktoken and HF tokenizers, in one run.

Every tool gets the same GPT-2 vocabulary (``vocab.json`` + ``merges.txt`` from the shared fixtures; for
gigatoken they are written out as a ``.tiktoken`` rank file) and the same text. Before timing, each peer's
ids are checked against bytepair's, document by document, on a 1 MB sample of each corpus.

Every measurement runs in a fresh subprocess (this script with ``--child``), so no tool inherits another's
warm caches, thread pools or heap, and the parent can read that process's own peak RSS (``ru_maxrss`` from
``os.wait4``). Each of the ``--repeat`` runs is such a process (what is reported of them is at the end of
this list): repeating a call in one process would time warm caches instead (gigatoken re-encodes the same
20 MB about 3x faster the second time). The runs go round by round, each tool once a round, so that a slow
spell of the shared machine falls on every tool alike. Building the tokenizer is never timed.

Sections (MB = 1e6 bytes of UTF-8 input):

- ``single``: ``encode(str)`` on the first 20 MB of each corpus (cut at a character boundary), the text
  already in memory; only the encode call is timed. ``multilingual``'s first 20 MB are German and French
  (97% ASCII), so ``multilingual_cjk`` is its last 20 MB, Japanese and Chinese: half of its bytes are CJK
  characters. The child is pinned to CPU 0 (``taskset -c 0``, else ``sched_setaffinity``) so that a
  tool's internal thread pool cannot use a second core and the scheduler cannot migrate it. bytepair's
  ``encode_to_numpy`` has its own row (``bytepair encode_to_numpy``): gigatoken's ``encode`` returns a
  NumPy array, bytepair's and tiktoken's a list. So has gigatoken's ``encode`` of the same text as
  ``bytes`` (``gigatoken bytes``, the UTF-8 made before the timed call): its ``str`` call spends a sixth
  of its time in CPython's UTF-8 encoder, so this row is its engine's speed. bytepair takes only ``str``.
- ``after``: as ``single``, but the process has first encoded other text with the same call (the first
  20 MB of code_c, or of prose_en when timing code_c), and keeps its ids: a program that encodes one
  document after another and keeps what it encoded, where ``single`` times a fresh process's first call.
  What the other work leaves (caches full of other pieces, memory the process holds) is then part of the
  time: the timed call's memory is new to the process, not what an earlier call just freed.
- ``files``: a whole file on all cores: bytepair ``encode_file`` (to a ``.npy``), gigatoken ``encode_files``
  (ids in memory), and for tiktoken ``encode_ordinary_batch`` / HF ``encode_batch`` the timed work also
  includes reading the file, splitting it into documents at
  ``<|endoftext|>`` and packing the ids of each 64 MB batch into a uint16 array (so memory stays bounded).
  The file is read once beforehand so that all tools start from the page cache. bytepair's output of an
  earlier run is deleted before timing: replacing a 1.3 GB file frees its blocks inside the timed call
  (0.7 s on this project's ext4 disk mounted with ``discard``), which is the file system's time, and only
  the second and later runs would pay it. Then ``os.sync()`` flushes what earlier runs left to write, so
  that no tool's timed run shares the disk (and, on a virtual machine, its CPUs) with another's writeback.
  ``encode_file`` returns when the ``.npy`` is written to the page cache, as any program's ordinary
  writes do; gigatoken keeps its ids in memory.
- ``iterable``: bytepair ``encode_iterable`` over the file opened as text (iterated by lines, up to its
  first 200 MB: all of prose_en, the first 200 MB of code_c, copied out before timing), unpinned;
  the RSS column holds the growth of the child's peak RSS (``VmHWM``) during the call (its high-water mark
  is first reset through ``/proc/self/clear_refs``, else the peak of building the tokenizer would hide the
  call's). In the same rounds, ``bytepair encode`` is ``encode(str)`` of the same text (read beforehand,
  only the call timed), and the ratio column is the stream's speed over that.
- ``short``: chat-sized messages, one ``encode`` call each (and bytepair's ``encode_to_numpy`` row): the
  lines of 20 to 200 bytes of a corpus's first 20 MB (at most ``SHORT_MESSAGES`` of them), pinned to CPU
  0; reported in calls per second as well as MB/s. Each tool's caches warm up over the calls, as in a
  server that encodes one message at a time.

Each section reports, per tool, the median of its runs, and the ratio to gigatoken as the median of the
ratios of the runs that shared a round, with the lowest of them: a slow spell of the shared machine then
falls on both sides of a ratio. The ratio is also given from the CPU time of each timed call (the
process's, all threads) instead of its wall time: on a machine busy with other work, a process that
waits for a CPU loses wall time, not CPU time.

``--baseline DIR`` adds the row ``bytepair baseline`` to the sections ``single``, ``after``, ``files`` and
``short`` (and ``bytepair baseline encode_to_numpy`` where there is an ``encode_to_numpy`` row): bytepair's
own row with the package in ``DIR/bytepair`` imported instead (an earlier build, copied there with its
compiled module), timed in the same rounds, so that a change is measured against the code before it as
the peers are.

Example: ``python benchmarks/encode.py --markdown encode.md``
"""

from __future__ import annotations

import argparse
import base64
import importlib.metadata
import importlib.util
import itertools
import json
import lzma
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("bytepair", "gigatoken", "tiktoken", "tokenizers")
SECTIONS = {
    "single": "1 core",
    "after": "1 core, after other work",
    "files": "all cores",
    "iterable": "streaming",
    "short": "short texts",
}
CORPORA = {
    "single": ("prose_en", "multilingual", "multilingual_cjk", "code_c", "web"),
    "after": ("prose_en", "multilingual", "multilingual_cjk", "code_c", "web"),
    "files": ("prose_en", "code_c"),
    "iterable": ("prose_en", "code_c"),
    "short": ("prose_en", "multilingual", "multilingual_cjk", "code_c"),
}
# The streaming section's other row: bytepair's encode(str) on the same text, its reference speed.
STREAM_REFERENCE = "bytepair encode"
# bytepair's row for encode_to_numpy in the sections of one call: ids as an array, as gigatoken returns
# them, where encode (and tiktoken's encode) return a list.
NUMPY_ROW = "bytepair encode_to_numpy"
# bytepair's rows with the build of --baseline DIR imported instead.
BASELINE_ROW = "bytepair baseline"
BASELINE_NUMPY_ROW = "bytepair baseline encode_to_numpy"
# gigatoken's row for its encode of the text as bytes, in the single section (see the docstring).
BYTES_ROW = "gigatoken bytes"
# The other work of the after section: the first 20 MB of the first of these that is not the corpus timed.
OTHER_WORK = ("code_c", "prose_en")
EOT = "<|endoftext|>"
SAMPLE_BYTES = 20_000_000
STREAM_BYTES = 200_000_000  # the tokenizer issue's streaming bound is for a 200 MB file
VERIFY_BYTES = 1_000_000
SHORT_BYTES = (20, 200)  # a chat message's size in UTF-8 bytes, first and last included
SHORT_MESSAGES = 100_000
BATCH_CHARS = 64_000_000

ENCODE_ONE: dict[str, Callable[[Any, str], Sequence[int]]] = {
    "bytepair": lambda tok, text: tok.encode(text),
    "gigatoken": lambda tok, text: tok.encode(text),
    "tiktoken": lambda tok, text: tok.encode(text, allowed_special="all"),
    "tokenizers": lambda tok, text: tok.encode(text).ids,
}


def encode_numpy(tok: Any, text: str) -> Sequence[int]:
    return tok.encode_to_numpy(text)


def fixture_paths(shared: Path) -> tuple[Path, Path]:
    return shared / "fixtures/cs336/gpt2_vocab.json", shared / "fixtures/cs336/gpt2_merges.txt"


def write_rank_file(shared: Path, path: Path) -> None:
    """tiktoken's rank format, which gigatoken loads: ``base64(token_bytes) rank`` per non-special token."""
    import bytepair

    vocab, _ = bytepair.load_bpe(*fixture_paths(shared))
    lines = (f"{base64.b64encode(b).decode()} {i}\n" for i, b in sorted(vocab.items()) if b != EOT.encode())
    path.write_text("".join(lines))


def load(tool: str, shared: Path, work: Path) -> Any:
    """``tool``'s GPT-2 tokenizer with ``<|endoftext|>`` as its special token."""
    import bytepair

    vocab_path, merges_path = fixture_paths(shared)
    vocab, merges = bytepair.load_bpe(vocab_path, merges_path)
    eot_id = next(i for i, b in vocab.items() if b == EOT.encode())
    if tool == "bytepair":
        return bytepair.Tokenizer(vocab, merges, special_tokens=[EOT])
    if tool == "gigatoken":
        from gigatoken.gigatoken_rs import BPETokenizer

        return BPETokenizer.from_tiktoken(str(work / "gpt2.tiktoken"), "gpt2", {EOT: eot_id})
    if tool == "tiktoken":
        import tiktoken

        ranks = {b: i for i, b in vocab.items() if i != eot_id}
        return tiktoken.Encoding(
            name="gpt2-bench",
            pat_str=bytepair.GPT2_PATTERN,
            mergeable_ranks=ranks,
            special_tokens={EOT: eot_id},
        )
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    hf = Tokenizer(models.BPE.from_file(str(vocab_path), str(merges_path)))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    hf.add_special_tokens([EOT])
    return hf


def read_prefix(path: Path, size: int) -> str:
    """The first ``size`` bytes of ``path`` or fewer, cut back to a UTF-8 character boundary."""
    with open(path, "rb") as f:
        data = f.read(size + 1)
    end = min(size, len(data))
    while end < len(data) and data[end] & 0xC0 == 0x80:
        end -= 1
    return data[:end].decode("utf-8")


def batches(docs: list[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for doc in docs:
        batch.append(doc)
        size += len(doc)
        if size >= BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def encode_whole_file(tool: str, tok: Any, path: Path, work: Path) -> int:
    """Encodes ``path`` with ``tool``'s whole-file API on all cores; returns the number of tokens."""
    if tool == "bytepair":
        return tok.encode_file(path, work / "ids.npy")
    if tool == "gigatoken":
        return len(tok.encode_files(str(path))[0])  # one document: the whole file, special tokens included
    import numpy as np

    docs = path.read_text(encoding="utf-8").split(EOT)
    arrays = []
    for batch in batches(docs):
        if tool == "tiktoken":
            ids = tok.encode_ordinary_batch(batch, num_threads=os.cpu_count())
        else:
            ids = [e.ids for e in tok.encode_batch(batch)]
        arrays.append(np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint16))
    return sum(len(a) for a in arrays)


def short_messages(path: Path) -> list[str]:
    """The lines of ``SHORT_BYTES`` of the first ``SAMPLE_BYTES`` of ``path``, at most ``SHORT_MESSAGES``."""
    low, high = SHORT_BYTES
    lines = (
        line for line in read_prefix(path, SAMPLE_BYTES).split("\n") if low <= len(line.encode()) <= high
    )
    return list(itertools.islice(lines, SHORT_MESSAGES))


def peak_rss_mb() -> float:
    """This process's peak RSS: ``VmHWM``, which ``/proc/self/clear_refs`` resets. ``ru_maxrss`` can keep
    an earlier peak past that reset (streaming 200 MB of code_c showed +0.0 MB there and +3.2 MB in
    ``VmHWM``), so it is only the fallback where ``/proc`` is missing."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) * 1024 / 1e6
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement, in its own process; returns seconds and input bytes (and what else it knows)."""
    shared, work = Path(spec["shared"]), Path(spec["work"])
    if "baseline" in spec:
        sys.path.insert(0, spec["baseline"])  # before load imports bytepair
        import bytepair

        assert Path(bytepair.__file__).is_relative_to(spec["baseline"]), bytepair.__file__
    if spec["section"] == "verify":
        write_rank_file(shared, work / "gpt2.tiktoken")
        return {"lines": verify(spec["tools"], spec["corpora"], shared, work)}
    if spec["pin"] and os.sched_getaffinity(0) != {0}:
        os.sched_setaffinity(0, {0})
    tool, path = spec["tool"], Path(spec["path"])
    # NumPy is imported before any timed call, for every tool: gigatoken imports it in its first call
    # (its ids are arrays), which put 50 ms of importing into its time, and encode_to_numpy would too.
    # One BLAS thread: its threads would share the pinned CPU.
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    import numpy  # noqa: F401

    tok = load(tool, shared, work)
    encode = encode_numpy if spec.get("numpy") else ENCODE_ONE[tool]
    if spec["section"] in ("single", "after"):
        text = read_prefix(path, SAMPLE_BYTES)
        if spec["section"] == "after":
            other = read_prefix(Path(spec["other"]), SAMPLE_BYTES)
            # Held through the timed call, as a program holds what it encoded.
            kept = encode(tok, other.encode("utf-8") if spec.get("utf8") else other)  # noqa: F841
            del other
        if spec.get("utf8"):
            data = text.encode("utf-8")
            return {**timed(lambda: tok.encode(data)), "bytes": len(data)}
        return {**timed(lambda: encode(tok, text)), "bytes": len(text.encode("utf-8"))}
    if spec["section"] == "short":
        messages = short_messages(path)

        def encode_each() -> None:
            for message in messages:
                encode(tok, message)

        return {**timed(encode_each), "bytes": sum(len(m.encode()) for m in messages), "calls": len(messages)}
    if spec["section"] == "files":
        (work / "ids.npy").unlink(missing_ok=True)
        os.sync()
        tokens: list[int] = []
        times = timed(lambda: tokens.append(encode_whole_file(tool, tok, path, work)))
        return {**times, "bytes": path.stat().st_size, "tokens": tokens[0]}
    if spec.get("reference"):
        text = path.read_text(encoding="utf-8")
        return {**timed(lambda: tok.encode(text)), "bytes": len(text.encode("utf-8"))}
    try:  # reset the high-water mark, so that it no longer holds the peak of building the tokenizer
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    before = peak_rss_mb()

    def stream() -> None:
        with open(path, encoding="utf-8") as f:
            deque(tok.encode_iterable(f), maxlen=0)

    times = timed(stream)
    return {**times, "bytes": path.stat().st_size, "rss_growth_mb": peak_rss_mb() - before}


def timed(work: Callable[[], Any]) -> dict[str, float]:
    """The wall time of ``work()`` and the CPU time the process spent in it (all threads): on a machine
    shared with other work, a process waiting for a CPU loses wall time but not CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return {"seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}


def stream_prefix(path: Path, work: Path) -> Path:
    """``path`` if it holds at most ``STREAM_BYTES``, else a copy of its first ``STREAM_BYTES`` cut back to
    the end of a line in ``work``, written once before the runs so that the timed loop only streams."""
    if path.stat().st_size <= STREAM_BYTES:
        return path
    with open(path, "rb") as f:
        data = f.read(STREAM_BYTES)
    prefix = work / "stream.txt"
    prefix.write_bytes(data[: data.rindex(b"\n") + 1])
    return prefix


def run_child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Runs ``child(spec)`` in a fresh interpreter; adds its peak RSS, or returns an ``error``."""
    out = Path(spec["work"]) / "result.json"
    out.unlink(missing_ok=True)
    # spec["script"]: another benchmark script whose --child takes the same JSON (shards.py).
    cmd = [sys.executable, spec.get("script", __file__), "--child", json.dumps({**spec, "out": str(out)})]
    taskset = shutil.which("taskset")
    if spec.get("pin") and taskset:
        cmd = [taskset, "-c", "0", *cmd]
    start = time.monotonic()
    # fork and exec, not subprocess: its vfork would pass this process's peak RSS on to the child's ru_maxrss.
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    timer = threading.Timer(timeout, os.kill, (pid, signal.SIGKILL))
    timer.start()
    _, status, usage = os.wait4(pid, 0)
    timer.cancel()
    code = os.waitstatus_to_exitcode(status)
    if time.monotonic() - start >= timeout:
        return {"error": f"timeout ({timeout:g} s)"}
    if code != 0 or not out.exists():
        return {"error": f"failed (exit {code})"}
    return {**json.loads(out.read_text()), "rss_mb": usage.ru_maxrss * 1024 / 1e6}


Result = dict[str, Any]


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def interleaved(specs: dict[str, Result], repeat: int, timeout: float, base: str) -> dict[str, Result]:
    """For each tool, the median of ``repeat`` runs of its spec (MB/s, calls/s for short texts, and the
    peak RSS of the median run), or its first error; and the ratio of its speed to ``base``'s as the
    median and the lowest of the ratios of the rounds where both ran. The runs go round by round, every
    tool once a round, so that a slow spell of the shared machine falls on all tools alike instead of on
    the runs of one. Each round starts one tool later than the one before: a run's speed depends on the
    one before it (a process that just freed gigabytes leaves memory the next one fills faster than
    memory untouched for a while), so no tool keeps one place."""
    rounds: list[dict[str, Result]] = []
    failed: dict[str, Result] = {}
    tools = list(specs)
    for i in range(repeat):
        this_round = {}
        for tool in tools[i % len(tools) :] + tools[: i % len(tools)]:
            spec = specs[tool]
            if tool not in failed:
                result = run_child(spec, timeout)
                if "error" in result:
                    failed[tool] = result
                else:
                    this_round[tool] = {**result, "mbps": result["bytes"] / 1e6 / result["seconds"]}
        rounds.append(this_round)
    summary = {}
    for tool in specs:
        if tool in failed:
            summary[tool] = failed[tool]
            continue
        runs = sorted((r[tool] for r in rounds), key=lambda r: r["mbps"])
        middle = {**runs[len(runs) // 2], "mbps": median([r["mbps"] for r in runs]), "runs": len(runs)}
        if "calls" in middle:
            middle["calls_per_s"] = median([r["calls"] / r["seconds"] for r in runs])
        both = [r for r in rounds if tool in r and base in r]
        ratios = [r[tool]["mbps"] / r[base]["mbps"] for r in both]
        if ratios and base not in failed:
            middle |= {"ratio": median(ratios), "ratio_low": min(ratios), "ratios": ratios}
        if both and all("cpu_seconds" in r[tool] and "cpu_seconds" in r[base] for r in both):
            cpu = [
                r[base]["cpu_seconds"] / r[base]["bytes"] * r[tool]["bytes"] / r[tool]["cpu_seconds"]
                for r in both
            ]
            middle |= {"cpu_ratio": median(cpu), "cpu_ratio_low": min(cpu)}
        summary[tool] = middle
    return summary


def verify(tools: list[str], corpora: dict[str, str], shared: Path, work: Path) -> list[str]:
    """Compares each peer's ids with bytepair's, per document, on the first 1 MB of each corpus."""
    toks = {tool: load(tool, shared, work) for tool in ["bytepair", *tools]}
    lines = []
    for name, path in corpora.items():
        docs = read_prefix(Path(path), VERIFY_BYTES).split(EOT)
        refs = [list(toks["bytepair"].encode(d)) for d in docs]
        for tool in tools:
            outs = [list(ENCODE_ONE[tool](toks[tool], d)) for d in docs]
            bad = [(ref, ids) for ref, ids in zip(refs, outs) if ids != ref]
            line = f"- {tool} on {name}: {len(docs) - len(bad)} of {len(docs)} documents identical"
            if bad:
                ref, ids = bad[0]
                i = next((k for k, (a, b) in enumerate(zip(ref, ids)) if a != b), min(len(ref), len(ids)))
                text = toks["bytepair"].decode(ref[max(0, i - 3) : i + 5])
                line += f"; first difference at token {i}, text {text!r}: "
                line += f"bytepair {ref[i : i + 5]}, {tool} {ids[i : i + 5]}"
            lines.append(line)
    return lines


def write_cjk_tail(multilingual: Path, path: Path) -> None:
    """The last ``SAMPLE_BYTES`` of ``multilingual`` (its Japanese and Chinese man pages; the first 20 MB
    are German and French), from a character boundary."""
    with open(multilingual, "rb") as f:
        f.seek(max(0, multilingual.stat().st_size - SAMPLE_BYTES))
        data = f.read()
    start = 0
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    path.write_bytes(data[start:])


def write_web(directory: Path, path: Path) -> None:
    """The web-like corpus: 30 MB of documents from ``scale.py build`` (English prose, German and French,
    Japanese and Chinese, C, and synthetic words of a web crawl's long tail, in OWT-like documents), a
    blank line between documents instead of the special token."""
    with tempfile.TemporaryDirectory() as tmp:
        build = [sys.executable, str(ROOT / "benchmarks/scale.py"), "build", "--out", f"{tmp}/web"]
        build += ["--size-gb", "0.03", "--shards", "1", "--also-txt", "--corpora", str(directory)]
        subprocess.run(build, check=True, stdout=subprocess.DEVNULL)
        text = Path(f"{tmp}/web/joined.txt").read_text(encoding="utf-8")
    path.write_text(text.replace("<|endoftext|>", "\n\n"), encoding="utf-8")


def prepare_corpora(directory: Path, shared: Path, names: set[str]) -> dict[str, Path]:
    """Those of the corpora ``names`` that exist, decompressing the shipped ``.xz`` ones when missing."""
    found = {}
    # multilingual_cjk is cut from multilingual, which sorts before it.
    needed = names | {"multilingual"} if "multilingual_cjk" in names else names
    for name in sorted(needed):
        path, xz = directory / f"{name}.txt", shared / f"corpora/{name}.txt.xz"
        if name == "multilingual_cjk" and not path.exists() and "multilingual" in found:
            write_cjk_tail(found["multilingual"], path)
        if name == "web" and not path.exists():
            print(f"building {path} with benchmarks/scale.py", file=sys.stderr)
            try:
                write_web(directory, path)
            except subprocess.CalledProcessError:
                print("skipping web: scale.py needs prose_en, multilingual and code_c", file=sys.stderr)
                continue
        if not path.exists() and xz.exists():
            print(f"decompressing {xz} -> {path}", file=sys.stderr)
            directory.mkdir(parents=True, exist_ok=True)
            with lzma.open(xz) as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        if path.exists():
            found[name] = path
        else:
            build = f"python3 {shared / 'corpora/build.py'} {directory} {name}"
            print(f"skipping {name}: {path} is missing (build it with {build})", file=sys.stderr)
    return {name: path for name, path in found.items() if name in names}


def table(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown rows: medians, and the ratio to gigatoken (to ``bytepair encode`` for the stream) as the
    median of the rounds' ratios, the lowest in brackets."""
    lines = [
        "| section | corpus | tool | MB/s | calls/s | peak RSS MB | ratio (lowest) | per round | by CPU "
        "time |",
        "|---|---|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        mbps = r.get("mbps")
        speed = f"{mbps:.1f}" if mbps else r["error"]
        calls = f"{r['calls_per_s']:,.0f}" if "calls_per_s" in r else "–"
        rss = f"{r['rss_mb']:.0f}" if "rss_mb" in r else "–"
        if "rss_growth_mb" in r:
            rss = f"+{r['rss_growth_mb']:.1f} (growth)"
        ratio = f"{r['ratio']:.2f} ({r['ratio_low']:.2f})" if "ratio" in r and r["tool"] != r["base"] else "–"
        each = ", ".join(f"{x:.2f}" for x in r["ratios"]) if ratio != "–" else ""
        by_cpu = (
            f"{r['cpu_ratio']:.2f} ({r['cpu_ratio_low']:.2f})" if ratio != "–" and "cpu_ratio" in r else "–"
        )
        lines.append(
            f"| {r['section']} | {r['corpus']} | {r['tool']} | {speed} | {calls} | {rss} | {ratio} | {each} "
            f"| {by_cpu} |"
        )
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    default_corpora = os.environ.get("BYTEPAIR_CORPORA", str(ROOT.parent / "corpora"))
    default_shared = os.environ.get("BYTEPAIR_SHARED", str(ROOT.parent / "shared"))
    p.add_argument("--corpora", type=Path, default=Path(default_corpora), help="dir of the NAME.txt corpora")
    p.add_argument("--shared", type=Path, default=Path(default_shared), help="the project's shared data")
    p.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    p.add_argument("--sections", nargs="+", choices=list(SECTIONS), default=list(SECTIONS))
    p.add_argument("--only", nargs="+", metavar="CORPUS", help="restrict to these corpora (e.g. prose_en)")
    p.add_argument("--repeat", type=int, default=3, help="median of N fresh processes, round by round")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement process")
    p.add_argument("--markdown", type=Path, help="also write the report to this file")
    p.add_argument("--baseline", type=Path, help="a folder with an earlier build's bytepair/ to time too")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        spec = json.loads(args.child)
        Path(spec["out"]).write_text(json.dumps(child(spec)))
        return

    if args.baseline and not (args.baseline / "bytepair" / "__init__.py").is_file():
        # Without DIR/bytepair the import would fall through to the installed package: the code under
        # test timed twice.
        p.error(f"--baseline: {args.baseline / 'bytepair' / '__init__.py'} does not exist")
    if args.baseline:
        args.baseline = args.baseline.resolve()
    installed = [t for t in args.tools if importlib.util.find_spec(t)]
    wanted = {c for s in args.sections for c in CORPORA[s] if not args.only or c in args.only}
    if "after" in args.sections:
        wanted |= set(OTHER_WORK)
    corpora = prepare_corpora(args.corpora, args.shared, wanted)
    peers = [t for t in installed if t != "bytepair"]
    versions = ", ".join(f"{t} {importlib.metadata.version(t)}" for t in ["bytepair", *peers])
    load1, load5, _ = os.getloadavg()
    report = [
        "# Encoding throughput, GPT-2 vocabulary",
        "",
        f"{versions}; Python {sys.version.split()[0]}; {os.cpu_count()} CPUs, load average {load1:.2f} / "
        f"{load5:.2f} at start; MB = 1e6 bytes of UTF-8 input; medians of {args.repeat} rounds.",
    ]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bytepair-bench-") as tmp:
        report += ["", "## Ids vs bytepair (first 1 MB of each corpus)", ""]
        spec: dict[str, Any] = {
            "section": "verify",
            "tools": peers,
            "corpora": {k: str(v) for k, v in corpora.items()},
        }
        checked = run_child({**spec, "shared": str(args.shared), "work": tmp}, args.timeout)
        report += checked.get("lines", [f"- check {checked.get('error')}"])
        for section in args.sections:
            # corpora may hold more than --only: the other work of the after section.
            for name in (c for c in CORPORA[section] if c in corpora and (not args.only or c in args.only)):
                path = corpora[name]
                if section == "files":
                    with open(path, "rb") as f:  # into the page cache, so that no tool pays for the disk
                        while f.read(1 << 24):
                            pass
                if section == "iterable":
                    path = stream_prefix(path, Path(tmp))
                    os.sync()  # the copy's writeback before, not during, the timed runs
                spec = {"section": section, "path": str(path), "work": tmp, "shared": str(args.shared)}
                spec["pin"] = section in ("single", "after", "short")
                if section == "after":
                    other = corpora.get(next(c for c in OTHER_WORK if c != name))
                    if other is None:
                        print(f"skipping after {name}: no corpus to encode first", file=sys.stderr)
                        continue
                    spec["other"] = str(other)
                if section == "iterable":
                    specs = {"bytepair": {**spec, "tool": "bytepair"}}
                    specs[STREAM_REFERENCE] = {**spec, "tool": "bytepair", "reference": True}
                    tools, base = ["bytepair", STREAM_REFERENCE], STREAM_REFERENCE
                else:
                    specs = {tool: {**spec, "tool": tool} for tool in args.tools if tool in installed}
                    tools, base = list(args.tools), "gigatoken"
                    if "bytepair" in specs and section in ("single", "after", "short"):
                        specs[NUMPY_ROW] = {**spec, "tool": "bytepair", "numpy": True}
                        tools.insert(tools.index("bytepair") + 1, NUMPY_ROW)
                    if "bytepair" in specs and args.baseline:
                        specs[BASELINE_ROW] = {**spec, "tool": "bytepair", "baseline": str(args.baseline)}
                        tools.insert(tools.index("bytepair") + 1, BASELINE_ROW)
                        if NUMPY_ROW in specs:
                            specs[BASELINE_NUMPY_ROW] = {**specs[BASELINE_ROW], "numpy": True}
                            tools.insert(tools.index(NUMPY_ROW) + 1, BASELINE_NUMPY_ROW)
                    if "gigatoken" in specs and section in ("single", "after"):
                        specs[BYTES_ROW] = {**spec, "tool": "gigatoken", "utf8": True}
                        tools.insert(tools.index("gigatoken") + 1, BYTES_ROW)
                if "bytepair" not in installed:
                    specs = {t: s for t, s in specs.items() if s["tool"] != "bytepair"}
                results = interleaved(specs, args.repeat, args.timeout, base)
                for tool in tools:
                    row = {"section": SECTIONS[section], "corpus": name, "tool": tool, "base": base}
                    rows.append({**row, **results.get(tool, {"error": "not installed"})})
                    print(f"{section} {name} {tool}: {rows[-1]}", file=sys.stderr)
    report += ["", "## Results", "", *table(rows), ""]
    report.append(
        "1 core: `encode(str)` on 20 MB, pinned to CPU 0. 1 core, after other work: the same call after one "
        f"on the first 20 MB of {OTHER_WORK[0]} (of {OTHER_WORK[1]} for {OTHER_WORK[0]}) in the same "
        "process, whose ids it keeps. all cores: whole file; tiktoken and HF times "
        "include reading the file, splitting it into documents and packing ids into arrays. streaming: "
        "bytepair `encode_iterable` over the file's lines, the ratio to `encode(str)` of the same text in "
        "the same round; the RSS column is the growth during the call. short texts: one `encode` call per "
        "line of 20 to 200 bytes, pinned to CPU 0. MB/s and calls/s are medians of the runs; ratios are "
        "the median of each round's ratio, the lowest in brackets; by CPU time: the same ratio of speeds "
        "computed from each process's CPU time in the timed call instead of its wall time."
    )
    if counts := "; ".join(f"{r['corpus']} {r['tool']} {r['tokens']:,}" for r in rows if "tokens" in r):
        report += ["", f"Tokens (all cores; tiktoken and HF leave out the {EOT} separators): {counts}."]
    print("\n".join(report))
    if args.markdown:
        args.markdown.write_text("\n".join(report) + "\n")


if __name__ == "__main__":
    main()
