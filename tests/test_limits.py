"""The size limits the core keeps, so that every module, function and call can be read in one
sitting: no module over 500 lines, no function over 60 lines or with more than 8 parameters
(keyword-only config objects instead), and no import circle among heaprank's modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "heaprank"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters a caller passes (``self`` and ``cls`` do not count, ``*args`` does)."""
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args]
    count = len(names) + len(args.kwonlyargs) + (args.vararg is not None) \
        + (args.kwarg is not None)
    return count - (names[:1] in (["self"], ["cls"]))


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_and_functions_are_small(name: str) -> None:
    path = MODULES[name]
    source = path.read_text(encoding="utf-8")
    lines = source.count("\n")
    assert lines <= MAX_MODULE_LINES, f"{name}: {lines} lines (at most {MAX_MODULE_LINES})"
    too_long, too_wide = [], []
    for node in _functions(ast.parse(source)):
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_FUNCTION_LINES:
            too_long.append(f"{node.name} (line {node.lineno}: {length} lines)")
        if _parameters(node) > MAX_PARAMETERS:
            too_wide.append(f"{node.name} (line {node.lineno}: {_parameters(node)} parameters)")
    assert not too_long, f"{name}: functions over {MAX_FUNCTION_LINES} lines: {too_long}"
    assert not too_wide, f"{name}: functions over {MAX_PARAMETERS} parameters: {too_wide}"


def _imports(name: str, path: Path) -> set[str]:
    """The heaprank modules ``name`` imports, at any depth of its code (lazy imports and
    ``TYPE_CHECKING`` blocks included: they are dependencies all the same)."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here[:len(here) - (node.level - 1)] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            # "from package import module" depends on that module, not on the package
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module
                       for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in MODULES and t != name)
    return out


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_circle_among_heaprank_modules() -> None:
    # A package's __init__ that re-exports its modules is not part of a circle through them:
    # a module importing a sibling by name does not run through the package's own imports.
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    circle = _circle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])
