"""``heaprank forget --preview`` and ``heaprank plot retention|forget-matrix`` on a real SQLite
state and real policy files; each plot is rendered to a PNG file."""

from __future__ import annotations

import json

import pytest

from heaprank import Reranker
from heaprank.app.cli import main

DAY = 86_400.0
NOW = 1_760_000_000.0
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

POLICY_TOML = """\
threshold = 0.3

[namespaces."user:maya"]
half_life_days = 30

[namespaces.pinned]
enabled = false
"""


@pytest.fixture()
def state(tmp_path) -> str:
    url = f"sqlite:///{tmp_path}/state.db"
    with Reranker(url) as rr:
        for ns in ("user:maya", "pinned", "user:other"):
            for i, age in enumerate((400, 60, 2)):
                doc = f"{ns}-doc{i}"
                ranking = rr.rerank("q", [{"id": doc, "text": "a note", "score": 1.0}],
                                    namespace=ns, now=NOW - age * DAY)
                rr.feedback(ranking.recall_id, used=[doc])
    return url


@pytest.fixture()
def policy(tmp_path):
    path = tmp_path / "policy.toml"
    path.write_text(POLICY_TOML, encoding="utf-8")
    return path


def test_forget_preview_prints_count_and_ids_and_deletes_nothing(state, policy, capsys):
    with Reranker(state) as rr:
        before = rr.stats()
    args = ["forget", "--state", state, "--policy", str(policy), "--now", str(NOW), "--preview"]
    assert main(args + ["--namespace", "user:maya"]) == 0
    out = capsys.readouterr().out
    # user:maya: S = 30 x 1.35 = 40.5 days, forgotten after 48.8 idle days.
    assert "namespace 'user:maya': 2 of 3 used documents forgotten" in out
    assert "half_life_days 30" in out and "enabled true" in out
    lines = out.splitlines()
    assert lines[2].split()[0] == "user:maya-doc0" and lines[3].split()[0] == "user:maya-doc1"
    assert "user:maya-doc2" not in out and "user:other" not in out
    assert "nothing was deleted" in out
    assert main(args + ["--namespace", "pinned", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["count"], report["checked"], report["policy"]["enabled"]) == (0, 3, False)
    assert main(args + ["--namespace", "user:other", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)  # the global default: after 97.5 idle days
    assert report["ids"] == ["user:other-doc0"]
    with Reranker(state) as rr:
        assert rr.stats() == before


def test_forget_without_preview_or_with_a_bad_policy_is_a_one_line_error(state, tmp_path, capsys):
    assert main(["forget", "--state", state, "--namespace", "user:maya"]) == 2
    assert "only --preview" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"threshold": 2}), encoding="utf-8")
    assert main(["forget", "--state", state, "--namespace", "u", "--policy", str(bad),
                 "--preview"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("heaprank: ") and "threshold" in err and err.count("\n") == 1


def test_plot_retention_renders_one_curve_per_policy(state, policy, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "retention.png"
    assert main(["plot", "retention", "--state", state, "--policy", str(policy), "--out",
                 str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in rows] == ["global default (1 namespaces)", "user:maya", "pinned"]
    assert rows[1]["forgotten_after_days"] == pytest.approx(30 * 1.2 * 1.2039728, rel=1e-6)
    assert rows[2]["forgotten_after_days"] is None  # exempt
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000


def test_plot_forget_matrix_renders_days_over_importance_and_uses(policy, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "matrix.png"
    assert main(["plot", "forget-matrix", "--policy", str(policy), "--namespace", "user:maya",
                 "--out", str(out), "--json"]) == 0
    days = json.loads(capsys.readouterr().out)
    assert len(days) == 8 and all(len(row) == 8 for row in days)
    assert all(a <= b for row in days for a, b in zip(row, row[1:]))  # more uses: later
    assert all(a[0] <= b[0] for a, b in zip(days, days[1:]))  # more important: later
    assert out.read_bytes().startswith(PNG_MAGIC)
    exempt = tmp_path / "exempt.png"
    assert main(["plot", "forget-matrix", "--policy", str(policy), "--namespace", "pinned",
                 "--out", str(exempt), "--json"]) == 0
    assert all(d is None for row in json.loads(capsys.readouterr().out) for d in row)
    assert exempt.read_bytes().startswith(PNG_MAGIC)
