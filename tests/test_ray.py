"""bytepair.ray: counting, training and encoding on a Ray cluster give what one machine gives, byte for
byte, and survive a worker killed mid-task.

The tests share one local cluster (2 CPUs, on 127.0.0.1, started once for the module and shut down
whatever happens). The two-node test starts a cluster of its own with ``ray start`` (marked ``long``:
``-m "not long"`` deselects it).
"""

from __future__ import annotations

import contextlib
import doctest
import json
import logging
import lzma
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

# The tests' clusters listen on 127.0.0.1 only: without this, Ray (read when it is imported) gives its
# nodes the machine's routable address even when told 127.0.0.1.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
import ray  # noqa: E402
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bytepair
import bytepair.ray
from bytepair import PreTokenCounts, Tokenizer, count_pretokens, train_bpe
from bytepair.counting import CountPart, count_part, plan_parts
from bytepair.sources import resolve
from conftest import shared_file

EOT = "<|endoftext|>"
DOCS = [
    "The cat sat on the mat.",
    "It's 1999!  Prices:\t$5 — ça coûte 5€.",
    "日本語のテキスト、そして emoji 🙂🙂 too",
    "  leading spaces\n\nand\r\nnew lines  ",
    "",
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray cluster for the module's tests, stopped at the end even when a test failed: a new one
    even when another runs on this machine (``address="local"``), which ``ray.init()`` would join."""
    context = ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=256 << 20,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    assert context.address_info["node_ip_address"] == "127.0.0.1"
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def prose() -> str:
    """About 12 MB of the shared English prose, whole documents."""
    with lzma.open(shared_file("corpora", "prose_en.txt.xz"), "rt", encoding="utf-8") as f:
        text = f.read(12_000_000)
    return text[: text.rindex(EOT)]


@pytest.fixture(scope="module")
def tok(prose: str) -> Tokenizer:
    vocab, merges = train_bpe(iter([prose[:300_000]]), 400, [EOT])
    return Tokenizer(vocab, merges, [EOT])


def write_shard(path: Path, docs: list[str]) -> Path:
    """``docs`` as the file ``path`` in the format its name gives (a text file joins them with EOT)."""
    name = path.name
    if name.endswith(".parquet"):
        pq.write_table(pa.table({"text": docs}), path, row_group_size=2)
    elif name.endswith(".txt"):
        path.write_text(EOT.join(docs), encoding="utf-8")
    else:
        lines = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
        if name.endswith(".gz"):
            import gzip

            lines = gzip.compress(lines)
        path.write_bytes(lines)
    return path


def same_files(a: Path, b: Path) -> None:
    """The directories ``a`` and ``b`` hold the same names with the same bytes."""
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_importing_bytepair_does_not_import_ray() -> None:
    code = "import sys, bytepair, bytepair.ray; print('ray' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr


def test_a_large_text_file_cut_into_byte_ranges_counts_as_the_whole(tmp_path: Path, prose: str) -> None:
    path = tmp_path / "big.txt"
    path.write_text(prose[:200_000] + "x" * 5000 + "  " + EOT + " end", encoding="utf-8")
    (f,) = resolve(path).files
    whole = count_pretokens(path, [EOT])
    for step in [997, 4999, 70_000]:
        cuts = [*range(0, f.size, step), f.size]
        parts = [CountPart(f, a, b, b - a) for a, b in zip(cuts, cuts[1:])]
        total = sum((count_part(p, [EOT]) for p in parts), PreTokenCounts())
        assert total == whole, step
        assert total.most_common() == whole.most_common()
    assert [p.size for p in plan_parts([f], 50_000)] == [f.size // 5] * 5 or len(plan_parts([f], 50_000)) == 5


@st.composite
def shard_sets(draw: st.DrawFn) -> tuple[list[tuple[str, list[str]]], int]:
    """Documents split into shards of drawn formats, and a number of tasks."""
    text = st.text(st.sampled_from("ab \n\t.é日\U0001f600'1"), max_size=40)
    docs = draw(st.lists(st.one_of(text, st.sampled_from(DOCS)), min_size=1, max_size=14))
    shards = []
    rest = list(docs)
    while rest:
        n = draw(st.integers(1, len(rest)))
        shards.append((draw(st.sampled_from(["txt", "jsonl", "jsonl.gz", "parquet"])), rest[:n]))
        rest = rest[n:]
    return shards, draw(st.integers(1, 6))


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shard_sets())
def test_any_shard_set_counts_and_encodes_as_on_one_machine(
    cluster: None, tok: Tokenizer, tmp_path: Path, drawn
) -> None:
    shards, tasks = drawn
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    (root / "in").mkdir()
    for i, (fmt, docs) in enumerate(shards):
        write_shard(root / "in" / f"{i:03}.{fmt}", docs)
    expected = count_pretokens(root / "in", [EOT])
    counts = bytepair.ray.count_pretokens(root / "in", [EOT], tasks=tasks)
    assert counts == expected
    assert counts.most_common() == expected.most_common()
    tok.encode_dataset(root / "in", root / "local", format="bin")
    summary = bytepair.ray.encode_dataset(tok, root / "in", root / "ray", format="bin")
    same_files(root / "ray", root / "local")
    assert len(summary.written) == len(shards) and sum(summary.nodes.values()) == len(shards)


@pytest.fixture(scope="module")
def corpus_shards(prose: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared prose as a shard set: a large text file and documents in JSON lines and Parquet."""
    folder = tmp_path_factory.mktemp("corpus") / "in"
    folder.mkdir()
    docs = prose[2_000_000:3_000_000].split(EOT)
    (folder / "0-big.txt").write_text(prose[:2_000_000], encoding="utf-8")
    write_shard(folder / "1-docs.jsonl.gz", docs[: len(docs) // 2])
    pq.write_table(pa.table({"text": docs[len(docs) // 2 :]}), folder / "2-docs.parquet", row_group_size=50)
    return folder


def test_shared_corpora_count_train_and_encode_as_on_one_machine(
    cluster: None, tok: Tokenizer, corpus_shards: Path, tmp_path: Path
) -> None:
    stats: dict = {}
    counts = bytepair.ray.count_pretokens(corpus_shards, [EOT], tasks=9, stats=stats)
    assert counts == count_pretokens(corpus_shards, [EOT])
    assert stats["tasks"] >= 4  # the large text file and the Parquet file were cut
    expected_stats: dict = {}
    expected = train_bpe(corpus_shards, 1000, [EOT], stats=expected_stats)
    train_stats: dict = {}
    assert bytepair.ray.train_bpe(corpus_shards, 1000, [EOT], stats=train_stats) == expected
    assert {k: train_stats[k] for k in expected_stats} == expected_stats
    for fmt in ["megatron", "npy"]:
        tok.encode_dataset(corpus_shards, tmp_path / f"local-{fmt}", format=fmt)
        bytepair.ray.encode_dataset(tok, corpus_shards, tmp_path / f"ray-{fmt}", format=fmt)
        same_files(tmp_path / f"ray-{fmt}", tmp_path / f"local-{fmt}")
    tok.encode_dataset(corpus_shards, tmp_path / "local-one", single_output=True)
    bytepair.ray.encode_dataset(tok, corpus_shards, tmp_path / "ray-one", single_output=True)
    same_files(tmp_path / "ray-one", tmp_path / "local-one")


def test_counts_added_by_the_driver_or_by_a_tree_are_one_machines_messages_included(
    cluster: None, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(12):
        bad = '{"text": 7}\n' if i % 3 == 0 else ""
        write_shard(folder / f"{i:02}.jsonl", DOCS)
        (folder / f"{i:02}.jsonl").write_text((folder / f"{i:02}.jsonl").read_text() + bad)
    expected = count_pretokens(folder, [EOT], errors="skip")
    # 3 tasks: the driver adds their counts as they come; 12: a tree of merge tasks adds them.
    for tasks in [3, 12]:
        stats: dict = {}
        counts = bytepair.ray.count_pretokens(folder, [EOT], errors="skip", tasks=tasks, stats=stats)
        assert stats["tasks"] == tasks
        assert counts == expected and counts.skipped == 4
        assert counts.skipped_errors == expected.skipped_errors


def test_the_docstring_examples_run_on_a_cluster(
    cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's examples, skipped where no cluster is, run here (their files under tmp_path)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(bytepair.ray)
    assert len([t for t in tests if t.examples]) == 3
    for test in tests:
        for example in test.examples:
            example.options.pop(doctest.SKIP, None)
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 10


def test_a_task_error_names_the_file_and_record(cluster: None, tok: Tokenizer, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    write_shard(folder / "a.jsonl", DOCS)
    (folder / "b.jsonl").write_text('{"text": "fine"}\n{"text": 7}\n')
    with pytest.raises(ValueError) as local:
        count_pretokens(folder, [EOT])
    with pytest.raises(ValueError) as remote:
        bytepair.ray.count_pretokens(folder, [EOT])
    assert str(remote.value) == str(local.value)
    assert re.search(r"b\.jsonl:2: field \"text\" is a number", str(remote.value))
    with pytest.raises(ValueError) as remote:
        bytepair.ray.encode_dataset(tok, folder, tmp_path / "out")
    assert str(remote.value) == str(local.value)
    # The shard finished before the error is recorded: a later run keeps it.
    (folder / "b.jsonl").write_text('{"text": "fine"}\n')
    summary = bytepair.ray.encode_dataset(tok, folder, tmp_path / "out")
    assert summary.already_complete == ["00000-a"] and summary.written == ["00001-b"]
    tok.encode_dataset(folder, tmp_path / "local")
    same_files(tmp_path / "out", tmp_path / "local")
    # Invalid UTF-8 deep in a text file cut into ranges: its offset in the file.
    big = tmp_path / "big.txt"
    big.write_bytes(b"one two three " * 1000 + b"\xff" + b" four" * 1000)
    with pytest.raises(ValueError, match=r"big\.txt: invalid UTF-8 at byte offset 14000;"):
        bytepair.ray.count_pretokens(big, tasks=5)


def test_iterables_and_bad_arguments_are_refused_before_any_work(cluster: None, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="iterable of str"):
        bytepair.ray.count_pretokens(iter(["text"]))
    with pytest.raises(TypeError, match="iterable of str"):
        bytepair.ray.encode_dataset(Tokenizer({i: bytes([i]) for i in range(256)}, []), [iter([])], tmp_path)
    assert os.listdir(tmp_path) == []
    (tmp_path / "a.txt").write_text("text")
    with pytest.raises(ValueError, match="a Ray address is 'auto', 'local' or HOST:PORT"):
        bytepair.ray.count_pretokens(tmp_path, address="nowhere")
    with pytest.raises(ValueError, match="tasks must be a positive int"):
        bytepair.ray.count_pretokens(tmp_path, tasks=0)
    with pytest.raises(ValueError, match="vocab_size 300 is too small"):
        bytepair.ray.train_bpe(tmp_path, 300, [f"<{i}>" for i in range(50)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_cluster_at_the_address_is_a_connection_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    address = f"127.0.0.1:{free_port()}"
    code = f"import bytepair.ray; bytepair.ray.count_pretokens({str(tmp_path)!r}, address={address!r})"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ConnectionError: no Ray cluster answers at {address}"), result.stderr
    assert "ray start --head" in last


def parent(pid: int) -> int:
    """The parent of process ``pid`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            # The field after the name, which is in parentheses and may hold spaces, is the state.
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def descends_from_this_process(pid: int) -> bool:
    """Whether ``pid`` was started by this process or its children (this test's cluster, which
    ``ray.init`` started: its raylet starts the workers), not by another one on the machine."""
    while pid > 1:
        pid = parent(pid)
        if pid == os.getpid():
            return True
    return False


def kill_when_running(title: str, stop: threading.Event, killed: list[int]) -> None:
    """Kills with SIGKILL the first process of this test's cluster whose title starts with ``title`` (a
    Ray worker running that task), then returns; or returns when ``stop`` is set."""
    while not stop.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    command = f.read()
            except OSError:
                continue
            if command.startswith(title.encode()) and descends_from_this_process(int(pid)):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
                return
        time.sleep(0.002)


def with_a_worker_killed(title: str, run):
    stop, killed = threading.Event(), []
    killer = threading.Thread(target=kill_when_running, args=(title, stop, killed))
    killer.start()
    try:
        return run(), killed
    finally:
        stop.set()
        killer.join(timeout=30)


@pytest.mark.timeout(600)
def test_a_worker_killed_mid_task_is_retried_and_the_result_is_the_same(
    cluster: None, tok: Tokenizer, prose: str, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text(prose[:6_000_000], encoding="utf-8")
    (folder / "b.txt").write_text(prose[6_000_000:], encoding="utf-8")
    counts, killed = with_a_worker_killed(
        "ray::_count_task", lambda: bytepair.ray.count_pretokens(folder, [EOT], tasks=2)
    )
    assert killed, "no counting task was seen running"
    assert counts == count_pretokens(folder, [EOT])
    summary, killed = with_a_worker_killed(
        "ray::_ShardWriter.write", lambda: bytepair.ray.encode_dataset(tok, folder, tmp_path / "ray")
    )
    assert killed, "no shard writer was seen writing"
    assert summary.written == ["00000-a", "00001-b"] or sorted(summary.written) == ["00000-a", "00001-b"]
    tok.encode_dataset(folder, tmp_path / "local")
    same_files(tmp_path / "ray", tmp_path / "local")  # no temporary file of the killed writer either


def test_an_interrupted_run_resumes_as_on_one_machine(
    cluster: None, tok: Tokenizer, corpus_shards: Path, tmp_path: Path
) -> None:
    def stop_after_one(phase: str, done: int, total: int, **details) -> None:
        assert details["tasks"][1] == 3
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bytepair.ray.encode_dataset(
            tok, corpus_shards, tmp_path / "ray", format="bin", progress=stop_after_one
        )
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert len(manifest["shards"]) == 1
    summary = bytepair.ray.encode_dataset(tok, corpus_shards, tmp_path / "ray", format="bin")
    assert summary.already_complete == [manifest["shards"][0]["name"]] and len(summary.written) == 2
    tok.encode_dataset(corpus_shards, tmp_path / "local", format="bin")
    same_files(tmp_path / "ray", tmp_path / "local")


def test_the_progress_bar_shows_bytes_documents_and_tasks(
    cluster: None, corpus_shards: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from bytepair import _progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(_progress.sys, "stderr", screen)
    counts = bytepair.ray.count_pretokens(corpus_shards, [EOT], tasks=4, progress=True)
    last = screen.getvalue().split("\r")[-1]
    total = sum(f.stat().st_size for f in corpus_shards.iterdir())
    assert re.fullmatch(
        rf" pre-tokenizing \[#{{30}}\] {total / 1e6:.1f}/{total / 1e6:.1f} MB +\d+\.\ds  "
        rf"{counts.documents:,} docs  (\d+)/\1 tasks\n",
        last,
    ), last


def test_the_command_line_runs_on_the_cluster_and_prints_nothing_on_stderr(
    cluster: None, corpus_shards: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bytepair.cli import main

    eot = ["--special-token", EOT]
    assert main(["count", str(corpus_shards), "-o", str(tmp_path / "c.bpc"), *eot, "--ray"]) == 0
    assert PreTokenCounts.load(tmp_path / "c.bpc") == count_pretokens(corpus_shards, [EOT])
    train = ["train", str(corpus_shards), "--vocab-size", "500", "--out", str(tmp_path / "tok"), *eot]
    assert main([*train, "--ray"]) == 0
    trained = Tokenizer.from_dir(tmp_path / "tok")
    assert (trained.vocab, trained.merges) == train_bpe(corpus_shards, 500, [EOT])
    out = tmp_path / "shards"
    assert main(["encode", str(tmp_path / "tok"), str(corpus_shards), "-o", str(out), "--ray"]) == 0
    trained.encode_dataset(corpus_shards, tmp_path / "local")
    same_files(out, tmp_path / "local")
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "shards written on Ray nodes" in captured.out


def test_a_local_cluster_started_for_one_call_is_quiet_and_stopped(tmp_path: Path) -> None:
    """``--ray`` alone in a process with no cluster: one is started on 127.0.0.1, used, and stopped,
    and nothing reaches stderr."""
    (tmp_path / "a.txt").write_text("hello world " * 100)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    command = [
        sys.executable,
        "-m",
        "bytepair",
        "count",
        str(tmp_path / "a.txt"),
        "-o",
        str(tmp_path / "c.bpc"),
    ]
    result = subprocess.run([*command, "--ray"], capture_output=True, text=True, timeout=240, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert PreTokenCounts.load(tmp_path / "c.bpc") == count_pretokens(tmp_path / "a.txt")


@pytest.mark.long
@pytest.mark.timeout(400)
def test_two_nodes_run_tasks_on_both_and_give_the_same_results(corpus_shards: Path) -> None:
    """Two Ray nodes on this machine (benchmarks/ray_cluster.py two-nodes, in a process of its own that
    stops both at the end): counting tasks and shards ran on both, and every result equals one
    machine's."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "ray_cluster.py"
    command = [sys.executable, str(script), "two-nodes", "--data", str(corpus_shards), "--vocab-size", "600"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=360)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    both = set(summary["nodes"].values())
    assert len(both) == 2 and summary["equal"]
    # Tasks ran on both nodes; Ray places the few short counting tasks of this small set as it likes.
    assert set(summary["shards_per_node"]) | set(summary["count_tasks_per_node"]) == both, summary
    assert sum(summary["count_tasks_per_node"].values()) >= 3


def test_min_count_prunes_on_the_cluster_as_prune_does(cluster: None, corpus_shards: Path) -> None:
    exact = count_pretokens(corpus_shards, [EOT])
    pruned = count_pretokens(corpus_shards, [EOT])
    pruned.prune(3)
    counts = bytepair.ray.count_pretokens(corpus_shards, [EOT], min_count=3)
    assert counts == pruned and counts != exact and len(counts) < len(exact) / 2
    assert bytepair.ray.train_bpe(corpus_shards, 600, [EOT], min_count=3) == bytepair.train_from_counts(
        pruned, 600
    )
    # Exact unless asked: the default is the single machine's training.
    assert bytepair.ray.train_bpe(corpus_shards, 600, [EOT]) == train_bpe(corpus_shards, 600, [EOT])


CLUSTER = """
import os, sys
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={
    "num_cpus": 2, "include_dashboard": False, "object_store_memory": 128 << 20})
print(cluster.address, flush=True)
sys.stdin.read()
cluster.shutdown()
"""

DRIVER = """
import json, sys, time
import bytepair, bytepair.ray
address, source, out, started = sys.argv[1:5]
tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
def slowly(phase, done, total, **details):
    open(started, "w").close()
    time.sleep(2)
summary = bytepair.ray.encode_dataset(
    tok, source, out, format="bin", address=address, progress=slowly if started else False)
print(json.dumps({"already_complete": summary.already_complete, "written": summary.written}))
"""


def descendants(pid: int) -> list[int]:
    children = subprocess.run(
        ["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, timeout=30
    )
    found = [int(c) for c in children.stdout.split()]
    return found + [d for c in found for d in descendants(c)]


@pytest.mark.long
@pytest.mark.timeout(400)
def test_a_cluster_that_goes_away_is_a_connection_error_and_a_later_run_resumes(tmp_path: Path) -> None:
    """A cluster killed (SIGKILL, every process of it) while a driver encodes: the driver raises
    ConnectionError, the shards it had are recorded, and a run on a new cluster completes them, byte for
    byte as one machine would."""
    source = tmp_path / "in"
    source.mkdir()
    for i in range(8):
        (source / f"{i}.txt").write_text(f"document {i} " * 20000)
    out, started = tmp_path / "out", tmp_path / "started"

    def new_cluster() -> tuple[subprocess.Popen, str]:
        head = subprocess.Popen(
            [sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        ready, _, _ = select.select([head.stdout], [], [], 120)
        assert ready, "the cluster did not start"
        return head, head.stdout.readline().strip()

    head, address = new_cluster()
    try:
        driver = subprocess.Popen(
            [sys.executable, "-c", DRIVER, address, str(source), str(out), str(started)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not started.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists(), "no shard was written"
        for pid in [head.pid, *descendants(head.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, stderr = driver.communicate(timeout=180)
    finally:
        head.kill()
        head.wait(timeout=60)
    assert driver.returncode == 1
    assert (
        stderr.strip().splitlines()[-1].startswith("ConnectionError: the Ray cluster failed during the run")
    )
    done = json.loads((out / "manifest.json").read_text())["shards"]
    assert 1 <= len(done) < 8
    head, address = new_cluster()
    try:
        command = [sys.executable, "-c", DRIVER, address, str(source), str(out), ""]
        rerun = subprocess.run(command, capture_output=True, text=True, timeout=240)
    finally:
        head.stdin.close()
        head.wait(timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    assert summary["already_complete"] == sorted(r["name"] for r in done)
    assert len(summary["written"]) == 8 - len(done)
    tok = Tokenizer({i: bytes([i]) for i in range(256)}, [], [EOT])
    tok.encode_dataset(source, tmp_path / "local", format="bin")
    same_files(out, tmp_path / "local")
