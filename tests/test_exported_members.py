"""``heaprank.__all__`` lists exactly the public names ``heaprank/__init__.py`` binds, sorted."""

from __future__ import annotations

import ast
from pathlib import Path

import heaprank


def _public_names_bound_in_init() -> set[str]:
    tree = ast.parse(Path(heaprank.__file__).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    names.discard("__all__")
    names.discard("annotations")  # from __future__
    return {n for n in names if not n.startswith("_") or n == "__version__"}


def test_all_equals_the_public_names_sorted():
    assert heaprank.__all__ == sorted(_public_names_bound_in_init())


def test_all_is_sorted_unique_and_importable():
    assert heaprank.__all__ == sorted(set(heaprank.__all__))
    for name in heaprank.__all__:
        assert getattr(heaprank, name) is not None, name


def test_version_is_a_string():
    assert isinstance(heaprank.__version__, str) and heaprank.__version__
