"""``python -m benchmarks NAME``: every command of the one index, :data:`benchmarks.BENCHMARKS`,
imports and declares its options, and the benchmarks grouped under it import no private name of
one another. A module moved or renamed fails here, not an hour into a run."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from benchmarks import BENCHMARKS, REPO_ROOT
from benchmarks.__main__ import parser

pytestmark = pytest.mark.bench

PACKAGE = REPO_ROOT / "benchmarks"


def test_every_indexed_benchmark_has_a_command_with_its_options(capsys) -> None:
    top = parser()
    for name, (module_name, _) in BENCHMARKS.items():
        assert callable(importlib.import_module(module_name).run), name
        with pytest.raises(SystemExit) as done:
            top.parse_args([name, "--help"])
        assert done.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: python -m benchmarks {name} ")
    with pytest.raises(SystemExit):
        top.parse_args(["no-such-benchmark"])


def test_every_benchmark_module_sits_in_a_group_and_is_indexed_or_imported() -> None:
    modules = {".".join(p.relative_to(REPO_ROOT).with_suffix("").parts)
               for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    top = {m for m in modules if m.count(".") == 1}
    assert top == {"benchmarks.__main__"}, "a benchmark module outside quality/, speed/, state/"
    indexed = {module for module, _ in BENCHMARKS.values()}
    imported = {name for path in PACKAGE.rglob("*.py") for name in _imports(path)}
    assert modules - {"benchmarks.__main__"} - indexed - imported == set()


def test_no_module_imports_a_private_name_of_another() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level or (
                    isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                        "benchmarks")):
                offenders += [f"{path.name}: {alias.name}" for alias in node.names
                              if alias.name.startswith("_")]
    assert offenders == []


def _imports(path: Path) -> set[str]:
    """The benchmark modules ``path`` imports, by absolute name."""
    package = ".".join(path.relative_to(REPO_ROOT).parent.parts)
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
        if base.startswith("benchmarks"):
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out
