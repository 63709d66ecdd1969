"""Shared fixtures: paths into ../shared (tests that need them skip cleanly when it is absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("BYTEPAIR_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
CS336 = SHARED / "fixtures" / "cs336"


def shared_file(*parts: str) -> Path:
    """A file under ../shared, or a skip if it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


@pytest.fixture
def cs336() -> Path:
    if not CS336.is_dir():
        pytest.skip(f"{CS336} is not available")
    return CS336


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
