"""Shared fixtures: the files under tests/fixtures/, paths into ../shared for the big corpora (tests that
need those skip cleanly when it is absent), and the characters on which the engine and the installed
`regex` must agree."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path

import pytest
from hypothesis import strategies as st

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# From Stanford CS336 assignment 1: GPT-2's vocab.json and merges.txt, corpus.en with the reference
# result of training it, and small texts (see fixtures/README.md).
CS336 = FIXTURES / "cs336"
SHARED = Path(os.environ.get("BYTEPAIR_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))

# tiktoken caches every rank file it loads under the file's path, even a local one, and answers later
# loads of that path from its cache: a test that rewrites a path it (or an earlier run, in a reused
# temporary folder) loaded before would get the old ranks.
os.environ["TIKTOKEN_CACHE_DIR"] = ""

# The Ctrl-C tests send SIGINT to this process and to children. A shell starts a background job with
# SIGINT ignored, and children inherit that: under such a job (a CI runner's, say) Ctrl-C would do
# nothing and those tests would wait out their timeouts. Python's own handler, as at a terminal, is
# what they test; children start with the default and install theirs.
signal.signal(signal.SIGINT, signal.default_int_handler)

REGENERATE = (
    "pip install -U regex && python scripts/gen_unicode_tables.py && cargo fmt, then rebuild bytepair "
    '(pip install ".[test]")'
)


def shared_file(*parts: str) -> Path:
    """A file under ../shared (the big corpora), or a skip if it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture
def cs336() -> Path:
    return CS336


def tables_unicode() -> tuple[str, bytearray]:
    """The Unicode version of the scanner's tables, and a flag per code point: assigned in it. Both come
    from tests/fixtures/unicode_assigned.txt, which scripts/gen_unicode_tables.py writes with the
    tables."""
    assigned = bytearray(0x110000)
    with open(FIXTURES / "unicode_assigned.txt", encoding="ascii") as f:
        version = f.readline().split()[2].rstrip(":")
        for line in f:
            if not line.startswith("#"):
                first, last = (int(cp, 16) for cp in line.split(".."))
                assigned[first : last + 1] = b"\x01" * (last - first + 1)
    return version, assigned


@functools.cache
def newly_assigned() -> frozenset[str]:
    """The characters assigned in only one of two Unicode versions: the tables' and the installed
    `regex` module's. The engine follows the first, `regex` (and so `bytepair.reference`) the second, so
    they may class these characters differently; on every other character they must agree."""
    import regex

    _, in_tables = tables_unicode()
    everything = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    in_regex = bytearray(0x110000)
    for m in regex.finditer(r"\P{Cn}+", everything):
        for c in m.group():
            in_regex[ord(c)] = 1
    return frozenset(chr(cp) for cp in range(0x110000) if in_tables[cp] != in_regex[cp])


def stable_characters(assigned_in_python: bool = False) -> st.SearchStrategy[str]:
    """Any character but surrogates and those of `newly_assigned()`. With `assigned_in_python`, only
    characters assigned in Python's own `unicodedata` (14.0 on Python 3.11): for comparisons with tiktoken
    and HF tokenizers, whose Rust regex engines follow an older Unicode than the tables (tiktoken 0.14
    classes Unicode 17 letters as Other)."""
    unassigned = ("Cs", "Cn") if assigned_in_python else ("Cs",)
    return st.characters(exclude_categories=unassigned, exclude_characters=newly_assigned())


# Python code for a child process that measures its own memory (Linux): `rss_mb()` is its peak RSS in MB
# since exec or the last `reset_peak()`, `rss_mb("VmRSS")` the current one. Not `ru_maxrss`: Linux
# passes the parent's RSS at fork into the child's ru_maxrss, so a child of pytest after a test that held
# 1 GB reported 1.1 GB (or, as a growth, nothing at all).
MEMORY_PROBE = """
def rss_mb(field="VmHWM"):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
"""
