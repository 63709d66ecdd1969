"""The examples in the public docstrings run and give what they show, in every public module."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import bytepair

pytest.importorskip("regex")

MODULES = ["bytepair"] + [
    f"bytepair.{m.name}" for m in pkgutil.iter_modules(bytepair.__path__) if not m.name.startswith("_")
]
# The command line's examples are the README's session and tests/test_cli.py.
WITHOUT_EXAMPLES = {"bytepair.cli"}


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert (result.attempted > 0) == (module not in WITHOUT_EXAMPLES), result
