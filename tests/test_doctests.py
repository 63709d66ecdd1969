"""The examples in the public docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

pytest.importorskip("regex")


@pytest.mark.parametrize(
    "module", ["bytepair", "bytepair.training", "bytepair.formats", "bytepair.reference"]
)
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
