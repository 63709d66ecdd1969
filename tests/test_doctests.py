"""The examples in the docstrings run and give what they show, in every module, and every public function,
method and property has one.

Nothing is skipped quietly: the modules are found by walking the installed package, private ones
included, and must be exactly the list below (a new module is added here on purpose), and each must run
at least one example unless this file says why it has none.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import bytepair

MODULES = [
    "bytepair",
    "bytepair.__main__",
    "bytepair._common",
    "bytepair._core",
    "bytepair._progress",
    "bytepair.cli",
    "bytepair.counting",
    "bytepair.dataset",
    "bytepair.formats",
    "bytepair.interop",
    "bytepair.ray",
    "bytepair.reference",
    "bytepair.report",
    "bytepair.shards",
    "bytepair.sources",
    "bytepair.stats",
    "bytepair.tokenizer",
    "bytepair.training",
]
WITHOUT_EXAMPLES = {
    # Two lines that run bytepair.cli.main, whose examples are in bytepair.cli.
    "bytepair.__main__",
    # The compiled engine: doctest cannot see into it, and every function of it is called by a wrapper
    # in the modules above whose examples run it.
    "bytepair._core",
}


def test_the_package_holds_exactly_the_listed_modules() -> None:
    found = ["bytepair"] + [m.name for m in pkgutil.walk_packages(bytepair.__path__, "bytepair.")]
    assert sorted(found) == MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The examples make their files with tempfile, as a reader would; here they go under tmp_path.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert (result.attempted > 0) == (name not in WITHOUT_EXAMPLES), result


def test_the_package_docstring_lists_the_whole_public_api() -> None:
    listed = bytepair.__doc__.split("Public API:", 1)[1]
    missing = [name for name in bytepair.__all__ if f"`{name}`" not in listed]
    assert missing == []


def public_members(module: ModuleType) -> Iterator[tuple[str, object]]:
    """The public functions of ``module``, and the public methods and properties of its public classes,
    that ``module`` defines (not those it imports from another module)."""
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    yield f"{name}.{attr}", member


def test_every_public_function_has_an_example() -> None:
    checked, missing = [], []
    for name in MODULES:
        for member, obj in public_members(importlib.import_module(name)):
            checked.append(f"{name}.{member}")
            if ">>>" not in (inspect.getdoc(obj) or ""):
                missing.append(f"{name}.{member}")
    assert "bytepair.tokenizer.Tokenizer.encode" in checked and "bytepair.training.train_bpe" in checked
    assert missing == []
