"""The package's layers follow the pipeline: no module imports from a layer above its own.

Bottom to top (docs/design.md, "Module map"): the foundations; the pure model; the values
learning and storage share, and the configuration; scoring and the state backends (neither
imports the other); the learning stages; the facade; what is built on the facade (the
framework adapters, the command line). The test reads every import of ``heaprank/`` (lazy ones
inside functions included) and fails on any that runs up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import heaprank

PACKAGE = Path(heaprank.__file__).parent

#: Each layer's top-level modules or packages of ``heaprank``, bottom first.
LAYERS = (
    ("errors", "_version", "_optional", "_checks", "_time", "_accel"),
    ("model",),
    ("records", "config"),
    ("scoring", "state"),
    ("learning",),
    ("reranker", "__init__"),
    ("adapters", "app", "mcp", "__main__"),
)
#: Layers whose parts must not import each other (siblings, not floors).
SIBLINGS = {3}


def _layer(module: str) -> tuple[int, str]:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for level, names in enumerate(LAYERS):
        if top in names:
            return level, top
    raise AssertionError(f"{module}: in no layer of the test; add it to LAYERS")


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, imported module)`` of every heaprank import in a file."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("").parts
    package = list(rel[:-1]) if rel[-1] != "__init__" else list(rel[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out += [(node.lineno, n) for n in names if n.startswith("heaprank.")]
    return out


def test_no_module_imports_from_a_layer_above_its_own():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("").parts
        me = _layer(".".join(rel))
        for line, target in _imports(path):
            other = _layer(target)
            sideways = me[0] in SIBLINGS and other[0] == me[0] and other[1] != me[1]
            if other[0] > me[0] or sideways:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} -> {target}")
    assert upward == []


def test_every_module_is_in_a_layer():
    for path in PACKAGE.iterdir():
        if path.name.startswith(".") or path.name == "py.typed" or path.suffix in (".pyi", ".so"):
            continue
        if path.suffix == ".py" or (path.is_dir() and (path / "__init__.py").exists()):
            _layer(f"heaprank.{path.stem}")
