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
