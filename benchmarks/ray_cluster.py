"""bytepair.ray against one process, and on a two-node cluster.

Subcommands:

    python benchmarks/ray_cluster.py overhead --data DIR [--limit N] [--rounds 3] [--vocab-size 32000]
    python benchmarks/ray_cluster.py two-nodes --data DIR [--vocab-size 1000]

``overhead`` starts a local Ray cluster of 2 CPUs (one node, on 127.0.0.1) and leaves it running, as a
user with a cluster would; then, in interleaved rounds, each in a fresh child process: ``train`` is
``bytepair.train_bpe`` on the shard files (all cores) against ``bytepair.ray.train_bpe`` on the cluster,
and ``encode`` is ``Tokenizer.encode_dataset`` against ``bytepair.ray.encode_dataset`` (a tokenizer
trained on the first shard). It reports the median wall time and the child's peak RSS (``os.wait4``:
the driver's; the cluster's workers are other processes) and checks each run's result against the
single process's (vocab and merges, and the shard directory byte for byte). DIR is a shard set such as
``benchmarks/scale.py build`` makes (its ``shards/``), ``--limit N`` its first N files. The cluster's
start (about 15 s here) is reported apart.

``two-nodes`` starts two Ray nodes of 1 CPU each on this machine (loopback only), counts, trains and
encodes DIR on them, checks every result against the single process's, prints the node ids the tasks
ran on, and stops both nodes whatever happens. Ray 2.60's ``ray start`` gives a node the machine's
routable address even when told ``--node-ip-address 127.0.0.1``, and refuses a second node when
loopback is forced (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``); so the nodes are started as Ray's own
multi-node tests start them, with ``ray.cluster_utils.Cluster``: two raylets, each with its own node id,
object store and workers, the second joining the first's GCS as ``ray start --address`` does.
tests/test_ray.py runs it on a small shard set.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Loopback only (read by Ray when it is imported); see the module's docstring.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

EOT = "<|endoftext|>"


def shard_files(data: str, limit: int | None) -> list[str]:
    folder = os.path.join(data, "shards") if os.path.isdir(os.path.join(data, "shards")) else data
    names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    return [os.path.join(folder, n) for n in names[:limit]]


def same_tree(a: str, b: str) -> bool:
    names = sorted(os.listdir(a))
    if names != sorted(os.listdir(b)):
        return False
    return all(filecmp.cmp(os.path.join(a, n), os.path.join(b, n), shallow=False) for n in names)


def child(mode: str, files: list[str], vocab_size: int, work: str, address: str) -> None:
    """One measured run, in its own process: prints its result's fingerprint as JSON."""
    import hashlib

    import bytepair

    start = time.monotonic()
    if mode in ("train-local", "train-ray"):
        if mode == "train-local":
            vocab, merges = bytepair.train_bpe(files, vocab_size, [EOT])
        else:
            import bytepair.ray

            vocab, merges = bytepair.ray.train_bpe(files, vocab_size, [EOT], address=address)
        digest = hashlib.sha256(repr((sorted(vocab.items()), merges)).encode()).hexdigest()
        result = {"digest": digest}
    else:
        tok = bytepair.Tokenizer.from_dir(os.path.join(work, "tok"))
        out = os.path.join(work, mode)
        shutil.rmtree(out, ignore_errors=True)
        if mode == "encode-local":
            tok.encode_dataset(files, out, format="bin")
        else:
            import bytepair.ray

            bytepair.ray.encode_dataset(tok, files, out, format="bin", address=address)
        result = {"out": out}
    result["seconds"] = time.monotonic() - start
    print(json.dumps(result))


def run_measured(mode: str, files: list[str], vocab_size: int, work: str, address: str) -> dict:
    """Runs ``mode`` in a child and returns its result with its wall time and peak RSS."""
    command = [sys.executable, __file__, "_child", mode, str(vocab_size), work, address, *files]
    with tempfile.TemporaryFile("w+") as out:
        started = time.monotonic()
        process = subprocess.Popen(command, stdout=out, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.monotonic() - started
        out.seek(0)
        lines = out.read().strip().splitlines()
    if status != 0:
        raise RuntimeError(f"{mode} exited with status {status}")
    result = json.loads(lines[-1])
    result.update(wall=wall, peak_mb=usage.ru_maxrss / 1024)
    return result


def overhead(args: argparse.Namespace) -> None:
    import ray
    from ray.cluster_utils import Cluster

    import bytepair

    files = shard_files(args.data, args.limit)
    size = sum(os.path.getsize(f) for f in files)
    work = tempfile.mkdtemp(prefix="bp-ray-bench-")
    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    print(f"cluster of 2 CPUs started in {time.monotonic() - started:.1f} s: {cluster.address}", flush=True)
    try:
        vocab, merges = bytepair.train_bpe(files[:1], 4096, [EOT])
        bytepair.Tokenizer(vocab, merges, [EOT]).save(os.path.join(work, "tok"))
        rows = []
        for task in args.tasks.split(","):
            local, remote = f"{task}-local", f"{task}-ray"
            times: dict[str, list[dict]] = {local: [], remote: []}
            for i in range(args.rounds):
                for mode in (local, remote) if i % 2 == 0 else (remote, local):
                    result = run_measured(mode, files, args.vocab_size, work, cluster.address)
                    times[mode].append(result)
                    print(f"  {mode:13} {result['wall']:7.1f} s  {result['peak_mb']:7.0f} MB", flush=True)
            if task == "train":
                same = {r["digest"] for r in times[local] + times[remote]}
                assert len(same) == 1, "ray.train_bpe differs from train_bpe"
            else:
                assert same_tree(os.path.join(work, local), os.path.join(work, remote)), "shards differ"
            for mode in (local, remote):
                walls = [r["wall"] for r in times[mode]]
                peaks = [r["peak_mb"] for r in times[mode]]
                rows.append((mode, statistics.median(walls), min(walls), max(walls), max(peaks)))
        mb = size / 1e6
        print(f"\n{len(files)} shards, {mb:,.0f} MB on disk, vocab {args.vocab_size:,}, {args.rounds} rounds")
        print("| run | median wall (s) | min-max (s) | driver peak RSS (MB) |")
        print("|---|---:|---:|---:|")
        for mode, median, low, high, peak in rows:
            print(f"| {mode} | {median:.1f} | {low:.1f}-{high:.1f} | {peak:,.0f} |")
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def two_nodes(args: argparse.Namespace) -> None:
    import ray
    from ray.cluster_utils import Cluster

    import bytepair
    import bytepair.ray

    files = shard_files(args.data, None)
    work = tempfile.mkdtemp(prefix="bp-ray-2n-")
    cluster = Cluster()
    try:
        head = cluster.add_node(num_cpus=1, include_dashboard=False, object_store_memory=128 << 20)
        worker = cluster.add_node(num_cpus=1, object_store_memory=128 << 20)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
        nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
        assert nodes == sorted([head.node_id, worker.node_id]), nodes
        stats: dict = {}
        counts = bytepair.ray.count_pretokens(files, [EOT], tasks=8, stats=stats)
        assert counts == bytepair.count_pretokens(files, [EOT]), "counts differ"
        trained = bytepair.ray.train_bpe(files, args.vocab_size, [EOT])
        assert trained == bytepair.train_bpe(files, args.vocab_size, [EOT]), "training differs"
        tok = bytepair.Tokenizer(*trained, [EOT])
        summary = bytepair.ray.encode_dataset(tok, files, os.path.join(work, "ray"), actors=2)
        tok.encode_dataset(files, os.path.join(work, "local"))
        assert same_tree(os.path.join(work, "ray"), os.path.join(work, "local")), "shards differ"
        print(
            json.dumps(
                {
                    "nodes": {"head": head.node_id, "worker": worker.node_id},
                    "count_tasks_per_node": stats["nodes"],
                    "shards_per_node": summary.nodes,
                    "equal": True,
                }
            )
        )
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        mode, vocab_size, work, address, *files = sys.argv[2:]
        child(mode, files, int(vocab_size), work, address)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    over = commands.add_parser("overhead", help="bytepair.ray against one process")
    over.add_argument("--data", required=True)
    over.add_argument("--limit", type=int)
    over.add_argument("--rounds", type=int, default=3)
    over.add_argument("--vocab-size", type=int, default=32000)
    over.add_argument("--tasks", default="train,encode", help="train, encode or both")
    two = commands.add_parser("two-nodes", help="a two-node cluster on this machine")
    two.add_argument("--data", required=True)
    two.add_argument("--vocab-size", type=int, default=1000)
    args = parser.parse_args()
    if args.command == "overhead":
        overhead(args)
    else:
        two_nodes(args)


if __name__ == "__main__":
    main()
