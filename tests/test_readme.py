"""The README's Python code runs as written: each ```python block, verbatim, in an empty folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def python_blocks() -> list[str]:
    return PYTHON_BLOCK.findall(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_examples():
    assert python_blocks(), "README.md has no ```python block: this test would check nothing"


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_block_runs_verbatim(index, tmp_path):
    code = python_blocks()[index]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)
    missing = MISSING_MODULE.search(proc.stderr)
    if proc.returncode != 0 and missing and not missing.group(1).startswith("heaprank"):
        pytest.skip(f"README block {index} needs {missing.group(1)!r}, not installed here")
    assert proc.returncode == 0, f"README block {index} failed:\n{proc.stderr}"
    assert proc.stdout.strip(), f"README block {index} printed nothing"
