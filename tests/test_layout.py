"""The Rust crate's layout: no import cycle between its modules or its folders (scripts/module_graph.py),
and the script finds the cycles it is there to find. The docs that copy generated or measured text hold
its current form: DESIGN.md the module graph, README.md its benchmark table from benchmarks/README.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "module_graph.py"


def module_graph(src: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--src", str(src)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def write_crate(root: Path, files: dict[str, str]) -> Path:
    src = root / "src"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_the_crate_has_no_import_cycle():
    result = module_graph(ROOT / "src")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # The merge loops depend on the merge table, not on the encoder.
    assert "encode::merge -> encode::table, error" in lines
    assert any(line.startswith("python::errors -> ") for line in lines)


def test_design_md_holds_the_current_module_graph():
    result = module_graph(ROOT / "src")
    assert result.returncode == 0, result.stderr
    design = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
    # The output is one section per graph ("# modules", "# folders"), each pasted as a ```text block.
    sections = [s.split("\n", 1) for s in result.stdout.strip().split("\n\n")]
    assert [title for title, _ in sections] == ["# modules", "# folders"]
    for title, graph in sections:
        assert f"```text\n{graph}\n```" in design, (
            f"DESIGN.md does not hold the current {title[2:]} graph: re-paste the module graph "
            "(python scripts/module_graph.py) into DESIGN.md"
        )


def table(markdown: str, header: str) -> str:
    """The markdown table of ``markdown`` whose first line is ``header``."""
    lines = markdown.splitlines()
    start = lines.index(header)
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def test_readme_benchmark_table_is_the_one_in_benchmarks_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    summary = table(readme, "| task | corpus | bytepair | gigatoken | ratio |")
    assert summary in (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8"), (
        "README.md's benchmark table is not in benchmarks/README.md: copy it from there"
    )


CYCLES = {
    "between files": (
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            # Through a nested use tree and `super`.
            "b.rs": "use super::{a::{self, A as Other}, b as _};\npub struct B;\n",
        },
        # Top-level files are folders of their own too.
        ["cycle between modules: a, b", "cycle between folders: a, b"],
    ),
    # x::p -> y::q -> x::r: no two files depend on each other, but the folders x and y do.
    "between folders only": (
        {
            "lib.rs": "mod x;\nmod y;\n",
            "x/mod.rs": "mod p;\nmod r;\n",
            "x/p.rs": "fn f() { crate::y::q::g() }\n",
            "x/r.rs": "pub struct R;\n",
            "y/mod.rs": "mod q;\n",
            "y/q.rs": "use crate::x::r::R;\npub fn g() {}\n",
        },
        ["cycle between folders: x, y"],
    ),
    # A name the root re-exports counts as its module's.
    "through a root re-export": (
        {
            "lib.rs": "mod a;\nmod b;\npub use a::A;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": "pub struct B(crate::A);\n",
        },
        ["cycle between modules: a, b", "cycle between folders: a, b"],
    ),
}


@pytest.mark.parametrize("case", CYCLES)
def test_a_cycle_fails_and_is_named(tmp_path, case):
    files, messages = CYCLES[case]
    result = module_graph(write_crate(tmp_path, files))
    assert result.returncode == 1
    # Named at each level where it is, and only there.
    assert [line for line in result.stderr.splitlines() if "cycle between" in line] == messages


def test_tests_comments_and_strings_are_not_dependencies(tmp_path):
    src = write_crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": (
                "// use crate::a::A;\n"
                'const S: &str = "crate::a::A";\n'
                "const C: char = '\"';\n"
                "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"
                "pub struct B;\n"
            ),
        },
    )
    result = module_graph(src)
    assert result.returncode == 0, result.stderr
    assert "a -> b" in result.stdout.splitlines()
    assert "b -> (nothing)" in result.stdout.splitlines()
