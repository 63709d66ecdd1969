#!/usr/bin/env python3
"""Print the module graph of the Rust crate under src/ and fail on any import cycle.

    python scripts/module_graph.py [--src DIR]

Each file is a module (`src/encode/mod.rs` is `encode`, `src/encode/merge.rs` is `encode::merge`,
`src/lib.rs` is `crate`). A module depends on another when it names it in a path: `use crate::...`,
`use super::...`, `use self::...`, `use child::...` for a module it declares, or the same paths written
inline in code (`crate::error::try_push(...)`). A name the crate root re-exports (`crate::Encoder`)
counts as a dependency on the module that defines it. A `mod` line declares a child; it is not a
dependency. Test modules (`#[cfg(test)] mod ... { }`) are left out: tests may use any part of the crate.

Prints one line per module, `module -> deps`, then the same for folders (the top-level modules:
`encode` for everything under `src/encode/`), and exits with status 1 when either graph has a cycle,
naming the modules on it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# Char literals before strings, so that '"' does not open a string; lifetimes ('a) are not matched.
LITERAL = re.compile(r"""b?'(?:\\.|[^\\'\n])'|b?r(#*)".*?"\1|b?"(?:\\.|[^\\"])*\"""", re.S)
TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
INLINE_MODULE = re.compile(r"\bmod\s+(\w+)\s*\{")
MOD_DECL = re.compile(r"\bmod\s+(\w+)\s*;")
USE = re.compile(r"\buse\s+([^;]+);")
PATH = re.compile(r"\b(?:crate|super|self)(?:\s*::\s*\w+)+")


def strip(text: str) -> str:
    """`text` without comments and literals (so that paths in them are not read)."""
    text = COMMENT.sub(" ", text)
    return LITERAL.sub('""', text)


def block_end(text: str, open_brace: int) -> int:
    """The index just past the brace that closes the one at `open_brace`."""
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError("unbalanced braces")


def without_tests(text: str) -> str:
    while match := TEST_MODULE.search(text):
        text = text[: match.start()] + text[block_end(text, match.end() - 1) :]
    return text


def expand_use(tree: str) -> list[list[str]]:
    """The paths of a use tree: `a::{b, c::{d, e as f}}` gives [a, b], [a, c, d], [a, c, e]."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))

    def parse(s: str, prefix: list[str]) -> list[list[str]]:
        s = s.strip(":")
        if not s:
            return []
        brace = s.find("{")
        if brace < 0:
            return [prefix + [p for p in s.split("::") if p and p != "*"]]
        head = [p for p in s[:brace].split("::") if p]
        inner = s[brace + 1 : s.rindex("}")]
        parts, depth, start = [], 0, 0
        for i, c in enumerate(inner):
            depth += c == "{"
            depth -= c == "}"
            if c == "," and depth == 0:
                parts.append(inner[start:i])
                start = i + 1
        parts.append(inner[start:])
        return [path for part in parts for path in parse(part, prefix + head)]

    return parse(tree, [])


class Crate:
    def __init__(self, src: str):
        self.src = src
        # Module path (a tuple; () is the crate root) -> the file that holds it.
        self.files: dict[tuple[str, ...], str] = {}
        for folder, _, names in os.walk(src):
            for name in names:
                if name.endswith(".rs"):
                    path = os.path.join(folder, name)
                    self.files[self.module_of(path)] = path
        # Every module, inline ones included -> the file module it lives in.
        self.home: dict[tuple[str, ...], tuple[str, ...]] = {m: m for m in self.files}
        self.children: dict[tuple[str, ...], set[str]] = {m: set() for m in self.files}
        self.reexports: dict[str, tuple[str, ...]] = {}
        self.texts: dict[tuple[str, ...], list[tuple[tuple[str, ...], str]]] = {}
        for module, path in self.files.items():
            with open(path, encoding="utf-8") as f:
                text = without_tests(strip(f.read()))
            self.texts[module] = self.split_inline(module, module, text)
        for parts in self.texts.values():
            for scope, text in parts:
                self.children.setdefault(scope, set()).update(MOD_DECL.findall(text))
        for scope, text in self.texts.get((), []):
            for match in USE.finditer(text):
                for path in expand_use(match.group(1)):
                    target = self.resolve(scope, path, follow_reexports=False)
                    if target is not None and path:
                        self.reexports[path[-1]] = target

    def module_of(self, path: str) -> tuple[str, ...]:
        parts = os.path.relpath(path, self.src)[: -len(".rs")].split(os.sep)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        return tuple(parts)

    def split_inline(
        self, home: tuple[str, ...], scope: tuple[str, ...], text: str
    ) -> list[tuple[tuple[str, ...], str]]:
        """The text of `scope` and of each inline module in it, each with its own module path."""
        parts = []
        while match := INLINE_MODULE.search(text):
            end = block_end(text, match.end() - 1)
            inner = scope + (match.group(1),)
            self.home[inner] = home
            parts += self.split_inline(home, inner, text[match.end() : end - 1])
            text = text[: match.start()] + text[end:]
        return [(scope, text)] + parts

    def resolve(
        self, scope: tuple[str, ...], path: list[str], follow_reexports: bool = True
    ) -> tuple[str, ...] | None:
        """The module that `path`, written in `scope`, names (the longest module prefix), or None for
        a path outside the crate."""
        if not path:
            return None
        head, rest = path[0], path[1:]
        if head == "crate":
            base: tuple[str, ...] = ()
        elif head == "self":
            base = scope
        elif head == "super":
            base = scope[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        elif head in self.children.get(scope, ()):
            base, rest = scope + (head,), rest
        else:
            return None
        module = base
        for part in rest:
            if module + (part,) in self.home:
                module = module + (part,)
            else:
                if module == () and follow_reexports and part in self.reexports:
                    return self.reexports[part]
                break
        return module

    def dependencies(self) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
        deps: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in self.files}
        for module, parts in self.texts.items():
            for scope, text in parts:
                paths = [p for m in USE.finditer(text) for p in expand_use(m.group(1))]
                code = USE.sub(" ", text)
                paths += [re.sub(r"\s", "", m.group(0)).split("::") for m in PATH.finditer(code)]
                for child in self.children.get(scope, ()):
                    pattern = rf"(?<![\w:]){child}\s*::\s*\w+(?:\s*::\s*\w+)*"
                    for match in re.finditer(pattern, code):
                        paths.append(re.sub(r"\s", "", match.group(0)).split("::"))
                for path in paths:
                    target = self.resolve(scope, path)
                    if target is not None and self.home[target] != module:
                        deps[module].add(self.home[target])
        return deps


def name(module: tuple[str, ...]) -> str:
    return "::".join(module) if module else "crate"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=os.path.join(ROOT, "src"), help="the crate's src/ folder")
    args = parser.parse_args()
    crate = Crate(args.src)
    deps = crate.dependencies()
    files = {name(m): {name(d) for d in ds} for m, ds in deps.items()}
    folders: dict[str, set[str]] = {}
    for m, ds in deps.items():
        top = name(m[:1])
        folders.setdefault(top, set()).update(name(d[:1]) for d in ds if d[:1] != m[:1])
    status = 0
    for title, graph in (("modules", files), ("folders", folders)):
        print(f"# {title}")
        for module in sorted(graph, key=lambda n: (n != "crate", n)):
            print(f"{module} -> {', '.join(sorted(graph[module])) or '(nothing)'}")
        for cycle in cycles(graph):
            print(f"cycle between {title}: {', '.join(cycle)}", file=sys.stderr)
            status = 1
        print()
    return status


if __name__ == "__main__":
    sys.exit(main())
