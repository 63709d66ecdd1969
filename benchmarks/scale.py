"""Scale benchmark: an OWT-class dataset in shards as corpora ship, built deterministically; training on it.

Subcommands:

    python benchmarks/scale.py build --out DIR [--size-gb 11] [--shards 500] [--seed 0] [--also-txt]
    python benchmarks/scale.py stats --data DIR          # Heaps and Zipf fits (needs --also-txt's copy)
    python benchmarks/scale.py run --data DIR [--tools bytepair,gigatoken] [--vocab-size 32000]

``build`` writes, in DIR:

- ``shards/shard-NNNNN.jsonl.zst`` (even NNNNN) and ``shards/shard-NNNNN.parquet`` (odd): each holds at
  least ``size_gb * 1e9 / shards`` bytes of UTF-8 text, in documents of a few KB. jsonl.zst as SlimPajama
  and DCLM ship it: one JSON record ``{"text": ..., "id": ...}`` a line, one zstd frame (level 3). parquet as
  FineWeb ships it (datatrove's writer: pyarrow's defaults, so snappy, and one row group per 1000
  documents): columns ``text`` and ``id``.
- ``joined.txt`` with ``--also-txt``: the same documents, in the same order, joined by ``<|endoftext|>``:
  training on it must give exactly what training on the shards gives.
- ``manifest.json``: every shard's format, documents and bytes of text, the totals, the seed, the
  generator's parameters and this script's version.

How the text is made (all of it from the seed and the corpora, so the same seed gives byte-identical
files; shard ``i`` draws from its own generator seeded ``[seed, i]``):

1. Documents are windows of the shared corpora (``prose_en``, ``multilingual``, ``code_c``: see
   ``../shared/README.md``), cut inside one corpus document, starting and ending at line ends, with
   log-normal lengths (median 3 KB; OpenWebText averages about 4.7 KB). A document comes from prose_en,
   multilingual or code_c with probability 0.5, 0.15, 0.35.
2. The corpora alone hold 1.3 M distinct GPT-2 pre-tokens, and web text keeps finding new ones as it
   grows: Heaps' law, distinct ~ K * N**beta with beta around 0.5-0.7. So 15% of the words (maximal runs of
   letters and non-ASCII bytes, 2-40 bytes long) are replaced by words from an unbounded synthetic lexicon.
   The word of rank r is drawn with probability ~ (r + q)**-a: the limit law of a Pitman-Yor process's
   ranked weights with discount d = 1/a. Drawing from it independently gives Zipf's law in rank and Heaps'
   growth with beta = 1/a (a = 1.6: beta 0.625); the shift q sets how many distinct words a given amount
   of text holds (it flattens the head, which the corpora's own Zipfian words cover). The inverse CDF
   is closed-form, so a whole batch is drawn with a few numpy operations.
3. A rank becomes a word by its digits: rank -> (number of pieces k, index below S**k), the index
   scrambled by a bijection, each base-S digit picking one of the S most frequent pieces of the corpora's
   own words in the replaced word's script: syllables (consonants + vowels, with the final consonants)
   of prose and man-page words for Latin script, of C identifiers for code, single characters for
   Chinese and Japanese. More frequent ranks get fewer pieces, so frequent words are short. A replaced
   word that was capitalised or all capitals stays so.

Every step is vectorised over a batch of 1000 documents and shards are written as they are made, so
memory stays bounded (the corpora are memory-mapped). ``stats`` counts distinct pre-tokens of growing
prefixes with bytepair and fits Heaps' law, and fits Zipf's law on a sample.

``run`` trains each tool in a fresh child process and reports wall time, peak RSS (``os.wait4``), and
phases where the tool tells them: bytepair's progress callback marks where counting ends and merging
starts; gigatoken prints lines (``N unique words``, ``Starting merges``) that the parent timestamps.
Tools:

- ``bytepair``: ``train_bpe(DIR/shards, vocab_size, special_tokens=[EOT], stats=...)``, the call issue 14
  adds.
- ``bytepair-txt``: ``train_bpe(DIR/joined.txt, ...)``, the same documents as one txt.
- ``gigatoken``: its ``train_bpe`` takes one source, so one run with ``JsonlFileSource`` over the
  jsonl.zst shards and one with ``ParquetFileSource`` over the parquet shards, each half of the data.
- ``gigatoken-txt``: ``gigatoken.train_bpe(DIR/joined.txt, ...)``.

A child whose RSS passes ``--max-rss-gb`` is killed and reported as such. Needs
``pip install -r benchmarks/requirements.txt`` (pyarrow and zstandard write the shards; gigatoken runs).
"""

from __future__ import annotations

import argparse
import json
import math
import mmap
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SCRIPT_VERSION = 1
EOT = "<|endoftext|>"
SEPARATOR = b"\n" + EOT.encode() + b"\n"  # how ../shared/corpora/build.py ends each document
ROOT = Path(__file__).resolve().parents[1]
# The project's shared data (the packed corpora and their build script), as benchmarks/README.md says.
SHARED = Path(os.environ.get("BYTEPAIR_SHARED", ROOT.parent / "shared"))
CORPORA = ("prose_en", "multilingual", "code_c")
DOC_SHARE = (0.5, 0.15, 0.35)  # probability that a document comes from each corpus
DOC_MEDIAN, DOC_SIGMA, DOC_MIN, DOC_MAX = 3000, 0.9, 64, 65536  # bytes: log-normal, clipped
BATCH_DOCS = 1000  # documents drawn at once; a parquet row group
REPLACE = 0.15  # fraction of eligible words replaced by synthetic ones
WORD_MIN, WORD_MAX = 2, 40  # bytes of a replaceable word
ZIPF_A, ZIPF_Q = 1.6, 7_000.0  # synthetic word of rank r drawn with probability ~ (r + q)**-a
LATIN, CODE, CJK = 0, 1, 2  # scripts of synthetic words
# Per script: bits of a digit (2**bits pieces) and the most pieces a word has.
PIECE_BITS = {LATIN: 9, CODE: 9, CJK: 10}
MAX_PIECES = {LATIN: 5, CODE: 5, CJK: 3}
SAMPLE_BYTES = 8_000_000  # of each corpus, for the piece inventories
VOWELS = "aeiouyäöüàâéèêëîïôûùœ"
MIX1, MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)  # odd: bijective mod 2**n
RESULT = "RESULT "
START = "START "


# ----------------------------------------------------------------------------------------------- build


@dataclass
class Corpus:
    """One corpus file, memory-mapped, with the byte ranges of its documents."""

    name: str
    data: mmap.mmap
    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def open(cls, name: str, path: Path) -> Corpus:
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        starts, ends, pos = [], [], 0
        while (sep := data.find(SEPARATOR, pos)) >= 0:
            starts.append(pos)
            ends.append(sep + 1)  # a document keeps its last newline
            pos = sep + len(SEPARATOR)
        if pos < len(data):
            starts.append(pos)
            ends.append(len(data))
        return cls(name, data, np.array(starts, np.int64), np.array(ends, np.int64))


@dataclass
class Lexicon:
    """The pieces synthetic words are made of, all scripts in one table."""

    table: np.ndarray  # uint8: every piece's bytes, concatenated
    offsets: np.ndarray  # int64: piece i is table[offsets[i]:offsets[i + 1]]
    base: dict[int, int]  # script -> id of its first piece
    inventories: dict[int, list[str]] = field(repr=False)


def _syllables(text: str, count: int) -> list[str]:
    """The ``count`` most frequent syllables (consonants, vowels, and a word's final consonants) of the
    letter words of ``text``; ties by the syllable, so that the result is deterministic."""
    syllable = re.compile(f"[^{VOWELS}]*[{VOWELS}]+(?:[^{VOWELS}]+$)?")
    counts: Counter[str] = Counter()
    for word, n in Counter(re.findall(r"[a-zà-öø-ÿœ]+", text.lower())).items():
        for s in syllable.findall(word):
            counts[s] += n
    return [s for s, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def _characters(text: str, count: int) -> list[str]:
    counts = Counter(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", text))
    return [s for s, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def build_lexicon(corpora: list[Corpus]) -> Lexicon:
    """Piece inventories from ``SAMPLE_BYTES`` of each corpus, in 16 parts spread over it (the
    multilingual corpus is German, French, Japanese and Chinese, in that order)."""

    def sample(c: Corpus) -> str:
        parts, step = [], len(c.data) // 16
        for lo in range(0, 16 * step, step):
            lo = c.data.find(b"\n", lo) + 1
            hi = c.data.rfind(b"\n", lo, lo + SAMPLE_BYTES // 16) + 1
            parts.append(c.data[lo:hi])
        return b"".join(parts).decode("utf-8").replace(EOT, "")

    prose, multilingual, code = (sample(c) for c in corpora)
    inventories = {
        LATIN: _syllables(prose + multilingual, 1 << PIECE_BITS[LATIN]),
        CODE: _syllables(code, 1 << PIECE_BITS[CODE]),
        CJK: _characters(multilingual, 1 << PIECE_BITS[CJK]),
    }
    pieces, base = [], {}
    for script, inventory in inventories.items():
        if len(inventory) < 1 << PIECE_BITS[script]:
            raise SystemExit(
                f"the corpora have too few distinct pieces for script {script}: {len(inventory)}"
            )
        base[script] = len(pieces)
        pieces += [p.encode() for p in inventory]
    offsets = np.zeros(len(pieces) + 1, np.int64)
    offsets[1:] = np.cumsum([len(p) for p in pieces])
    return Lexicon(np.frombuffer(b"".join(pieces), np.uint8), offsets, base, inventories)


def _gather(source: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``source[starts[i]:starts[i] + lengths[i]]`` for all i, without a loop."""
    before = np.cumsum(lengths) - lengths
    return source[np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()))]


def synthetic_ranks(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ranks >= 1 with P(r) ~ (r + q)**-a: the inverse of the continuous CDF, floored."""
    u = rng.random(n)
    r = (1 + ZIPF_Q) * (1 - u) ** (-1 / (ZIPF_A - 1)) - ZIPF_Q
    return np.minimum(np.floor(r), 2.0**52).astype(np.uint64)


def piece_ids(ranks: np.ndarray, script: int, lexicon: Lexicon) -> np.ndarray:
    """Rows of piece ids (-1 after a word's last piece) of the words of ``ranks`` in ``script``."""
    bits, most = PIECE_BITS[script], MAX_PIECES[script]
    sizes = [1 << (bits * k) for k in range(1, most + 1)]  # words of k pieces
    bounds = np.cumsum(np.array(sizes, np.uint64))
    m = (ranks - np.uint64(1)) % bounds[-1]
    k = np.searchsorted(bounds, m, side="right") + 1
    below = np.concatenate([[np.uint64(0)], bounds[:-1]])[k - 1]
    width = (k * bits).astype(np.uint64)
    mask = (np.uint64(1) << width) - np.uint64(1)
    x = ((m - below) * MIX1) & mask  # a bijection of [0, 2**width): neighbouring ranks look unrelated
    x ^= x >> (width // np.uint64(2))
    x = (x * MIX2) & mask
    ids = np.full((len(ranks), max(MAX_PIECES.values())), -1, np.int64)
    digit = np.uint64((1 << bits) - 1)
    for i in range(most):
        d = ((x >> np.uint64(bits * i)) & digit).astype(np.int64) + lexicon.base[script]
        ids[:, i] = np.where(i < k, d, -1)
    return ids


def replace_words(
    text: np.ndarray,
    doc_starts: np.ndarray,
    doc_corpus: np.ndarray,
    lexicon: Lexicon,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Replaces a fraction of the words of ``text`` (documents beginning at ``doc_starts``, the last
    ending at the end) by synthetic words; returns the new text and its document starts."""
    n = len(text)
    b = np.empty(n + 1, np.uint8)  # a trailing non-letter, so that every run ends before the end
    b[:n], b[n] = text, 0x0A
    lower = b | 0x20
    is_lower = (b >= 0x61) & (b <= 0x7A)
    is_letter = (lower >= 0x61) & (lower <= 0x7A)
    in_word = is_letter | (b >= 0x80)
    before = np.zeros(n + 1, bool)
    before[1:] = in_word[:-1]
    before[doc_starts] = False  # no word spans two documents
    after = np.zeros(n + 1, bool)
    after[:-1] = in_word[1:]
    after[doc_starts[1:] - 1] = False
    starts = np.flatnonzero(in_word & ~before)
    ends = np.flatnonzero(in_word & ~after) + 1

    def per_word(flags: np.ndarray) -> np.ndarray:  # how many bytes of each word have the flag
        total = np.zeros(n + 2, np.int32)
        np.cumsum(flags, out=total[1:])
        return total[ends] - total[starts]

    non_ascii, wide, lowers, letters = (per_word(f) for f in (b >= 0x80, b >= 0xE0, is_lower, is_letter))
    corpus = doc_corpus[np.searchsorted(doc_starts, starts, side="right") - 1]
    length = ends - starts
    script = np.full(len(starts), -1)
    code = corpus == CORPORA.index("code_c")
    script[code & (non_ascii == 0)] = CODE
    # ASCII letters with two-byte (Latin, Greek, Cyrillic) letters, not a lone '«'
    script[~code & (wide == 0) & (letters > 0)] = LATIN
    first = b[starts]
    script[~code & (non_ascii == length) & (first >= 0xE3) & (first <= 0xE9)] = CJK  # kana, CJK ideographs
    chosen = (script >= 0) & (length >= WORD_MIN) & (length <= WORD_MAX) & (rng.random(len(starts)) < REPLACE)
    starts, ends, script, first = starts[chosen], ends[chosen], script[chosen], first[chosen]
    capitals = (lowers[chosen] == 0) & (letters[chosen] >= 2)

    ids = np.empty((len(starts), max(MAX_PIECES.values())), np.int64)
    ranks = synthetic_ranks(rng, len(starts))
    for s in (LATIN, CODE, CJK):
        ids[script == s] = piece_ids(ranks[script == s], s, lexicon)
    flat = ids[ids >= 0]
    piece_len = np.diff(lexicon.offsets)
    word_len = np.where(ids >= 0, piece_len[np.maximum(ids, 0)], 0).sum(axis=1)
    words = _gather(lexicon.table, lexicon.offsets[flat], piece_len[flat]).copy()
    word_starts = np.cumsum(word_len) - word_len
    upper = np.zeros(len(words), bool)
    upper[word_starts[(first >= 0x41) & (first <= 0x5A)]] = True
    upper |= np.repeat(capitals, word_len)
    upper &= (words >= 0x61) & (words <= 0x7A)
    words[upper] -= 0x20

    # The text between replaced words, interleaved with the new words, gathered in one go.
    part_from = np.empty(2 * len(starts) + 1, np.int64)
    part_len = np.empty_like(part_from)
    part_from[0::2] = np.concatenate([[0], ends])
    part_len[0::2] = np.concatenate([starts, [n]]) - part_from[0::2]
    part_from[1::2], part_len[1::2] = n + word_starts, word_len
    out = _gather(np.concatenate([text, words]), part_from, part_len)
    growth = np.concatenate([[0], np.cumsum(word_len - (ends - starts))])
    return out, doc_starts + growth[np.searchsorted(starts, doc_starts)]


def sample_documents(corpora: list[Corpus], rng: np.random.Generator) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A batch of documents: their bytes, the start of each and the corpus each comes from."""
    which = rng.choice(len(corpora), size=BATCH_DOCS, p=DOC_SHARE)
    length = np.clip(rng.lognormal(math.log(DOC_MEDIAN), DOC_SIGMA, BATCH_DOCS), DOC_MIN, DOC_MAX).astype(int)
    where = rng.random(BATCH_DOCS)
    parts, kept = [], []
    for i, (c, want, u) in enumerate(zip(which.tolist(), length.tolist(), where.tolist())):
        corpus = corpora[c]
        pos = int(u * len(corpus.data))
        d = int(np.searchsorted(corpus.starts, pos, side="right")) - 1
        lo_doc, hi_doc = int(corpus.starts[d]), int(corpus.ends[d])
        lo = max(lo_doc, pos - want // 2)
        hi = min(hi_doc, lo + want)
        lo = max(lo_doc, hi - want)
        if lo > lo_doc:  # start and end at line ends
            lo = corpus.data.find(b"\n", lo, hi) + 1 or hi
        if hi < hi_doc:
            hi = corpus.data.rfind(b"\n", lo, hi) + 1 or lo
        if hi - lo >= DOC_MIN:
            parts.append(corpus.data[lo:hi])
            kept.append(i)
    sizes = np.array([len(p) for p in parts], np.int64)
    return b"".join(parts), np.cumsum(sizes) - sizes, which[kept]


class ShardWriter:
    """Writes one shard's documents as jsonl.zst or parquet, under a temporary name until closed."""

    def __init__(self, path: Path, shard: int) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        import zstandard

        self.path, self.shard, self.documents, self.text_bytes = path, shard, 0, 0
        self.partial = path.with_name(path.name + ".partial")
        self.file = open(self.partial, "wb")
        if path.name.endswith(".parquet"):
            schema = pa.schema([("text", pa.string()), ("id", pa.string())])
            self.parquet = pq.ParquetWriter(self.file, schema, compression="snappy")
        else:
            self.parquet = None
            self.zstd = zstandard.ZstdCompressor(level=3).stream_writer(self.file, closefd=False)

    def write(self, text: bytes, starts: np.ndarray) -> None:
        import pyarrow as pa

        ends = np.append(starts[1:], len(text))
        ids = [f"{self.shard:05d}-{self.documents + i:07d}" for i in range(len(starts))]
        if self.parquet is not None:
            offsets = np.append(starts, len(text)).astype(np.int32)
            column = pa.StringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(text))
            column.validate(full=True)  # UTF-8, checked
            self.parquet.write_table(pa.table({"text": column, "id": pa.array(ids)}))
        else:
            lines = (
                json.dumps({"text": text[s:e].decode("utf-8"), "id": i}, ensure_ascii=False) + "\n"
                for s, e, i in zip(starts.tolist(), ends.tolist(), ids)
            )
            self.zstd.write("".join(lines).encode("utf-8"))
        self.documents += len(starts)
        self.text_bytes += len(text)

    def close(self) -> None:
        if self.parquet is not None:
            self.parquet.close()
        else:
            self.zstd.close()
        self.file.close()
        self.partial.rename(self.path)


def corpus_file(corpora_dir: Path, name: str) -> Path:
    path = corpora_dir / f"{name}.txt"
    if not path.exists():
        packed = SHARED / "corpora"
        raise SystemExit(
            f"{path} is missing: decompress {packed}/{name}.txt.xz there, or build it (code_c: as root, a "
            f"few minutes) with `python3 {packed}/build.py {corpora_dir} {name}`"
        )
    return path


def build(args: argparse.Namespace) -> None:
    out: Path = args.out
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out} is not empty: build into a new directory")
    started = time.perf_counter()
    corpora = [Corpus.open(name, corpus_file(args.corpora, name)) for name in CORPORA]
    lexicon = build_lexicon(corpora)
    shard_dir = out / "shards"
    shard_dir.mkdir(parents=True)
    target = math.ceil(args.size_gb * 1e9 / args.shards)
    txt_path = out / "joined.txt"
    txt = open(txt_path.with_suffix(".txt.partial"), "wb") if args.also_txt else None
    shards = []
    for shard in range(args.shards):
        rng = np.random.default_rng([args.seed, shard])
        name = f"shard-{shard:05d}." + ("jsonl.zst" if shard % 2 == 0 else "parquet")
        writer = ShardWriter(shard_dir / name, shard)
        while writer.text_bytes < target:
            raw, starts, corpus = sample_documents(corpora, rng)
            text, starts = replace_words(np.frombuffer(raw, np.uint8), starts, corpus, lexicon, rng)
            ends = np.append(starts[1:], len(text))
            enough = int(np.searchsorted(writer.text_bytes + ends, target)) + 1  # documents to keep
            starts = starts[:enough]
            text = text[: int(ends[len(starts) - 1])].tobytes()
            if txt is not None:
                docs = [text[s:e] for s, e in zip(starts.tolist(), np.append(starts[1:], len(text)).tolist())]
                txt.write((EOT.encode() if shard or writer.documents else b"") + EOT.encode().join(docs))
            writer.write(text, starts)
        writer.close()
        shards.append(
            {
                "file": f"shards/{name}",
                "format": name.split(".", 1)[1],
                "documents": writer.documents,
                "text_bytes": writer.text_bytes,
                "file_bytes": (shard_dir / name).stat().st_size,
            }
        )
        if (shard + 1) % 10 == 0 or shard + 1 == args.shards:
            done = sum(s["text_bytes"] for s in shards)
            elapsed = time.perf_counter() - started
            print(
                f"{shard + 1}/{args.shards} shards, {done / 1e9:.2f} GB, {elapsed:.0f} s, "
                f"{done / 1e6 / elapsed:.1f} MB/s",
                file=sys.stderr,
                flush=True,
            )
    if txt is not None:
        txt.close()
        txt_path.with_suffix(".txt.partial").rename(txt_path)
    manifest = {
        "script": "benchmarks/scale.py",
        "script_version": SCRIPT_VERSION,
        "seed": args.seed,
        "size_gb": args.size_gb,
        "text_bytes": sum(s["text_bytes"] for s in shards),
        "documents": sum(s["documents"] for s in shards),
        "joined_txt": "joined.txt" if txt is not None else None,
        "generator": {
            "doc_share": dict(zip(CORPORA, DOC_SHARE)),
            "doc_bytes": {"median": DOC_MEDIAN, "sigma": DOC_SIGMA, "min": DOC_MIN, "max": DOC_MAX},
            "replace": REPLACE,
            "zipf_a": ZIPF_A,
            "zipf_q": ZIPF_Q,
            "piece_bits": PIECE_BITS,
        },
        "shards": shards,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(
        f"{out}: {manifest['text_bytes'] / 1e9:.2f} GB of text, {manifest['documents']} documents, "
        f"{args.shards} shards, {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )


# ------------------------------------------------------------------------------------------------ stats


def load_manifest(data: Path) -> dict:
    try:
        return json.loads((data / "manifest.json").read_text())
    except FileNotFoundError:
        raise SystemExit(
            f"{data}/manifest.json is missing: build the dataset with `scale.py build`"
        ) from None


def count_distinct(txt: Path, size: int) -> int:
    """Distinct pre-tokens of the first ``size`` bytes of ``txt``, counted by bytepair (training with no
    merge), fed through a FIFO so that no copy of the prefix is written."""
    import bytepair

    with tempfile.TemporaryDirectory(prefix="bytepair-scale-") as tmp:
        fifo = Path(tmp) / "prefix.txt"
        os.mkfifo(fifo)
        # The shell, not this process, blocks opening the FIFO until bytepair opens it to read.
        command = f"head -c {size} {shlex.quote(str(txt))} > {shlex.quote(str(fifo))}"
        writer = subprocess.Popen(command, shell=True)
        stats: dict = {}
        try:
            bytepair.train_bpe(str(fifo), 257, [EOT], stats=stats)
        finally:
            writer.wait(timeout=60)
    if stats["bytes"] != size:
        raise SystemExit(f"read {stats['bytes']} bytes of {txt}, not {size}")
    return stats["distinct_pretokens"]


def zipf_profile(txt: Path, size: int) -> tuple[Counter[str], int]:
    """Pre-token counts of the first ``size`` bytes of ``txt`` (whole documents), and their total."""
    import bytepair

    counts: Counter[str] = Counter()
    with open(txt, encoding="utf-8", newline="") as f:
        for doc in f.read(size).split(EOT)[:-1]:
            counts.update(bytepair.pretokenize(doc))
    return counts, sum(counts.values())


def fit(x: list[float], y: list[float]) -> tuple[float, float]:
    """Least-squares line through (log x, log y): (slope, exp(intercept))."""
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope), float(math.exp(intercept))


def stats(args: argparse.Namespace) -> None:
    manifest = load_manifest(args.data)
    txt = args.data / "joined.txt"
    if not manifest["joined_txt"] or not txt.exists():
        raise SystemExit(f"{txt} is missing: build with --also-txt")
    # Prefixes of 1, 2, 4, ... shards, and all of them: each ends at a document's end.
    shards = manifest["shards"]
    counts = sorted({*(1 << k for k in range(int(math.log2(len(shards))) + 1)), len(shards)})
    sizes = []
    for k in counts:
        docs = sum(s["documents"] for s in shards[:k])
        sizes.append(sum(s["text_bytes"] for s in shards[:k]) + (docs - 1) * len(EOT))
    sample, total = zipf_profile(txt, min(sizes[0], args.zipf_bytes))
    per_byte = total / sum(len(t.encode()) * c for t, c in sample.items())
    rows = ["| shards | GB | pre-tokens (est.) | distinct pre-tokens |", "|---|---|---|---|"]
    points = []
    for k, size in zip(counts, sizes):
        started = time.perf_counter()
        distinct = count_distinct(txt, size)
        points.append((size * per_byte, distinct))
        rows.append(f"| {k} | {size / 1e9:.3f} | {size * per_byte:.3e} | {distinct:,} |")
        print(rows[-1], f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    beta, k_heaps = fit([p[0] for p in points], [p[1] for p in points])
    ranked = np.array(sorted(sample.values(), reverse=True), float)
    zipf = []
    for lo, hi in ((1, 100), (100, 10_000), (10_000, 1_000_000)):
        if len(ranked) > lo * 10:
            r = np.arange(lo, min(hi, len(ranked)) + 1)
            zipf.append(f"ranks {lo}-{r[-1]}: {-fit(list(r), list(ranked[r - 1]))[0]:.2f}")
    hapax = int((ranked == 1).sum())
    lines = [
        *rows,
        "",
        f"- Heaps fit over these prefixes: distinct = {k_heaps:.1f} * N**{beta:.3f} (N = pre-tokens, "
        f"estimated at {per_byte:.4f} per byte from the first {min(sizes[0], args.zipf_bytes) / 1e6:.0f} MB)",
        f"- Zipf exponents of rank-frequency on that sample ({total:,} pre-tokens, {len(sample):,} distinct, "
        f"{hapax:,} seen once): " + "; ".join(zipf),
    ]
    print("\n".join(lines))


# ------------------------------------------------------------------------------------------------- run


@dataclass
class Run:
    """One tool's training on the dataset, or why there is none."""

    tool: str
    data: str
    seconds: float = 0.0
    count_seconds: float | None = None
    merge_seconds: float | None = None
    rss_mb: float = 0.0
    merges: int = 0
    counts: tuple[int, int] | None = None  # distinct and all pre-tokens, when the run counted
    error: str | None = None
    load: tuple[float, float] = (0.0, 0.0)  # the 1-minute load average before and after the run


def shard_files(data: Path, suffix: str) -> list[str]:
    return sorted(str(p) for p in (data / "shards").iterdir() if p.name.endswith(suffix))


def child(tool: str, data: Path, vocab_size: int) -> None:
    """In the child process: trains once and prints the merges made and the phases it saw."""
    phases: dict[str, float] = {}
    print(START, flush=True)
    start = time.perf_counter()
    if tool in COUNT_INPUTS:
        import bytepair

        counts = bytepair.count_pretokens(count_sources(data)[tool], special_tokens=[EOT])
        result = {"seconds": time.perf_counter() - start, "merges": 0, "merge_start": None}
        print(RESULT + json.dumps({**result, "distinct": len(counts), "total": counts.total()}), flush=True)
        return
    if tool.startswith("bytepair"):
        import bytepair

        def progress(phase: str, done: int, total: int) -> None:
            phases.setdefault(phase, time.perf_counter() - start)

        source = data / "shards" if tool == "bytepair" else data / "joined.txt"
        stats: dict = {}
        vocab_merges = bytepair.train_bpe(source, vocab_size, [EOT], stats=stats, progress=progress)
        merges = vocab_merges[1]
    else:
        import gigatoken

        if tool == "gigatoken-jsonl":
            source = gigatoken.JsonlFileSource(shard_files(data, ".jsonl.zst"))
        elif tool == "gigatoken-parquet":
            source = gigatoken.ParquetFileSource(shard_files(data, ".parquet"))
        else:
            source = str(data / "joined.txt")
        merges = gigatoken.train_bpe(source, vocab_size, [EOT], tie_breaking="assembled_bytes")[1]
    seconds = time.perf_counter() - start
    merge_start = phases.get("merge")
    print(
        RESULT + json.dumps({"seconds": seconds, "merges": len(merges), "merge_start": merge_start}),
        flush=True,
    )


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0


def run_child(tool: str, data: Path, vocab_size: int, timeout: float, max_rss_gb: float) -> Run:
    """Runs one training in a fresh process; times the lines it prints, watches its RSS."""
    where = {
        "bytepair": "shards/",
        "gigatoken-jsonl": "shards/*.jsonl.zst",
        "gigatoken-parquet": "shards/*.parquet",
    }
    result = Run(tool, where.get(tool, COUNT_INPUTS.get(tool, "joined.txt")))
    args = [sys.executable, str(Path(__file__).resolve()), "_child", tool, str(data), str(vocab_size)]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        started, counted, buffer, last = None, None, b"", None
        while True:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            now = time.monotonic()
            chunk = os.read(proc.stdout.fileno(), 1 << 16) if ready else b""
            if ready and not chunk:
                break  # the child closed its stdout: it is exiting
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in (x.decode(errors="replace") for x in lines):
                if line.startswith(START):
                    started = now
                elif "unique words" in line and started is not None:  # gigatoken: counting is done
                    counted = now - started
                elif line.startswith(RESULT):
                    last = json.loads(line[len(RESULT) :])
            stop = None
            if now > deadline:
                stop = f"stopped after {timeout:.0f} s"
            elif rss_kb(proc.pid) > max_rss_gb * 1024 * 1024:
                stop = f"stopped: RSS above {max_rss_gb:.0f} GB"
            if stop:
                os.killpg(proc.pid, signal.SIGKILL)
                os.wait4(proc.pid, 0)
                proc.returncode = -signal.SIGKILL
                result.error = stop
                return result
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        errors = err.read().strip().splitlines()
    result.rss_mb = usage.ru_maxrss / 1024
    if last is None or proc.returncode != 0:
        result.error = "failed: " + (errors[-1][:200] if errors else f"exit status {proc.returncode}")
    elif "error" in last:
        result.error = last["error"]
    else:
        result.seconds, result.merges = last["seconds"], last["merges"]
        if "distinct" in last:
            result.counts = (last["distinct"], last["total"])
        if last["merge_start"] is not None:
            counted = last["merge_start"]
        if counted is not None:
            result.count_seconds, result.merge_seconds = counted, result.seconds - counted
    return result


def run(args: argparse.Namespace) -> None:
    manifest = load_manifest(args.data)
    runs = []
    for tool in args.tools:
        variants = ["gigatoken-jsonl", "gigatoken-parquet"] if tool == "gigatoken" else [tool]
        for variant in variants:
            if variant.endswith("-txt") and not (args.data / "joined.txt").exists():
                runs.append(Run(variant, "joined.txt", error="no joined.txt: build with --also-txt"))
                continue
            before = os.getloadavg()[0]
            r = run_child(variant, args.data, args.vocab_size, args.timeout, args.max_rss_gb)
            r.load = (before, os.getloadavg()[0])
            runs.append(r)
            print(
                f"{variant}: {r.error or f'{r.seconds:.1f} s, {r.rss_mb:.0f} MB'}",
                file=sys.stderr,
                flush=True,
            )

    def seconds(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    rows = [
        "| tool | input | wall s | count s | merge s | peak RSS MB | merges | load before, after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        load = f"{r.load[0]:.1f}, {r.load[1]:.1f}"
        if r.error:
            rows.append(f"| {r.tool} | {r.data} | {r.error} | | | | | {load} |")
        else:
            rows.append(
                f"| {r.tool} | {r.data} | {r.seconds:.1f} | {seconds(r.count_seconds)} | "
                f"{seconds(r.merge_seconds)} | {r.rss_mb:.0f} | {r.merges} | {load} |"
            )
    formats = Counter(s["format"] for s in manifest["shards"])
    report = "\n".join(
        [
            *rows,
            "",
            f"- data: {args.data}, {manifest['text_bytes'] / 1e9:.2f} GB of text in "
            f"{manifest['documents']:,} documents, "
            f"{', '.join(f'{n} {f}' for f, n in sorted(formats.items()))} shards; vocab "
            f"{args.vocab_size}; {os.cpu_count()} cores",
            "- count s: reading, decompressing and counting; merge s: the rest of the call. gigatoken's "
            "train_bpe takes one source, so it trains on each half of the shards separately.",
            "- load: the machine's 1-minute load average just before and just after each run (other work "
            f"shares its {os.cpu_count()} cores; the run itself adds up to {os.cpu_count()}).",
        ]
    )
    print(report)
    if args.markdown:
        args.markdown.write_text(report + "\n")


# ----------------------------------------------------------------------------------------------- count

# What the count runs read: each kind of shard, and the same documents as txt.
COUNT_INPUTS = {
    "count-jsonl": "shards/*.jsonl.zst",
    "count-jsonl-txt": "by-format/jsonl.zst.txt",
    "count-parquet": "shards/*.parquet",
    "count-parquet-txt": "by-format/parquet.txt",
    "count-shards": "shards/",
    "count-txt": "joined.txt",
}


def count_sources(data: Path) -> dict[str, str | list[str]]:
    return {
        "count-jsonl": shard_files(data, ".jsonl.zst"),
        "count-jsonl-txt": str(data / COUNT_INPUTS["count-jsonl-txt"]),
        "count-parquet": shard_files(data, ".parquet"),
        "count-parquet-txt": str(data / COUNT_INPUTS["count-parquet-txt"]),
        "count-shards": str(data / "shards"),
        "count-txt": str(data / "joined.txt"),
    }


def split_joined_txt(data: Path, manifest: dict) -> None:
    """Writes ``by-format/FORMAT.txt``: the documents of each format's shards, in order, joined by EOT, cut
    from ``joined.txt`` (shard after shard, every document followed by EOT but the last) by the manifest's
    counts; once, as ``build`` writes ``joined.txt``."""
    out = data / "by-format"
    formats = sorted({s["format"] for s in manifest["shards"]})
    if all((out / f"{f}.txt").exists() for f in formats):
        return
    out.mkdir(exist_ok=True)
    files = {f: open(out / f"{f}.txt.partial", "wb") for f in formats}
    with open(data / "joined.txt", "rb") as joined:
        for shard in manifest["shards"]:
            dst = files[shard["format"]]
            if dst.tell():
                dst.write(EOT.encode())
            left = shard["text_bytes"] + (shard["documents"] - 1) * len(EOT)
            while left:
                chunk = joined.read(min(left, 1 << 24))
                if not chunk:
                    raise SystemExit(f"{data}/joined.txt is shorter than its manifest says")
                dst.write(chunk)
                left -= len(chunk)
            if joined.read(len(EOT)) not in (EOT.encode(), b""):
                raise SystemExit(
                    f"{data}/joined.txt does not match its manifest: no EOT after {shard['file']}"
                )
    for f, dst in files.items():
        dst.close()
        (out / f"{f}.txt.partial").rename(out / f"{f}.txt")


def count(args: argparse.Namespace) -> None:
    """Counting pre-tokens from each kind of shard against the same text as txt, round by round."""
    manifest = load_manifest(args.data)
    if not manifest["joined_txt"] or not (args.data / "joined.txt").exists():
        raise SystemExit(f"{args.data}/joined.txt is missing: build with --also-txt")
    split_joined_txt(args.data, manifest)
    os.sync()  # the split's writeback before, not during, the timed runs
    text = {
        f: sum(s["text_bytes"] for s in manifest["shards"] if s["format"] == f)
        for f in ("jsonl.zst", "parquet")
    }
    pairs = [
        (
            f"jsonl.zst ({text['jsonl.zst'] / 1e9:.2f} GB)",
            text["jsonl.zst"],
            "count-jsonl",
            "count-jsonl-txt",
        ),
        (f"parquet ({text['parquet'] / 1e9:.2f} GB)", text["parquet"], "count-parquet", "count-parquet-txt"),
        (
            f"all shards ({manifest['text_bytes'] / 1e9:.2f} GB)",
            manifest["text_bytes"],
            "count-shards",
            "count-txt",
        ),
    ]
    runs: dict[str, list[Run]] = {tool: [] for _, _, *tools in pairs for tool in tools}
    for _ in range(args.repeat):
        for tool, done in runs.items():
            before = os.getloadavg()[0]
            r = run_child(tool, args.data, 0, args.timeout, args.max_rss_gb)
            r.load = (before, os.getloadavg()[0])
            done.append(r)
            print(
                f"{tool}: {r.error or f'{r.seconds:.1f} s, {r.rss_mb:.0f} MB'}", file=sys.stderr, flush=True
            )
    best = {tool: min(done, key=lambda r: (r.error is not None, r.seconds)) for tool, done in runs.items()}
    rows = [
        "| text | shards MB/s | same text as txt MB/s | shards / txt | peak RSS MB (shards, txt) | "
        "same counts | load before, after (shards; txt) |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for label, size, shards, txt in pairs:
        a, b = best[shards], best[txt]
        if a.error or b.error:
            rows.append(f"| {label} | {a.error or ''} | {b.error or ''} | | | | |")
            continue
        same = "yes" if a.counts == b.counts else f"NO: {a.counts} vs {b.counts}"
        rows.append(
            f"| {label} | {size / 1e6 / a.seconds:.1f} | {size / 1e6 / b.seconds:.1f} | "
            f"{b.seconds / a.seconds:.2f} | {a.rss_mb:.0f}, {b.rss_mb:.0f} | {same} | "
            f"{a.load[0]:.1f}, {a.load[1]:.1f}; {b.load[0]:.1f}, {b.load[1]:.1f} |"
        )
    report = "\n".join(
        [
            *rows,
            "",
            f"- data: {args.data}; `bytepair.count_pretokens(sources, special_tokens=[EOT])` in a fresh "
            f"process per run, best of {args.repeat}, runs round by round; {os.cpu_count()} cores; MB/s of "
            "text (the documents' UTF-8 bytes, the same for a kind of shard and its txt)",
            "- the txt files hold the same documents joined by EOT (`by-format/`, cut from `joined.txt`); "
            "same counts: equal distinct and total pre-tokens; the goal (issue 14) is shards / txt >= 0.80",
        ]
    )
    print(report)
    if args.markdown:
        args.markdown.write_text(report + "\n")


# ------------------------------------------------------------------------------------------------ main


TOOLS = ("bytepair", "bytepair-txt", "gigatoken", "gigatoken-txt")


def tools(value: str) -> list[str]:
    """An argparse type: a comma-separated list of TOOLS."""
    chosen = [v for v in value.split(",") if v]
    unknown = sorted(set(chosen) - set(TOOLS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; choose from {', '.join(TOOLS)}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the dataset")
    b.add_argument("--out", type=Path, required=True, help="a new or empty directory")
    b.add_argument("--size-gb", type=float, default=11.0, help="text in GB (1e9 bytes), at least")
    b.add_argument("--shards", type=int, default=500)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--also-txt", action="store_true", help="also write joined.txt, the documents as one txt")
    default_corpora = os.environ.get("BYTEPAIR_CORPORA", str(ROOT.parent / "corpora"))
    b.add_argument("--corpora", type=Path, default=Path(default_corpora), help="dir of the NAME.txt corpora")
    s = sub.add_parser("stats", help="Heaps and Zipf fits of a built dataset")
    s.add_argument("--data", type=Path, required=True)
    s.add_argument("--zipf-bytes", type=int, default=100_000_000, help="sample for the Zipf fit")
    r = sub.add_parser("run", help="train on a built dataset")
    r.add_argument("--data", type=Path, required=True)
    r.add_argument("--tools", type=tools, default=["bytepair", "gigatoken"], help=", ".join(TOOLS))
    r.add_argument("--vocab-size", type=int, default=32000)
    r.add_argument("--timeout", type=float, default=3600, help="seconds per training")
    r.add_argument("--max-rss-gb", type=float, default=20, help="stop a training whose RSS passes this")
    r.add_argument("--markdown", type=Path, help="also write the table to this file")
    n = sub.add_parser("count", help="count from each kind of shard and from the same text as txt")
    n.add_argument("--data", type=Path, required=True)
    n.add_argument("--repeat", type=int, default=2, help="best of N runs of each")
    n.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    n.add_argument("--max-rss-gb", type=float, default=20, help="stop a run whose RSS passes this")
    n.add_argument("--markdown", type=Path, help="also write the table to this file")
    c = sub.add_parser("_child")
    c.add_argument("tool")
    c.add_argument("data", type=Path)
    c.add_argument("vocab_size", type=int)
    args = parser.parse_args()
    if args.command == "build":
        build(args)
    elif args.command == "stats":
        stats(args)
    elif args.command == "run":
        run(args)
    elif args.command == "count":
        count(args)
    else:
        child(args.tool, args.data, args.vocab_size)


if __name__ == "__main__":
    main()
