"""Tokenizer.encode_dataset: inputs of every kind, the same bytes for any thread count, resuming after
SIGKILL in the middle of a shard, refusals (a changed input or tokenizer, a foreign directory, an
end-of-text token missing), an input that vanishes mid-run, bad records, and the CLI (`bytepair encode`
into shards, `bytepair shards`)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import bytepair
from bytepair import Tokenizer
from bytepair.dataset import encode_dataset
from conftest import CS336, MEMORY_PROBE

EOT = "<|endoftext|>"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(CS336 / "gpt2_vocab.json", CS336 / "gpt2_merges.txt", [EOT])


def corpus_documents(n: int) -> list[str]:
    """`n` documents of varied length, cut from corpus.en."""
    text = (CS336 / "corpus.en").read_text(encoding="utf-8")
    docs, at = [], 0
    for i in range(n):
        length = 50 + (i * 7919) % 3000
        docs.append(text[at % len(text) : at % len(text) + length])
        at += length
    return docs


def write_corpus(folder: Path, files: int = 4, per_file: int = 60) -> list[Path]:
    """Inputs of each kind engines read: txt, jsonl, jsonl.gz, txt.gz, in that order."""
    docs = corpus_documents(files * per_file)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        part = docs[f * per_file : (f + 1) * per_file]
        kind = ["txt", "jsonl", "jsonl.gz", "txt.gz"][f % 4]
        path = folder / f"part-{f}.{kind}"
        if kind.startswith("txt"):
            data = EOT.join(part)
        else:
            data = "".join(json.dumps({"text": d}) + "\n" for d in part)
        opener = gzip.open if kind.endswith(".gz") else open
        with opener(path, "wt", encoding="utf-8") as fh:
            fh.write(data)
        paths.append(path)
    return paths


def digest(folder: Path) -> dict[str, str]:
    """The SHA-256 of every shard file in `folder` (the manifest left out: it holds input times)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if not p.name.startswith("manifest")
    }


def test_documents_of_every_input_kind_come_out_as_encode_gives_them(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in")
    extra = corpus_documents(5)
    summary = gpt2.encode_dataset([*paths, iter(extra)], tmp_path / "out", format="npy", num_threads=2)
    docs = corpus_documents(4 * 60)
    eot = gpt2.encode(EOT)
    want = [gpt2.encode(d) + eot for d in docs + extra]
    got = [ids.tolist() for ids in bytepair.shards.open(tmp_path / "out")]
    assert got == want
    assert summary.written == [
        "00000-part-0",
        "00001-part-1",
        "00002-part-2",
        "00003-part-3",
        "00004-iterable",
    ]


def test_a_text_file_is_split_at_the_end_of_text_token_only(tmp_path):
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], [EOT, "<|pad|>"])
    (tmp_path / "a.txt").write_text(f"ab{EOT}{EOT}c<|pad|>d{EOT}\n")
    for eot, want in [
        (True, [[97, 98, 256], [256], [99, 257, 100, 256], [10, 256]]),
        (False, [[97, 98], [], [99, 257, 100], [10]]),
    ]:
        out = tmp_path / f"out-{eot}"
        tok.encode_dataset(tmp_path / "a.txt", out, format="bin", eot=eot)
        assert [ids.tolist() for ids in bytepair.shards.open(out)] == want


def test_a_file_without_the_token_is_one_document_and_another_token_can_end_them(tmp_path):
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], ["</s>"])
    (tmp_path / "a.txt").write_text(f"x{EOT}y</s>z")
    tok.encode_dataset(tmp_path / "a.txt", tmp_path / "out", format="npy", eot="</s>")
    want = [tok.encode(f"x{EOT}y") + [256], [ord("z"), 256]]
    assert [ids.tolist() for ids in bytepair.shards.open(tmp_path / "out")] == want


@pytest.mark.parametrize("format", ["megatron", "bin", "npy"])
def test_the_bytes_are_the_same_for_any_thread_count_and_piece_size(tmp_path, gpt2, format):
    paths = write_corpus(tmp_path / "in")
    digests = []
    for threads, chunk in [(1, None), (2, 1000), (5, 333)]:
        out = tmp_path / f"out-{threads}"
        encode_dataset(gpt2, gpt2._encoder, paths, out, format=format, num_threads=threads, _chunk_size=chunk)
        digests.append(digest(out))
    assert digests[0] == digests[1] == digests[2]
    single = tmp_path / "single"
    encode_dataset(gpt2, gpt2._encoder, paths, single, format=format, num_threads=3, single_output=True)
    shards = bytepair.shards.open(single)
    assert [s.name for s in shards.shards] == ["data"]
    assert [ids.tolist() for ids in shards] == [
        ids.tolist() for ids in bytepair.shards.open(tmp_path / "out-1")
    ]


def write_even_corpus(folder: Path, files: int = 40, per_file: int = 6) -> list[Path]:
    """`files` JSON lines inputs of about the same size: enough that on 2 or 3 threads each worker takes
    whole inputs, each into its own shard, rather than pieces of one input after another."""
    docs = corpus_documents(per_file)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = folder / f"part-{f:02d}.jsonl"
        path.write_text("".join(json.dumps({"text": f"{f} {d}"}) + "\n" for d in docs), encoding="utf-8")
        paths.append(path)
    return paths


def test_whole_inputs_on_many_workers_give_the_bytes_of_one_thread(tmp_path, gpt2):
    paths = write_even_corpus(tmp_path / "in")
    digests = []
    for threads, chunk in [(1, None), (2, 1000), (3, None)]:
        out = tmp_path / f"out-{threads}"
        summary = encode_dataset(
            gpt2, gpt2._encoder, paths, out, format="megatron", num_threads=threads, _chunk_size=chunk
        )
        assert summary.documents == 40 * 6
        assert summary.written == [f"{i:05d}-part-{i:02d}" for i in range(40)]
        digests.append(digest(out))
    assert digests[0] == digests[1] == digests[2]
    bytepair.shards.open(tmp_path / "out-2").verify()
    assert [ids.tolist() for ids in bytepair.shards.open(tmp_path / "out-2")][:6] == [
        gpt2.encode(f"0 {d}") + gpt2.encode(EOT) for d in corpus_documents(6)
    ]


def test_resume_after_sigkill_while_workers_encode_whole_inputs_is_byte_identical(tmp_path, gpt2):
    paths = write_even_corpus(tmp_path / "in")
    out = tmp_path / "out"
    script = tmp_path / "killer.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, sys
            import bytepair
            tok = bytepair.Tokenizer.from_files(sys.argv[1], sys.argv[2], ["<|endoftext|>"])

            def progress(phase, done, total, documents, tokens):
                # Killed once ten shards are in place: the workers are then in the middle of others.
                if documents >= 60:
                    os.kill(os.getpid(), signal.SIGKILL)

            tok.encode_dataset(sys.argv[4:], sys.argv[3], format="bin", num_threads=2, progress=progress)
            """
        )
    )
    args = [sys.executable, str(script), str(CS336 / "gpt2_vocab.json"), str(CS336 / "gpt2_merges.txt")]
    run = subprocess.run([*args, str(out), *map(str, paths)], capture_output=True, text=True, timeout=120)
    assert run.returncode == -9, run.stderr
    recorded = [s["name"] for s in bytepair.shards.read_manifest(out / "manifest.json")["shards"]]
    assert recorded == [f"{i:05d}-part-{i:02d}" for i in range(len(recorded))] and len(recorded) < 40
    summary = gpt2.encode_dataset(paths, out, format="bin", num_threads=2)
    assert summary.already_complete == recorded
    assert summary.written == [f"{i:05d}-part-{i:02d}" for i in range(len(recorded), 40)]
    assert not any(p.name.startswith(".bp-") for p in out.iterdir())
    gpt2.encode_dataset(paths, tmp_path / "one", format="bin", num_threads=1)
    assert digest(out) == digest(tmp_path / "one")
    bytepair.shards.open(out).verify()


def test_ctrl_c_while_workers_encode_whole_inputs_keeps_only_whole_shards(tmp_path, gpt2):
    paths = write_even_corpus(tmp_path / "in")
    out = tmp_path / "out"

    def progress(phase, done, total, documents, tokens):
        if documents >= 30:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        encode_dataset(gpt2, gpt2._encoder, paths, out, format="npy", num_threads=2, progress=progress)
    recorded = [s["name"] for s in bytepair.shards.read_manifest(out / "manifest.json")["shards"]]
    assert recorded == [f"{i:05d}-part-{i:02d}" for i in range(5)]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json"] + [f"{n}{s}" for n in recorded for s in (".npy", ".offsets.npy")]
    )
    gpt2.encode_dataset(paths, out, format="npy", num_threads=2)
    gpt2.encode_dataset(paths, tmp_path / "one", format="npy", num_threads=1)
    assert digest(out) == digest(tmp_path / "one")


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    import bytepair
    from bytepair.dataset import encode_dataset
    tok = bytepair.Tokenizer.from_files(sys.argv[1], sys.argv[2], ["<|endoftext|>"])
    out = sys.argv[3]

    def progress(phase, done, total, documents, tokens):
        # Killed in the middle of the second shard: after the first is in the manifest, and 20 documents
        # of the second written.
        manifest = bytepair.shards.read_manifest(os.path.join(out, "manifest.json"))
        if manifest["shards"] and documents >= manifest["shards"][0]["documents"] + 20:
            os.kill(os.getpid(), signal.SIGKILL)

    encode_dataset(tok, tok._encoder, sys.argv[4:], out, format="megatron",
                   num_threads=2, progress=progress, _chunk_size=2000)
    """
)


def test_resume_after_sigkill_in_the_middle_of_a_shard_is_byte_identical(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=3, per_file=80)
    out = tmp_path / "out"
    script = tmp_path / "killer.py"
    script.write_text(KILLER)
    args = [
        sys.executable,
        str(script),
        str(CS336 / "gpt2_vocab.json"),
        str(CS336 / "gpt2_merges.txt"),
        str(out),
    ]
    run = subprocess.run([*args, *map(str, paths)], capture_output=True, text=True, timeout=120)
    assert run.returncode == -9, run.stderr
    manifest = bytepair.shards.read_manifest(out / "manifest.json")
    assert [s["name"] for s in manifest["shards"]] == ["00000-part-0"]
    assert not (out / "00001-part-1.idx").exists(), "the killed shard is not under its name"
    assert any(p.name.startswith(".bp-") for p in out.iterdir()), "it was killed while writing"
    first = [os.stat(out / f"00000-part-0{s}") for s in (".bin", ".idx")]

    summary = gpt2.encode_dataset(paths, out, format="megatron", num_threads=2)
    assert summary.already_complete == ["00000-part-0"]
    assert summary.written == ["00001-part-1", "00002-part-2"]
    again = [os.stat(out / f"00000-part-0{s}") for s in (".bin", ".idx")]
    assert [(s.st_ino, s.st_mtime_ns) for s in again] == [(s.st_ino, s.st_mtime_ns) for s in first]
    assert not any(p.name.startswith(".bp-") for p in out.iterdir()), (
        "the dead run's temporary files are gone"
    )

    whole = tmp_path / "whole"
    gpt2.encode_dataset(paths, whole, format="megatron", num_threads=1)
    assert digest(out) == digest(whole)
    bytepair.shards.open(out).verify()


def test_ctrl_c_in_the_middle_of_a_shard_leaves_no_partial_shard_and_a_rerun_completes(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=3, per_file=40)
    out = tmp_path / "out"

    def progress(phase, done, total, documents, tokens):
        if documents > 50:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        encode_dataset(gpt2, gpt2._encoder, paths, out, format="bin", progress=progress, _chunk_size=2000)
    manifest = bytepair.shards.read_manifest(out / "manifest.json")
    assert [s["name"] for s in manifest["shards"]] == ["00000-part-0"]
    assert sorted(p.name for p in out.iterdir()) == [
        "00000-part-0.bin",
        "00000-part-0.idx.npy",
        "manifest.json",
    ]
    summary = gpt2.encode_dataset(paths, out, format="bin")
    assert summary.written == ["00001-part-1", "00002-part-2"]
    gpt2.encode_dataset(paths, tmp_path / "whole", format="bin")
    assert digest(out) == digest(tmp_path / "whole")


FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys
    import bytepair
    # Files may not grow past 64 KB, as on a disk that is full: writes fail with EFBIG.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))
    tok = bytepair.Tokenizer.from_files(sys.argv[1], sys.argv[2], ["<|endoftext|>"])
    try:
        tok.encode_dataset(sys.argv[4:], sys.argv[3], format="npy", num_threads=2)
    except OSError as e:
        print(e.errno, e)
    """
)


def test_a_full_disk_fails_and_no_shard_that_did_not_fit_is_recorded(tmp_path, gpt2):
    # Three shards of about 2, 11 and 140 KB of ids: the third cannot be written whole.
    paths = []
    for i, n in enumerate([4, 16, 200]):
        path = tmp_path / "in" / f"part-{i}.txt"
        path.parent.mkdir(exist_ok=True)
        path.write_text(EOT.join(corpus_documents(n)))
        paths.append(path)
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    args = [sys.executable, str(script), str(CS336 / "gpt2_vocab.json"), str(CS336 / "gpt2_merges.txt")]
    run = subprocess.run(
        [*args, str(tmp_path / "out"), *map(str, paths)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("27 "), run.stdout  # EFBIG
    shards = bytepair.shards.open(tmp_path / "out")
    assert [s.name for s in shards.shards] == ["00000-part-0", "00001-part-1"]
    shards.verify()
    assert not any(p.name.startswith((".bp-", "00002")) for p in (tmp_path / "out").iterdir())


def test_a_large_set_s_manifest_is_written_now_and_then_and_always_at_the_end(tmp_path, gpt2, monkeypatch):
    """Past _EVERY_SHARD_UNTIL shards the manifest is rewritten at most every _EVERY_SECONDS (here: never
    during the run), and whatever ends the run, every shard finished is recorded."""
    monkeypatch.setattr(bytepair.dataset, "_EVERY_SHARD_UNTIL", 1)
    monkeypatch.setattr(bytepair.dataset, "_EVERY_SECONDS", 1e9)
    paths = write_corpus(tmp_path / "in", files=4, per_file=20)
    listed = []

    def progress(phase, done, total, documents, tokens):
        listed.append(len(bytepair.shards.read_manifest(tmp_path / "out" / "manifest.json")["shards"]))
        if documents > 50:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        encode_dataset(gpt2, gpt2._encoder, paths, tmp_path / "out", progress=progress, _chunk_size=2000)
    assert set(listed) == {0}
    assert [s.name for s in bytepair.shards.open(tmp_path / "out").shards] == ["00000-part-0", "00001-part-1"]
    summary = gpt2.encode_dataset(paths, tmp_path / "out")
    assert summary.written == ["00002-part-2", "00003-part-3"]
    assert bytepair.shards.open(tmp_path / "out").documents == 80


def test_a_complete_shard_set_is_skipped_whole(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=2, per_file=5)
    gpt2.encode_dataset(paths, tmp_path / "out")
    summary = gpt2.encode_dataset(paths, tmp_path / "out")
    assert summary.written == [] and summary.already_complete == ["00000-part-0", "00001-part-1"]


def test_a_changed_input_is_refused_naming_it(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=2, per_file=5)
    gpt2.encode_dataset(paths, tmp_path / "out")
    before = digest(tmp_path / "out")
    with open(paths[1], "a", encoding="utf-8") as f:
        f.write('{"text": "one more"}\n')
    with pytest.raises(ValueError, match=r"part-1\.jsonl changed since its shard 00001-part-1 was written"):
        gpt2.encode_dataset(paths, tmp_path / "out")
    assert digest(tmp_path / "out") == before
    summary = gpt2.encode_dataset(paths, tmp_path / "out", resume=False)
    assert summary.written == ["00000-part-0", "00001-part-1"]
    assert bytepair.shards.open(tmp_path / "out").documents == 11


def test_another_tokenizer_or_format_is_refused(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=1, per_file=5)
    gpt2.encode_dataset(paths, tmp_path / "out")
    other = Tokenizer({i: bytes([i]) for i in range(256)}, [], [EOT])
    with pytest.raises(ValueError, match="a shard set made with another tokenizer"):
        other.encode_dataset(paths, tmp_path / "out")
    with pytest.raises(ValueError, match="a shard set made with another format"):
        gpt2.encode_dataset(paths, tmp_path / "out", format="npy")
    with pytest.raises(ValueError, match="a shard set made with another inputs"):
        gpt2.encode_dataset(write_corpus(tmp_path / "in2", files=2, per_file=1), tmp_path / "out")


def test_a_folder_of_other_files_is_refused_and_left_alone(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=1, per_file=5)
    out = tmp_path / "out"
    out.mkdir()
    (out / "00000-part-0.bin").write_bytes(b"someone else's")
    with pytest.raises(ValueError, match="holds files and no bytepair manifest"):
        gpt2.encode_dataset(paths, out)
    assert [p.name for p in out.iterdir()] == ["00000-part-0.bin"]
    assert (out / "00000-part-0.bin").read_bytes() == b"someone else's"


def test_an_output_inside_a_source_directory_is_refused(tmp_path, gpt2):
    write_corpus(tmp_path / "in", files=1, per_file=2)
    with pytest.raises(ValueError, match="is inside the source directory"):
        gpt2.encode_dataset(tmp_path / "in", tmp_path / "in" / "shards")
    assert not (tmp_path / "in" / "shards").exists()


def test_a_missing_end_of_text_token_is_refused_before_anything_is_written(tmp_path):
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [])
    (tmp_path / "a.txt").write_text("text")
    with pytest.raises(ValueError, match="end-of-text token '<|endoftext|>' is not in the vocabulary"):
        tok.encode_dataset(tmp_path / "a.txt", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    tok.encode_dataset(tmp_path / "a.txt", tmp_path / "out", eot=False)
    assert [ids.tolist() for ids in bytepair.shards.open(tmp_path / "out")] == [[116, 101, 120, 116]]


def test_an_input_that_vanishes_mid_run_is_named_and_the_shards_before_it_kept(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=3, per_file=80)

    def progress(phase, done, total, documents, tokens):
        # Once the first shard is complete, the third input goes: the reader is a few small pieces ahead
        # of the writer, inside the second.
        if paths[2].exists() and documents > 80:
            paths[2].unlink()

    with pytest.raises(FileNotFoundError, match="part-2.jsonl.gz"):
        encode_dataset(
            gpt2, gpt2._encoder, paths, tmp_path / "out", num_threads=2, progress=progress, _chunk_size=2000
        )
    manifest = bytepair.shards.read_manifest(tmp_path / "out" / "manifest.json")
    assert [s["name"] for s in manifest["shards"]] == ["00000-part-0", "00001-part-1"]
    assert bytepair.shards.open(tmp_path / "out").documents == 160
    assert not any(p.name.startswith(".bp-") for p in (tmp_path / "out").iterdir())


def test_bad_records_fail_naming_the_line_or_are_skipped_and_counted(tmp_path, gpt2):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "good"}\n{"txt": "no field"}\n{"text": "fine"}\nnot json\n')
    with pytest.raises(ValueError, match=r"a\.jsonl:2: no field \"text\""):
        gpt2.encode_dataset(path, tmp_path / "out")
    assert bytepair.shards.manifest_paths(tmp_path / "out") == [str(tmp_path / "out" / "manifest.json")]
    assert bytepair.shards.open(tmp_path / "out").documents == 0
    summary = gpt2.encode_dataset(path, tmp_path / "out2", errors="skip")
    assert (summary.documents, summary.skipped) == (2, 2)
    assert "a.jsonl:2" in summary.skipped_errors[0] and "a.jsonl:4" in summary.skipped_errors[1]
    manifest = bytepair.shards.read_manifest(tmp_path / "out2" / "manifest.json")
    assert manifest["shards"][0]["skipped"] == 2


def test_parquet_row_groups_are_documents(tmp_path, gpt2):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    docs = corpus_documents(50)
    pq.write_table(pa.table({"text": docs, "n": list(range(50))}), tmp_path / "a.parquet", row_group_size=7)
    pq.write_table(pa.table({"body": pa.array(docs[:3], pa.large_string())}), tmp_path / "b.parquet")
    gpt2.encode_dataset(tmp_path / "a.parquet", tmp_path / "out", format="bin")
    eot = gpt2.encode(EOT)
    assert [ids.tolist() for ids in bytepair.shards.open(tmp_path / "out")] == [
        gpt2.encode(d) + eot for d in docs
    ]
    gpt2.encode_dataset(tmp_path / "b.parquet", tmp_path / "out2", text_field="body", eot=False)
    assert [ids.tolist() for ids in bytepair.shards.open(tmp_path / "out2")] == [
        gpt2.encode(d) for d in docs[:3]
    ]
    pq.write_table(pa.table({"text": ["a", None, "b"]}), tmp_path / "c.parquet")
    with pytest.raises(ValueError, match=r"c\.parquet: row 1: the text is null"):
        gpt2.encode_dataset(tmp_path / "c.parquet", tmp_path / "out3")
    assert gpt2.encode_dataset(tmp_path / "c.parquet", tmp_path / "out4", errors="skip").skipped == 1


MEMORY = """
import sys, bytepair
tok = bytepair.Tokenizer.from_files(sys.argv[1], sys.argv[2], ["<|endoftext|>"])
out = sys.argv[-1]
summary = tok.encode_dataset(sys.argv[3:-1], out, format="megatron", single_output=True, num_threads=2)
print(summary.documents)
print(rss_mb())
"""


def peak_rss_mb(*args: str) -> tuple[int, float]:
    """The documents written and the peak RSS in MB of a fresh process running MEMORY."""
    child = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE + MEMORY, *args], capture_output=True, text=True, timeout=600
    )
    assert child.returncode == 0, child.stderr
    documents, peak = child.stdout.split()
    return int(documents), float(peak)


@pytest.mark.timeout(900)
def test_memory_stays_bounded_whatever_the_dataset_size(tmp_path):
    """20 MB and 100 MB of JSON lines documents and text, into one Megatron shard: reading stays a few
    pieces ahead of writing, and the index goes to disk as documents end, so the peak is the same within
    a few MB (the encoder's caches fill a little more), and under 300 MB."""
    lines = [json.dumps({"text": d}) + "\n" for d in corpus_documents(200)]
    block = "".join(lines)
    peaks = []
    for mb in (20, 100):
        folder = tmp_path / str(mb)
        folder.mkdir()
        repeats = mb * 1_000_000 // 2 // len(block)
        with open(folder / "docs.jsonl", "w", encoding="utf-8") as f:
            f.write(block * repeats)
        with open(folder / "text.txt", "w", encoding="utf-8") as f:
            f.write((EOT.join(corpus_documents(200)) + EOT) * repeats)
        args = [str(CS336 / "gpt2_vocab.json"), str(CS336 / "gpt2_merges.txt")]
        documents, peak = peak_rss_mb(
            *args, str(folder / "docs.jsonl"), str(folder / "text.txt"), str(folder / "out")
        )
        assert documents == 400 * repeats
        peaks.append(peak)
    assert peaks[1] - peaks[0] < 40, peaks
    assert peaks[1] < 300, peaks


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bytepair", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_cli_encodes_sources_into_shards_and_describes_them(tmp_path, gpt2):
    paths = write_corpus(tmp_path / "in", files=4, per_file=5)
    gpt2.save(tmp_path / "tok")
    run = run_cli(
        "encode", str(tmp_path / "tok"), str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--format", "bin"
    )
    assert run.returncode == 0, run.stderr
    assert "4 shard(s) written (bin, ids as uint16)" in run.stdout
    for i in range(2):
        part = ["--shard-index", str(i), "--num-shards", "2"]
        out = ["-o", str(tmp_path / "parts"), "--format", "npy", "--no-eot"]
        run = run_cli("encode", str(tmp_path / "tok"), *map(str, paths), *out, *part)
        assert run.returncode == 0, run.stderr
    parts = bytepair.shards.open(tmp_path / "parts")
    assert [s.name for s in parts.shards] == ["00000-part-0", "00001-part-1", "00002-part-2", "00003-part-3"]
    assert parts.documents == 20 and bytepair.shards.manifest_paths(tmp_path / "parts")[0].endswith(
        "0-of-2.json"
    )

    run = run_cli("shards", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    assert re.search(r"documents +20\n", run.stdout), run.stdout
    assert re.search(r"bytes per token +\d\.\d\d \(of text\)", run.stdout)
    assert "checksums ok (8 files)" in run.stdout
    assert bytepair.dataset.tokenizer_hash(gpt2)[:16] in run.stdout
    data = tmp_path / "out" / "00002-part-2.bin"
    data.write_bytes(data.read_bytes()[:-2] + b"\x00\x00")
    run = run_cli("shards", str(tmp_path / "out"))
    assert run.returncode == 1
    assert "00002-part-2.bin: its size or checksum" in run.stderr


def test_cli_encode_of_one_text_file_to_npy_is_still_encode_file(tmp_path, gpt2):
    gpt2.save(tmp_path / "tok")
    (tmp_path / "a.txt").write_text("hello world")
    run = run_cli("encode", str(tmp_path / "tok"), str(tmp_path / "a.txt"), "-o", str(tmp_path / "a.npy"))
    assert run.returncode == 0, run.stderr
    import numpy as np

    assert np.load(tmp_path / "a.npy").tolist() == gpt2.encode("hello world")
