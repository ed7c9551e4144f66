"""The README's Python code runs as written: each ```python block, verbatim, in an empty folder;
the LangChain and LlamaIndex sections learn what they say; and a fresh virtual environment that
follows their install lines imports and runs them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")


def python_blocks() -> list[str]:
    return PYTHON_BLOCK.findall(README.read_text(encoding="utf-8"))


def section(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def section_code(heading: str) -> str:
    blocks = PYTHON_BLOCK.findall(section(heading))
    assert len(blocks) == 1, f"expected one python block under '## {heading}'"
    return blocks[0]


def install_lines(heading: str) -> list[list[str]]:
    """The ``pip install`` commands of a section's bash block, as argument lists (comments cut)."""
    lines = [line.split("#", 1)[0].split() for block in BASH_BLOCK.findall(section(heading))
             for line in block.splitlines()]
    commands = [line for line in lines if line[:2] == ["pip", "install"]]
    assert commands, f"no pip install line under '## {heading}'"
    return commands


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


def _run_section(heading: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HEAPRANK_STATE", raising=False)
    scope: dict[str, Any] = {"__name__": "readme"}
    exec(compile(section_code(heading), f"README.md#{heading}", "exec"), scope)
    return scope


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the frameworks' own, not heaprank's
def test_the_langchain_section_learns_into_its_sqlite_file(tmp_path, monkeypatch, capsys):
    pytest.importorskip("langchain_heaprank")
    scope = _run_section("LangChain", tmp_path, monkeypatch)
    [[report]] = scope["handler"].reports.values()
    assert report.used == ("lisbon-booked",) and report.namespace == "user:maya"
    assert scope["handler"].failed == 0 and scope["retriever"].engine.links("user:maya")
    assert (tmp_path / "heaprank.db").exists()
    out = capsys.readouterr().out
    assert "March 14 at 9:40 [lisbon-booked]" in out and "lisbon-booked 1.0 rel " in out
    scope["retriever"].engine.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_llamaindex_section_learns_into_its_sqlite_file(tmp_path, monkeypatch, capsys):
    pytest.importorskip("llama_index.postprocessor.heaprank")
    try:
        scope = _run_section("LlamaIndex", tmp_path, monkeypatch)
    finally:
        from llama_index.core.instrumentation import get_dispatcher

        root = get_dispatcher()
        root.span_handlers = [h for h in root.span_handlers if type(h).__name__ != "HeapRankFeedbackHandler"]
    [report] = scope["handler"].reports
    assert len(report.used) == 1 and report.used[0].startswith("lisbon-booked#")
    assert scope["pp"].engine.links("default") and (tmp_path / "heaprank.db").exists()
    assert "1.0 lisbon-" in capsys.readouterr().out
    scope["pp"].engine.close()


@pytest.mark.slow
@pytest.mark.parametrize("heading", ["LangChain", "LlamaIndex"])
def test_a_fresh_venv_following_the_install_lines_imports_and_runs(heading, tmp_path):
    """The section's pip lines, run from the repository root in a new virtual environment (the
    three packages from this checkout, the rest from the package index), then its code."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    for command in install_lines(heading):
        proc = subprocess.run([str(python), "-m", *command, "--quiet"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1200, check=False)
        if proc.returncode != 0 and "No matching distribution" in proc.stderr \
                and "heaprank" not in proc.stderr:
            pytest.skip(f"no package index here: {proc.stderr.strip()[-200:]}")
        assert proc.returncode == 0, f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}"
    run = tmp_path / "run"
    run.mkdir()
    proc = subprocess.run([str(python), "-c", section_code(heading)], cwd=run, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "lisbon-booked" in proc.stdout and (run / "heaprank.db").exists()
