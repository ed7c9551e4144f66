"""The README's LlamaIndex section runs as written, and its feedback reaches the state."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[3] / "README.md"


def section_code(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)
    assert len(blocks) == 1, f"expected one python block under '## {heading}'"
    return blocks[0]


def test_llamaindex_snippet_runs_and_learns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "readme"}
    try:
        exec(compile(section_code("LlamaIndex"), "README.md#LlamaIndex", "exec"), scope)
    finally:
        if "handler" in scope:
            scope["handler"].uninstall()
    [report] = scope["handler"].reports
    assert len(report.used) == 1 and report.used[0].startswith("lisbon-booked#")
    assert scope["pp"].engine.links("default")
    assert (tmp_path / "heaprank.db").exists()
    assert "rel " in capsys.readouterr().out
    scope["pp"].engine.close()
