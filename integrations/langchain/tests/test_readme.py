"""The README's LangChain section runs as written, and its feedback reaches the state."""

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


def test_langchain_snippet_runs_and_learns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "readme"}
    exec(compile(section_code("LangChain"), "README.md#LangChain", "exec"), scope)
    [[report]] = scope["handler"].reports.values()
    assert report.used == ("lisbon-booked",) and report.namespace == "user:maya"
    assert scope["engine"].links("user:maya")
    assert (tmp_path / "heaprank.db").exists()
    out = capsys.readouterr().out
    assert "March 14 at 9:40 [lisbon-booked]" in out and "rel " in out
    scope["engine"].close()
