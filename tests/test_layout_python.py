"""How the Python package is laid out: no module reaches into another module's private names.

What several modules need lives in ``bytepair._common`` under names without an underscore; the engine
(``_core``) and the progress bar (``_progress``) are private modules used as a whole. A name with a leading
underscore belongs to its module alone, so importing one from another module (``from .formats import
_write_atomically``), or reading one off another module (``formats._path``), is what this test refuses.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "bytepair"
SHARED_MODULES = {"_common", "_core", "_progress"}


def package_module(node: ast.ImportFrom) -> str | None:
    """The module of the package that ``node`` imports from (``""`` for the package itself), or None
    for a module outside it."""
    if node.level == 1:
        return node.module or ""
    if node.level == 0 and node.module is not None and node.module.split(".")[0] == "bytepair":
        return ".".join(node.module.split(".")[1:])
    return None


def private_uses(source: str) -> list[str]:
    """Where ``source``, a module of the package, uses a private name of another of its modules."""
    tree = ast.parse(source)
    uses = []
    sibling_modules = set()  # local names bound to modules of the package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = package_module(node)
            if module is None or module in SHARED_MODULES:
                continue
            for alias in node.names:
                if module == "":  # from . import tokenizer: a module
                    sibling_modules.add(alias.asname or alias.name)
                elif alias.name.startswith("_"):
                    uses.append(f"line {node.lineno}: from .{module} import {alias.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in sibling_modules - SHARED_MODULES
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            uses.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return uses


def test_the_scan_finds_private_imports() -> None:
    source = "from .formats import _write_atomically, load_bpe\nfrom . import interop\ninterop._special_ids\n"
    assert private_uses(source) == [
        "line 1: from .formats import _write_atomically",
        "line 3: interop._special_ids",
    ]
    allowed = (
        "from . import _core, interop\nfrom ._common import path_str\n_core.max_threads\ninterop.load_hf\n"
    )
    assert private_uses(allowed) == []


def test_no_module_uses_another_modules_private_names() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) > 10
    found = {path.name: private_uses(path.read_text(encoding="utf-8")) for path in modules}
    assert {name: uses for name, uses in found.items() if uses} == {}
