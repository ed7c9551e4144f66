"""The three distributions are ready to publish: a license in each, metadata for their package
pages, the integrations bound to the core they were built against, READMEs that read on PyPI."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"langchain-heaprank": ROOT / "integrations" / "langchain",
            "llama-index-postprocessor-heaprank": ROOT / "integrations" / "llama-index"}
ALL = {"heaprank": ROOT, **PACKAGES}


def _toml(path: Path) -> dict:
    import tomllib  # Python 3.11+, as the tests of the packaging are

    return tomllib.loads(path.read_text(encoding="utf-8"))


def _project(folder: Path) -> dict:
    return _toml(folder / "pyproject.toml")["project"]


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_distribution_has_the_apache_license_and_its_metadata(name: str) -> None:
    folder = ALL[name]
    project = _project(folder)
    assert project["name"] == name and project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (folder / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert project["authors"] and project["urls"]["Homepage"].startswith("https://")
    assert "Typing :: Typed" in project["classifiers"]


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_distribution_names_its_source_and_where_to_report_issues(name: str) -> None:
    urls = _project(ALL[name])["urls"]
    repo = _project(ROOT)["urls"]["Source"]
    assert repo.startswith("https://") and "pypi.org" not in repo
    assert "pypi.org" not in urls["Homepage"]  # the package index page links back to it itself
    assert urls["Source"].startswith(repo) and urls["Issues"] == f"{repo}/issues"
    if name != "heaprank":  # the package's own folder of the repository
        folder = ALL[name].relative_to(ROOT).as_posix()
        assert urls["Source"] == urls["Homepage"] == f"{repo}/tree/main/{folder}"


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_the_integrations_require_the_core_they_were_built_against(name: str) -> None:
    from heaprank import __version__

    deps = _project(PACKAGES[name])["dependencies"]
    assert "heaprank>=0.2,<0.3" in deps
    major, minor = (int(x) for x in __version__.split(".")[:2])
    assert (major, minor) == (0, 2)


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_the_package_readme_reads_on_its_package_page(name: str) -> None:
    text = (PACKAGES[name] / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert all(link.startswith("https://") for link in links), links  # no ../../README.md


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_the_package_readme_installs_from_a_clone_first(name: str) -> None:
    """Until heaprank is on the package index, ``pip install <name>`` cannot resolve its core:
    the first install line works from a clone, the index line follows, said to wait for it."""
    text = (PACKAGES[name] / "README.md").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.lstrip().startswith(("pip install",
                                                                          "git clone"))]
    folder = PACKAGES[name].relative_to(ROOT).as_posix()
    assert lines[0].startswith("git clone ") and _project(ROOT)["urls"]["Source"] in lines[0]
    assert lines[1].split("#")[0].split() == ["pip", "install", "-e", ".", "-e", folder]
    index = next(line for line in lines if line.startswith(f"pip install {name}"))
    assert "released" in index and lines.index(index) > 1


def test_the_llamaindex_package_has_its_llamahub_table() -> None:
    config = _toml(PACKAGES["llama-index-postprocessor-heaprank"] / "pyproject.toml")
    hub = config["tool"]["llamahub"]
    assert hub["import_path"] == "llama_index.postprocessor.heaprank"
    assert set(hub["class_authors"]) == {"HeapRankPostprocessor", "HeapRankFeedbackHandler"}


@pytest.mark.parametrize(("name", "module"), [("langchain-heaprank", "langchain_heaprank"),
                                              ("llama-index-postprocessor-heaprank",
                                               "llama_index.postprocessor.heaprank")])
def test_each_package_says_its_version(name: str, module: str) -> None:
    from importlib import import_module
    from importlib.metadata import version

    package = pytest.importorskip(module)
    assert import_module(module).__version__ == version(name) == _project(PACKAGES[name])["version"]
    assert package.__version__


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL))
def test_the_wheel_carries_the_license_and_the_metadata(name: str, tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ALL[name], source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
        "integrations", "benchmarks", "tests", "*.so"))
    out = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q",
                           "-w", str(out)], capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0 and "No matching distribution found for setuptools" in proc.stderr:
        pytest.skip("no package index to fetch the build backend from")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "License-Expression: Apache-2.0" in text and "Classifier: Typing :: Typed" in text
    if name != "heaprank":
        assert "Requires-Dist: heaprank<0.3,>=0.2" in text
        assert all(n.split("/")[0] in {"langchain_heaprank", "llama_index"} or ".dist-info/" in n
                   for n in names), names


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL))
def test_the_sdist_carries_the_license_and_the_metadata(name: str, tmp_path: Path) -> None:
    """The source distribution, built by the backend of its pyproject.toml (setuptools, in this
    environment: no package index needed), holds the LICENSE its metadata names."""
    import tarfile

    source = tmp_path / "src"
    shutil.copytree(ALL[name], source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
        "integrations", "benchmarks", "tests", "*.so"))
    out = tmp_path / "dist"
    backend = _toml(source / "pyproject.toml")["build-system"]["build-backend"]
    proc = subprocess.run([sys.executable, "-c", f"import {backend} as b; b.build_sdist({str(out)!r})"],
                          cwd=source, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    (sdist,) = out.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        top = names[0].split("/")[0]
        assert f"{top}/LICENSE" in names, names
        assert "Apache License" in tar.extractfile(f"{top}/LICENSE").read().decode()
        text = tar.extractfile(f"{top}/PKG-INFO").read().decode()
    assert "License-Expression: Apache-2.0" in text and "License-File: LICENSE" in text
    assert "Classifier: Typing :: Typed" in text and "Project-URL: Homepage, https://" in text
    assert "Project-URL: Source, https://" in text and "Project-URL: Issues, https://" in text
    if name != "heaprank":
        assert "Requires-Dist: heaprank<0.3,>=0.2" in text


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALL))
def test_the_sdist_ships_its_tests_with_their_helpers_or_none(name: str, tmp_path: Path) -> None:
    """A package's sdist holds every file of its tests/ (conftest.py and the support module
    the tests import included), so ``pytest tests`` runs from it; the core's tests need the
    whole repository (benchmarks, integrations, README), so its sdist holds none."""
    import tarfile

    source = tmp_path / "src"
    shutil.copytree(ALL[name], source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
        "integrations", "benchmarks", "*.so"))
    backend = _toml(source / "pyproject.toml")["build-system"]["build-backend"]
    proc = subprocess.run([sys.executable, "-c",
                           f"import {backend} as b; b.build_sdist({str(tmp_path / 'dist')!r})"],
                          cwd=source, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    shipped = {n[len(top) + 1:] for n in names if n.startswith(f"{top}/tests/")}
    if name == "heaprank":
        assert shipped == set()
        return
    wanted = {p.relative_to(source).as_posix() for p in (source / "tests").rglob("*.py")}
    assert {"tests/conftest.py"} < wanted and wanted <= shipped, wanted - shipped


@pytest.mark.slow
def test_an_application_type_checks_against_the_packages_as_installed(tmp_path: Path) -> None:
    """``make typecheck-consumer`` as a test: ``mypy --strict`` on integrations/typing/consumer.py
    from its own folder (the source tree is not on mypy's path), so each import must resolve to
    an installed distribution with its types; editable installs are plain ``.pth`` entries that
    mypy follows (it cannot see setuptools' import-hook fallback: "Cannot find implementation")."""
    from importlib.metadata import PackageNotFoundError, distribution

    pytest.importorskip("mypy")
    for name in ALL:
        try:
            distribution(name)
        except PackageNotFoundError:
            pytest.skip(f"{name} is not installed here (make test installs all three)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    proc = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini",
                           "--cache-dir", str(tmp_path / "cache"), "consumer.py"],
                          cwd=ROOT / "integrations" / "typing", env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found in 1 source file" in proc.stdout
