"""The README is what a newcomer reads in a minute, and it is true: its demo block is what
``heaprank demo`` prints; its Python code (and the docs' it moved there) runs as written, in an
empty folder; the LangChain and LlamaIndex recipes learn what they say; a fresh virtual
environment that follows their install lines imports and runs them; and its links work on the
package index page, where a relative link has nothing to point at."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import venv
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.DOTALL | re.MULTILINE)
TEXT_BLOCK = re.compile(r"^```text\n(.*?)^```", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\]\(([^)]+)\)")
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
#: What the README leads with, in this order: the demo, three recipes, the states, the rest.
OUTLINE = ["## See it learn", "## Use it", "### Plain Python", "### LangChain", "### LlamaIndex",
           "## Which state for which deployment", "## For agents (MCP)", "## Learn more",
           "## Develop"]


def readme() -> str:
    return README.read_text(encoding="utf-8")


def python_blocks() -> list[tuple[str, str]]:
    """``(file, code)`` of every python block of the README and of docs/."""
    return [(path.name, code) for path in (README, *DOCS)
            for code in PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))]


def section(heading: str) -> str:
    """The text under ``heading`` (``## X`` or ``### X``), up to the next heading of its level
    or above."""
    text = readme()
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ")[0]
    ends = [m.start() for m in re.finditer(r"^#{2,%d} " % len(level), text[start + 1:], re.M)]
    return text[start:start + 1 + ends[1]] if len(ends) > 1 else text[start:]


def section_code(heading: str) -> str:
    blocks = PYTHON_BLOCK.findall(section(heading))
    assert len(blocks) == 1, f"expected one python block under '{heading}'"
    return blocks[0]


def install_lines(heading: str) -> list[list[str]]:
    """The ``pip install`` commands of a section's bash block, as argument lists (comments cut)."""
    lines = [line.split("#", 1)[0].split() for block in BASH_BLOCK.findall(section(heading))
             for line in block.splitlines()]
    commands = [line for line in lines if line[:2] == ["pip", "install"]]
    assert commands, f"no pip install line under '{heading}'"
    return commands


def source_url() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "urls"]["Source"]


# ------------------------------------------------------------------ a README read in a minute


def test_the_demo_block_is_what_heaprank_demo_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from heaprank.app.cli import main

    assert main(["demo"]) == 0
    printed = capsys.readouterr().out
    [block] = TEXT_BLOCK.findall(section("## See it learn"))
    assert block == printed, ("README.md's demo block differs from `heaprank demo`; paste its "
                              f"output in:\n{printed}")


def test_it_leads_with_the_demo_then_three_recipes_then_the_states() -> None:
    text = readme()
    places = [text.find(f"\n{heading}\n") for heading in OUTLINE]
    assert -1 not in places and places == sorted(places), dict(zip(OUTLINE, places))
    assert text.index("```text\n") < text.index("```python\n")  # the demo's output comes first


def test_its_prose_reads_in_a_minute() -> None:
    text = readme()
    prose = re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)
    prose = re.sub(r"^\|.*$", "", prose, flags=re.MULTILINE)  # tables are scanned, not read
    assert len(prose.split()) <= 450 and text.count("\n") <= 220


def test_each_recipe_shows_the_model_ids_it_can_cite() -> None:
    assert 'f"[{r.id}] {r.candidate.text}"' in section_code("### Plain Python")
    assert "[{d.metadata['heaprank_id']}]" in section_code("### LangChain")
    llamaindex = section_code("### LlamaIndex")
    assert "citations=True" in llamaindex and "text_qa_template=citation_qa_template()" in llamaindex


def test_the_state_table_names_every_backend() -> None:
    rows = [line for line in section("## Which state for which deployment").splitlines()
            if line.startswith("| ") and not line.startswith("| deployment")]
    states = [row.split("|")[2].strip() for row in rows]
    assert [s.split(" ")[0].strip(",") for s in states] == [
        "memory", "SQLite", "Redis", "Redis", "PostgreSQL"]
    assert "Redis Cluster" in states[3] and "heaprank[postgres]" in states[4]
    assert "coming" not in section("## Which state for which deployment")


def test_it_says_which_redis_database_make_test_uses_and_how_to_move_it() -> None:
    develop = section("## Develop")
    assert "database 15" in develop and "HEAPRANK_REDIS_URL=redis://" in develop
    from tests.integration.redis_servers import DEFAULT_URL

    assert DEFAULT_URL.endswith("/15")


def test_every_link_works_on_the_package_index_page() -> None:
    links = LINK.findall(readme())
    assert links and all(link.startswith("https://") for link in links), links
    base = source_url() + "/blob/main/"
    for link in links:
        if link.startswith(base):  # a file of this repository: it exists
            assert (ROOT / link[len(base):]).is_file(), link


def test_every_docs_link_points_at_a_file() -> None:
    for path in DOCS:
        for link in LINK.findall(path.read_text(encoding="utf-8")):
            if not link.startswith(("https://", "http://", "#")):
                assert (path.parent / link.split("#")[0]).resolve().is_file(), (path.name, link)


# ------------------------------------------------------------------ the code runs as written


def test_the_readme_has_python_examples() -> None:
    assert python_blocks(), "README.md has no ```python block: this test would check nothing"


@pytest.mark.parametrize("where", [f"{name}#{i}" for i, (name, _) in enumerate(python_blocks())])
def test_each_python_block_runs_verbatim(where: str, tmp_path: Path) -> None:
    name, code = python_blocks()[int(where.rsplit("#", 1)[1])]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)
    missing = MISSING_MODULE.search(proc.stderr)
    if proc.returncode != 0 and missing and not missing.group(1).startswith("heaprank"):
        pytest.skip(f"{where} needs {missing.group(1)!r}, not installed here")
    assert proc.returncode == 0, f"{where} failed:\n{proc.stderr}"
    assert proc.stdout.strip(), f"{where} printed nothing"


def _run_section(heading: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HEAPRANK_STATE", raising=False)
    scope: dict[str, Any] = {"__name__": "readme"}
    exec(compile(section_code(heading), f"README.md#{heading}", "exec"), scope)
    return scope


def test_the_plain_python_recipe_learns_what_the_answer_cites(tmp_path, monkeypatch) -> None:
    with redirect_stdout(io.StringIO()):
        scope = _run_section("### Plain Python", tmp_path, monkeypatch)
    rr = scope["rr"]
    assert "[lisbon-booked]" in scope["prompt"] and rr.stats()["feedbacks"] == 1
    assert rr.links("user:maya")
    rr.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the frameworks' own, not heaprank's
def test_the_langchain_recipe_learns_into_its_sqlite_file(tmp_path, monkeypatch, capsys):
    pytest.importorskip("langchain_heaprank")
    scope = _run_section("### LangChain", tmp_path, monkeypatch)
    [report] = scope["handler"].reports
    assert report.used == ("lisbon-booked",) and report.namespace == "user:maya"
    assert scope["handler"].failed == 0 and scope["handler"].skipped == 0
    assert scope["retriever"].engine.links("user:maya") and (tmp_path / "heaprank.db").exists()
    out = capsys.readouterr().out
    assert "March 14 at 9:40 [lisbon-booked]" in out and "lisbon-booked 1.0 rel " in out
    scope["retriever"].close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_llamaindex_recipe_learns_into_its_sqlite_file(tmp_path, monkeypatch, capsys):
    pytest.importorskip("llama_index.postprocessor.heaprank")
    try:
        scope = _run_section("### LlamaIndex", tmp_path, monkeypatch)
    finally:
        from llama_index.core.instrumentation import get_dispatcher

        root = get_dispatcher()
        root.span_handlers = [h for h in root.span_handlers if type(h).__name__ != "HeapRankFeedbackHandler"]
    [report] = scope["handler"].reports
    assert len(report.used) == 1 and report.used[0].startswith("lisbon-booked#")
    assert scope["pp"].engine.links("default") and (tmp_path / "heaprank.db").exists()
    assert "1.0 lisbon-" in capsys.readouterr().out
    scope["pp"].close()


@pytest.mark.slow
@pytest.mark.parametrize("heading", ["### LangChain", "### LlamaIndex"])
def test_a_fresh_venv_following_the_install_lines_imports_and_runs(heading, tmp_path):
    """The recipe's pip lines, run from the repository root in a new virtual environment (the
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
