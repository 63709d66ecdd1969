"""Counting, training and encoding on a Ray cluster, with the same results as on one machine.

``pip install 'bytepair[ray]'``. ``import bytepair`` never imports Ray; this module imports it when one
of its functions runs.

- :func:`count_pretokens`: about ``tasks`` Ray tasks, each counting a run of parts of the work
  (:func:`bytepair.counting.plan_parts`: a file, a run of Parquet row groups, a byte range of a large
  text file cut at a safe place). Up to 8 tasks' counts are added by the driver itself, each as soon as
  it and those before it are in, while the other tasks still count; more are added in a binary tree of
  Ray tasks, each of which holds two partial counts, whose last merge is the driver's (the two halves
  come back, not a total serialized once more). Either way no process holds more than two partial
  counts at once. Counts travel in their transfer form (the form :class:`bytepair.PreTokenCounts`
  pickles to: written in a walk of the map, checksummed), which each process adds to its own counts
  without making a map of them first. It equals
  :func:`bytepair.count_pretokens` on the same sources.
- :func:`train_bpe`: counts on the cluster, then trains on the driver, freeing the counts as training
  makes its words: the vocabulary and merges of :func:`bytepair.train_bpe`.
- :func:`encode_dataset`: a pool of Ray actors, each holding the tokenizer (sent once, its caches warm),
  each task writing one output shard into place exactly as :meth:`bytepair.Tokenizer.encode_dataset`
  does; the driver records each shard in the manifest as it comes. The output directory is the same,
  byte for byte, manifest included, and a later run resumes the same way. ``out`` must be a path that
  every node sees (a shared file system); tested on one machine's disk.

Where the cluster is (``address``): None uses the caller's Ray connection when there is one, else the
cluster in ``RAY_ADDRESS`` when set, else starts a local cluster on this machine for the call;
``"local"`` always starts one; ``"auto"`` is the cluster started on this machine with ``ray start``;
``"host:port"`` is the head node's address. A local cluster listens on 127.0.0.1 only when this module
is the first to import Ray in the process (see ``_import_ray``). A cluster this module connects to or
starts is left (and one it started, stopped) when the call returns. Only when it makes the connection
does it choose Ray's logging: warnings and worker output are not relayed to the driver
(``logging_level=ERROR``, ``log_to_driver=False``), since bytepair prints nothing on stderr; a caller
who calls ``ray.init`` keeps whatever they chose. Ray itself prints a line on stdout when it retries a
task whose worker died.

Tasks are retried by Ray when their worker or node dies (a ``kill -9``), and the result is the same;
an error in the data (a bad record in strict mode, invalid UTF-8) raises the task's own exception
(ValueError, OSError...), naming the file and the line, row or offset. No address answering, or the
cluster lost during a run, raises ConnectionError; the shards written before are kept and recorded,
and a later run resumes. On an error or Ctrl-C, counting (:func:`count_pretokens`, :func:`train_bpe`)
raises at once without cancelling its other tasks (in Ray, cancelling a task as its result arrives can
abort the driver): they end with the connection when this module made it, and otherwise run to their
end, their results dropped. :func:`encode_dataset` lets the shards under way finish after an error in
the data (they are recorded, and no more begin); on Ctrl-C or a lost cluster it stops its actors
(``ray.kill``; Ray ignores the reply of a task whose actor it has marked dead).

Sources are files (paths, directories, patterns): an iterable of str lives in the driver's process,
where :func:`bytepair.count_pretokens` counts it (the counts add up with these).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
from collections.abc import Iterable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from ._common import PathLike, check_errors, check_special_tokens, check_text_field, check_vocab_size
from ._progress import ProgressBar
from .counting import CountPart, PreTokenCounts, count_parts, plan_parts
from .dataset import (
    DatasetPlan,
    DatasetSummary,
    ShardJob,
    ShardWritten,
    plan_dataset,
    remove_temporary_files,
)
from .sources import Source, resolve

if TYPE_CHECKING:
    from .tokenizer import Tokenizer

__all__ = ["count_pretokens", "encode_dataset", "train_bpe"]

# Ray retries a task, and restarts an actor, this many times when its worker process or node dies.
_RETRIES = 3
# Counting tasks per CPU of the cluster when ``tasks`` is not given. Every task's counts are moved and
# added up, and the fewer and larger the parts, the fewer distinct pre-tokens in all (Heaps' law), so
# tasks are few; two per CPU rather than one keeps every CPU busy while one task ends late, lets the
# driver add the first tasks' counts while the last ones count, and bounds what a retried task redoes.
_TASKS_PER_CPU = 2
# Up to this many counting tasks, the driver adds up their counts itself, each as soon as it and those
# of the parts before it are in, while the other tasks still count: a merge there is one load of the
# counts and one addition, and only the last tasks' merges come after the counting. A tree of merge
# tasks costs, at each level, two loads, an addition and one more serialization, and only the top of it
# overlaps nothing; it pays where there are too many tasks' counts for one process to add in the time
# the counting takes.
_DRIVER_MERGES_UP_TO = 8
# How long to wait for the head node to answer before saying there is none.
_CONNECT_SECONDS = 10.0
# Shards queued at each actor: the next one is there when one ends.
_QUEUED_PER_ACTOR = 2
# Messages of skipped records a summary keeps, as the engine keeps them.
MAX_SKIPPED_ERRORS = 10


def _import_ray(local: bool = False) -> Any:
    """The ``ray`` module. With ``local`` (a local cluster is to be started) and Ray not yet imported,
    Ray is told to give its nodes the loopback address (the variable below, read when Ray is imported;
    a value the caller set is kept), so that the cluster listens on 127.0.0.1 only: by default Ray
    replaces 127.0.0.1 with the machine's routable address."""
    if local and "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError:
        raise ImportError("bytepair.ray needs Ray: pip install 'bytepair[ray]' (or ray)") from None
    return ray


def _check_address_form(address: str | None) -> None:
    """ValueError for an address that is not None, ``"local"``, ``"auto"`` or ``host:port``."""
    if address is None or address in ("local", "auto"):
        return
    if not isinstance(address, str):
        raise TypeError(f"address must be a str or None, not {type(address).__name__}")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(
            f"a Ray address is 'auto', 'local' or HOST:PORT (the head node's, as `ray start --head` "
            f"prints it), not {address!r}"
        )


def _check_address(address: str | None) -> None:
    """ConnectionError when nothing listens at the ``host:port`` of ``address``."""
    if address is None or address in ("local", "auto"):
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_SECONDS).close()
    except OSError as e:
        raise ConnectionError(
            f"no Ray cluster answers at {address} ({e.strerror or e}): start one there (`ray start --head "
            f"--port {port}`), check the address, or give no address for a local cluster"
        ) from None


@contextlib.contextmanager
def _cluster(address: str | None) -> Iterator[Any]:
    """The ``ray`` module, connected as ``address`` says (see the module's docstring)."""
    _check_address_form(address)
    local = address == "local" or (address is None and not os.environ.get("RAY_ADDRESS"))
    ray = _import_ray(local)
    if ray.is_initialized() and address is None:
        yield ray
        return
    if ray.is_initialized():
        raise ValueError(
            f"this process is already connected to a Ray cluster: give address=None to use it, or call "
            f"ray.shutdown() before connecting to {address!r}"
        )
    _check_address(address)
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address is None:
        address = os.environ.get("RAY_ADDRESS") or "local"
    if address == "local":
        quiet.update(include_dashboard=False)
    try:
        ray.init(address=address, **quiet)
    except ConnectionError as e:
        raise ConnectionError(
            f"cannot connect to the Ray cluster at {address!r}: {e} (start one with `ray start --head`, "
            f"or give no address for a local cluster)"
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _failure(ray: Any, e: BaseException) -> BaseException:
    """The exception to raise for ``e``, raised by Ray getting a task's result: the task's own exception
    (which names its file and record), or ConnectionError when the cluster went away."""
    if isinstance(e, ray.exceptions.RayTaskError):
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException):
            return cause
    if isinstance(e, ray.exceptions.RayError):
        return ConnectionError(
            f"the Ray cluster failed during the run ({type(e).__name__}: {str(e).splitlines()[0]}); what "
            f"was finished is kept: run again to resume"
        )
    return e


def _cpus(ray: Any) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _groups(parts: list[CountPart], tasks: int) -> list[list[CountPart]]:
    """``parts`` in order, cut into at most ``tasks`` runs of about equal bytes: a part goes into the run
    where the middle of its bytes falls."""
    total = max(2 * sum(p.size for p in parts), 1)
    groups: list[list[CountPart]] = []
    last, before = -1, 0
    for part in parts:
        index = min(tasks - 1, (2 * before + part.size) * tasks // total)
        if index != last:
            groups.append([])
            last = index
        groups[-1].append(part)
        before += part.size
    return groups


def _node() -> str:
    """The id of the Ray node this task runs on."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


# Counts move between the tasks and the driver in their transfer form (bytes): each process adds what
# it receives to its own counts without making a map of it first.
_TASK_COUNTS = "the counts of a Ray task"


def _count_task(
    parts: list[CountPart], specials: list[str], text_field: str, errors: str
) -> tuple[bytes, tuple[int, int, str]]:
    """A Ray task: the counts of ``parts`` (transfer form), and (bytes, documents, node) for the driver."""
    counts = count_parts(parts, specials, text_field=text_field, errors=errors, num_threads=1)
    return counts._to_transfer(), (sum(p.size for p in parts), counts.documents, _node())


def _sum(*transfers: bytes) -> PreTokenCounts:
    """The counts of the transfer forms ``transfers`` added up."""
    counts = PreTokenCounts()
    for data in transfers:
        counts._add_transfer(data, _TASK_COUNTS)
    return counts


def _merge_task(a: bytes, b: bytes) -> bytes:
    """A Ray task: two partial counts added."""
    return _sum(a, b)._to_transfer()


def _prune_task(data: bytes, min_count: int) -> bytes:
    """A Ray task: the total counts pruned (:meth:`PreTokenCounts.prune`) before the driver gets them."""
    counts = _sum(data)
    counts.prune(min_count)
    return counts._to_transfer()


def _reporter(progress: Any) -> tuple[Any, Any]:
    """(a context for the run's progress bar, the callable to report to) for ``progress``."""
    if progress is True:
        bar = ProgressBar()
        return bar, bar
    return contextlib.nullcontext(), progress if callable(progress) else None


def _count_on(
    ray: Any,
    parts: list[CountPart],
    tasks: int,
    specials: list[str],
    text_field: str,
    errors: str,
    progress: Any,
    nodes: dict[str, int],
    min_count: int | None,
) -> PreTokenCounts:
    """The counts of ``parts``, in about ``tasks`` tasks on the cluster, added by the driver or in a tree
    (see the module's docstring); ``nodes`` gets the tasks run on each node."""
    groups = _groups(parts, tasks)
    # Spread over the nodes: Ray would first fill the driver's node.
    count = ray.remote(num_cpus=1, num_returns=2, max_retries=_RETRIES, scheduling_strategy="SPREAD")(
        _count_task
    )
    leaves = [count.remote(group, specials, text_field, errors) for group in groups]
    pending = [stats for _, stats in leaves]
    leaf_of = {stats: i for i, (_, stats) in enumerate(leaves)}
    level: list[Any] = [counts for counts, _ in leaves]
    del leaves
    # Pruning needs the total, which the tree makes on the cluster (see count_pretokens).
    tree = min_count is not None or len(level) > _DRIVER_MERGES_UP_TO
    if tree:
        level = _tree(ray, level, min_count)
    # The driver holds only what it adds (and, with a tree, the top of it) and the small progress
    # results: Ray frees each partial count once the merge that takes it is done. It adds in the order
    # of the parts, so that partial counts meet in the same order every run (and the messages of skipped
    # records come in source order).
    counts = PreTokenCounts()
    finished: set[int] = set()
    added = 0
    total = sum(p.size for p in parts)
    done = documents = 0
    context, report = _reporter(progress)
    with context:
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                size, docs, node = ray.get(ready[0])
                nodes[node] = nodes.get(node, 0) + 1
                done, documents = done + size, documents + docs
                finished.add(leaf_of[ready[0]])
                if report is not None:
                    report("count", done, total, documents=documents, tasks=(len(finished), len(groups)))
                while not tree and added in finished:
                    counts._add_transfer(ray.get(level[added]), _TASK_COUNTS)
                    level[added] = None
                    added += 1
            for ref in level[added:]:
                counts._add_transfer(ray.get(ref), _TASK_COUNTS)
        except BaseException as e:
            # No ray.cancel of the other tasks: cancelling a task while its result comes in aborts the
            # driver (Ray's "Tried to complete task that was not pending" check, seen in this suite).
            # They end with a connection this module made (see the module's docstring).
            raise _failure(ray, e) from None
    return counts


def _tree(ray: Any, leaves: list[Any], min_count: int | None) -> list[Any]:
    """The top of a binary tree of merge tasks over the counts ``leaves``: the last two partial counts,
    which the driver adds (the total is never serialized, and the driver holds the two halves, as a merge
    task would); or, to prune them with ``min_count``, the total, pruned on the cluster, so that the
    driver gets only what it keeps. The tree is fixed by the order of the leaves."""
    merge = ray.remote(num_cpus=1, max_retries=_RETRIES)(_merge_task)
    level = leaves
    top = 1 if min_count is not None else 2
    while len(level) > top:
        pairs = [merge.remote(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + level[2 * len(pairs) :]
    if min_count is not None:
        level = [ray.remote(num_cpus=1, max_retries=_RETRIES)(_prune_task).remote(level[0], min_count)]
    return level


def _check_tasks(tasks: int | None) -> None:
    if tasks is not None and (not isinstance(tasks, int) or isinstance(tasks, bool) or tasks < 1):
        raise ValueError(f"tasks must be a positive int or None, not {tasks!r}")


def _files(sources: Source, what: str) -> list[Any]:
    """The files of ``sources``; TypeError for an iterable, which only this process can read."""
    resolved = resolve(sources, what)
    if resolved.texts:
        raise TypeError(
            f"{what}: bytepair.ray reads files on the cluster; an iterable of str is read where it is, by "
            f"bytepair.count_pretokens or Tokenizer.encode_dataset (counts add up: a + b)"
        )
    return resolved.files


def count_pretokens(
    sources: Source,
    special_tokens: Iterable[str] | None = None,
    *,
    text_field: str = "text",
    errors: str = "strict",
    address: str | None = None,
    tasks: int | None = None,
    progress: Any = False,
    stats: MutableMapping[str, Any] | None = None,
    min_count: int | None = None,
) -> PreTokenCounts:
    """Counts the pre-tokens of ``sources`` on a Ray cluster: equal (``==``) to
    :func:`bytepair.count_pretokens` of the same sources.

    Args:
        sources: files, directories, glob patterns, or a list of them (:mod:`bytepair.sources`), on a path
            every node sees.
        special_tokens, text_field, errors: as for :func:`bytepair.count_pretokens`. With
            ``errors="strict"``, the first failed task's error is raised (not necessarily the first bad
            record in source order, when several parts have one).
        address: the cluster (see the module's docstring); None starts a local one unless this process
            is connected to one or ``RAY_ADDRESS`` names one.
        tasks: about how many tasks; the default is two per CPU of the cluster. Files are cut to make
            them (large text files into byte ranges, large Parquet files into runs of row groups), or
            grouped, consecutive files in one task, when there are more files than tasks. More tasks
            hold smaller partial counts each (``tasks=len(files)``: one file's), fewer cost less to
            add up.
        progress: True for one progress bar on stderr (when it is a terminal): bytes, documents, tasks
            done; or a callable ``progress("count", done, total, documents=..., tasks=(done, total))``.
        stats: a dict to fill with ``"tasks"``, the counting tasks run, and ``"nodes"``, how many ran on
            each node (by Ray node id).
        min_count: None (the default) for exact counts; or drop the pre-tokens counted fewer times than
            this in the whole corpus (:meth:`bytepair.PreTokenCounts.prune`) on the cluster, before the
            driver gets the counts: for a corpus whose distinct pre-tokens do not fit in the driver's
            memory. Training on them is approximate.

    Raises:
        ConnectionError: no cluster at ``address``, or the cluster lost during the run.
        ImportError: Ray is not installed.
        TypeError: an iterable of str among the sources.
        The errors of :func:`bytepair.count_pretokens`, raised by the task that met them.

    >>> import os, tempfile, bytepair, bytepair.ray
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "a.txt"), "w").write("the cat sat<|endoftext|>on the mat " * 50)
    >>> _ = open(os.path.join(d, "b.jsonl"), "w").write('{"text": "the hat"}\\n')
    >>> counts = bytepair.ray.count_pretokens(d, ["<|endoftext|>"], tasks=3)  # doctest: +SKIP
    >>> counts == bytepair.count_pretokens(d, ["<|endoftext|>"])  # doctest: +SKIP
    True
    """
    specials = check_special_tokens(special_tokens)
    text_field = check_text_field(text_field)
    check_errors(errors)
    _check_tasks(tasks)
    _check_address_form(address)
    if min_count is not None and (
        not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1
    ):
        raise ValueError(f"min_count must be a positive int or None, not {min_count!r}")
    if stats is not None and not isinstance(stats, MutableMapping):
        raise TypeError(f"stats must be a dict or None, not {type(stats).__name__}")
    files = _files(sources, "sources")
    nodes: dict[str, int] = {}
    with _cluster(address) as ray:
        tasks = tasks or _TASKS_PER_CPU * _cpus(ray)
        total = sum(f.size for f in files)
        parts = plan_parts(files, max(1, -(-total // tasks)))
        counts = _count_on(ray, parts, tasks, specials, text_field, errors, progress, nodes, min_count)
    if stats is not None:
        stats.update(tasks=sum(nodes.values()), nodes=nodes)
    return counts


def train_bpe(
    sources: Source,
    vocab_size: int,
    special_tokens: Iterable[str] | None = None,
    *,
    text_field: str = "text",
    errors: str = "strict",
    address: str | None = None,
    tasks: int | None = None,
    progress: Any = False,
    stats: MutableMapping[str, Any] | None = None,
    min_count: int | None = None,
) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Trains as :func:`bytepair.train_bpe` does, counting on a Ray cluster (:func:`count_pretokens`) and
    merging on the driver: the same vocabulary and merges. The counts are freed as training makes its
    words. ``stats`` is filled as :func:`bytepair.train_bpe` and :func:`count_pretokens` fill it;
    ``progress`` reports ``"count"`` (as :func:`count_pretokens`) then ``"merge"`` (merges done, total).
    ``min_count`` (approximate, opt-in) is :func:`count_pretokens`'s.

    >>> import os, tempfile, bytepair, bytepair.ray
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> _ = open(path, "w").write("low lower lowest<|endoftext|>low")
    >>> bytepair.ray.train_bpe(path, 259, ["<|endoftext|>"])[1]  # doctest: +SKIP
    [(b'o', b'w'), (b'l', b'ow')]
    """
    specials = check_special_tokens(special_tokens)
    vocab_size = check_vocab_size(vocab_size, specials)
    if stats is not None and not isinstance(stats, MutableMapping):
        raise TypeError(f"stats must be a dict or None, not {type(stats).__name__}")
    counted: dict[str, Any] = {}
    counts = count_pretokens(
        sources,
        specials,
        text_field=text_field,
        errors=errors,
        address=address,
        tasks=tasks,
        progress=progress,
        stats=counted,
        min_count=min_count,
    )
    skipped = counts.skipped
    context, report = _reporter(progress)
    with context:
        # These counts are this call's own: training takes them and frees them as it goes.
        vocab, merges, (pretokens, size, tokens) = counts._train(
            vocab_size, specials, report, stats is not None, consume=True
        )
    if stats is not None:
        stats.update(distinct_pretokens=pretokens, bytes=size, tokens=tokens, **counted)
        if errors == "skip":
            stats["skipped"] = skipped
    return dict(enumerate(vocab)), merges


class _ShardWriter:
    """A Ray actor: fetches the tokenizer once (again after a restart), and writes shards with it. The
    tokenizer comes with each task as a reference, not as an argument of the constructor: an actor
    restarted after its process died then fetches it again, which Ray does not promise for the
    constructor's arguments."""

    def __init__(self) -> None:
        self.tokenizer: Tokenizer | None = None

    def write(self, job: ShardJob, tokenizer: list[Any]) -> tuple[ShardWritten, str]:
        """Writes the shard ``job``; ``tokenizer`` holds the reference to the tokenizer (in a list, so
        that Ray passes the reference, not the tokenizer)."""
        if self.tokenizer is None:
            import ray

            self.tokenizer = ray.get(tokenizer[0])
        return job.write(self.tokenizer, num_threads=1), _node()


def encode_dataset(
    tokenizer: Tokenizer,
    sources: Source,
    out: PathLike,
    *,
    format: str = "megatron",
    text_field: str = "text",
    eot: bool | str = True,
    errors: str = "strict",
    resume: bool = True,
    single_output: bool | str = False,
    address: str | None = None,
    actors: int | None = None,
    progress: Any = False,
) -> DatasetSummary:
    """Encodes ``sources`` into token shards in ``out`` on a Ray cluster: the same files, byte for byte
    (manifest included), as ``tokenizer.encode_dataset(sources, out, ...)``
    (:meth:`bytepair.Tokenizer.encode_dataset`, whose arguments these are), resumed the same way.

    The summary's ``nodes`` counts the shards written on each Ray node (by node id).

    ``out`` must be a directory every node sees at the same path. ``actors`` writers (default: one per
    CPU of the cluster, at most one per shard) each receive the tokenizer once; each task writes one
    shard; the driver records each in the manifest as it comes, so a run stopped by an error, Ctrl-C or
    a lost cluster keeps every shard finished before, and a later run skips them. ``progress``: True for
    one bar (bytes, documents, tokens, tasks), or a callable ``progress("encode", done, total,
    documents=..., tokens=..., tasks=(done, total))``.

    Raises as :meth:`bytepair.Tokenizer.encode_dataset` does (the task's error, naming the input and
    record), ConnectionError as :func:`count_pretokens`, and TypeError for an iterable of str among the
    sources.

    >>> import os, tempfile, bytepair, bytepair.ray
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "a.jsonl"), "w").write('{"text": "hi"}\\n{"text": "there"}\\n')
    >>> tok = bytepair.Tokenizer({i: bytes([i]) for i in range(256)}, [], ["<|endoftext|>"])
    >>> out = os.path.join(d, "out")
    >>> bytepair.ray.encode_dataset(tok, os.path.join(d, "a.jsonl"), out).written  # doctest: +SKIP
    ['00000-a']
    """
    if actors is not None and (not isinstance(actors, int) or isinstance(actors, bool) or actors < 1):
        raise ValueError(f"actors must be a positive int or None, not {actors!r}")
    _check_address_form(address)
    _files(sources, "sources")
    plan = plan_dataset(
        tokenizer,
        sources,
        out,
        format=format,
        text_field=text_field,
        eot=eot,
        errors=errors,
        resume=resume,
        single_output=single_output,
    )
    # The largest first: the last shards to finish are small ones.
    jobs = sorted(plan.jobs(), key=lambda job: -sum(f.size for f in job.files))
    totals = [0, 0, 0, 0]  # tokens, documents, skipped, input bytes
    skipped_errors: list[tuple[str, list[str]]] = []
    try:
        if jobs:
            with _cluster(address) as ray:
                _encode_on(ray, tokenizer, jobs, plan, actors, totals, skipped_errors, progress)
    except BaseException:
        # The shards finished before the error are complete: record them, unless that fails too (a full
        # disk), which must not hide the error.
        with contextlib.suppress(OSError):
            plan.save()
        raise
    # Temporary files of writers that were killed and retried.
    remove_temporary_files(plan.out)
    messages = [m for _, ms in sorted(skipped_errors) for m in ms][:MAX_SKIPPED_ERRORS]
    tokens, documents, skipped, input_bytes = totals
    return plan.finish(tokens, documents, skipped, messages, input_bytes)


def _encode_on(
    ray: Any,
    tokenizer: Tokenizer,
    jobs: list[ShardJob],
    plan: DatasetPlan,
    actors: int | None,
    totals: list[int],
    skipped_errors: list[tuple[str, list[str]]],
    progress: Any,
) -> None:
    """Writes the shards of ``jobs`` with a pool of actors, recording each in ``plan`` as it comes."""
    writer = ray.remote(
        num_cpus=1, max_restarts=_RETRIES, max_task_retries=_RETRIES, scheduling_strategy="SPREAD"
    )(_ShardWriter)
    shared = [ray.put(tokenizer)]
    pool = [writer.remote() for _ in range(min(len(jobs), actors or _cpus(ray)))]
    queue = iter(jobs)
    pending: dict[Any, tuple[Any, ShardJob]] = {}

    def give(actor: Any) -> None:
        job = next(queue, None)
        if job is not None:
            pending[actor.write.remote(job, shared)] = (actor, job)

    total = sum(f.size for job in jobs for f in job.files)
    finished = 0
    context, report = _reporter(progress)
    with context:
        try:
            for _ in range(_QUEUED_PER_ACTOR):
                for actor in pool:
                    give(actor)
            failed = None
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                actor, job = pending.pop(ready[0])
                try:
                    written, node = ray.get(ready[0])
                except ray.exceptions.RayTaskError as e:
                    # An error in the data: the shards under way are finished and kept, no more begin.
                    failed = failed or e
                    continue
                plan.summary.nodes[node] = plan.summary.nodes.get(node, 0) + 1
                plan.record(written.shard)
                totals[0] += written.tokens
                totals[1] += written.documents
                totals[2] += written.skipped
                totals[3] += written.input_bytes
                if written.skipped_errors:
                    skipped_errors.append((job.name, written.skipped_errors))
                finished += 1
                if report is not None:
                    report(
                        "encode",
                        totals[3],
                        total,
                        documents=totals[1],
                        tokens=totals[0],
                        tasks=(finished, len(jobs)),
                    )
                if failed is None:
                    give(actor)
            if failed is not None:
                raise failed
        except BaseException as e:
            for actor in pool:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
            raise _failure(ray, e) from None
