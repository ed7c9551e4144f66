"""The installed package is the library: the wheel holds heaprank* only, and the library never
reaches outside itself for benchmarks or their data."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from heaprank._accel import STAGES

ROOT = Path(__file__).resolve().parent.parent
#: What only the benchmarks need (matplotlib is not among them: the library's ``plot`` extra).
BENCH_ONLY = ("torch", "heapdb-memory", "bm25s", "sentence-transformers", "tqdm")


def test_library_code_never_reaches_for_the_benchmarks_or_their_data():
    offenders = []
    for path in sorted((ROOT / "heaprank").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if re.search(r"\.\./shared|parents\[\d\]|^\s*(from|import) benchmarks\b", text, re.MULTILINE):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
    assert not (ROOT / "heaprank" / "bench").exists()


def test_no_extra_of_the_package_pins_benchmark_requirements():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"].get(
        "optional-dependencies", {})
    pinned = {name: reqs for name, reqs in extras.items()
              if any(req.lower().startswith(BENCH_ONLY) for req in reqs)}
    assert pinned == {}
    requirements = (ROOT / "benchmarks" / "requirements.txt").read_text(encoding="utf-8")
    assert "torch==2.13.0" in requirements and "heapdb-memory==0.1.0" in requirements


def test_every_extra_an_error_message_names_exists():
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"])
    named = set()
    for path in sorted((ROOT / "heaprank").rglob("*.py")):
        named.update(re.findall(r"require\([^)]*extra=\"(\w+)\"", path.read_text(encoding="utf-8")))
    assert named and named <= extras, named - extras
    assert "matplotlib>=3.7" in tomllib.loads((ROOT / "pyproject.toml").read_text(
        encoding="utf-8"))["project"]["optional-dependencies"]["plot"]


@pytest.mark.slow
def test_the_wheel_holds_only_heaprank(tmp_path):
    # Built from a copy of the checkout: setuptools writes build/ next to the sources.
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"))
    out = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q",
                           "-w", str(out)], capture_output=True, text=True, timeout=300,
                          check=False)
    if proc.returncode != 0 and "No matching distribution found for setuptools" in proc.stderr:
        pytest.skip("no package index to fetch the build backend from")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("heaprank-*.whl")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    name, version = wheel.name.split("-")[:2]  # a platform wheel with the C kernels built
    assert tops == {"heaprank", f"{name}-{version}.dist-info"}, tops
    names = zipfile.ZipFile(wheel).namelist()
    assert "heaprank/learning/evaluation.py" in names
    for stage in STAGES:  # each stage's stub, and its module where the C kernels built
        assert f"heaprank/_accel/_{stage}.pyi" in names, names
        if os.environ.get("HEAPRANK_REQUIRE_SPEEDUPS") == "1":  # .ci/run: they must build
            assert any(n.startswith(f"heaprank/_accel/_{stage}.") and n.endswith((".so", ".pyd"))
                       for n in names), names
