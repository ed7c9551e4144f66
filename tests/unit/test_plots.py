"""The plots draw real PNG files (matplotlib's Agg renderer), also from empty or refused data."""

from __future__ import annotations

from heaprank import Config, Link
from heaprank.app.plots import PLOTS, _retention_figure, _tune_figure, plot_links, plot_tune
from heaprank.learning.tuning import tune
from heaprank.model.retention import NAMESPACES_KEY, parse_policy
from tests.tuning_logs import synthetic_log

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path) -> bool:
    data = path.read_bytes()
    return data.startswith(PNG) and len(data) > 5_000


def test_plot_links_draws_each_link_with_its_interval(tmp_path):
    links = [Link(f"kind:k{i}", p=0.1 * i, n=10.0 * i, low=0.05 * i, high=0.12 * i, pos=i, neg=1)
             for i in range(1, 8)]
    plot_links(links, tmp_path / "links.png", limit=5)
    assert _is_png(tmp_path / "links.png")
    plot_links([], tmp_path / "none.png")
    assert _is_png(tmp_path / "none.png")


def test_plot_tune_draws_pooled_and_namespace_fits(tmp_path):
    log = synthetic_log(400, namespace="a") + synthetic_log(60, namespace="b", seed=1,
                                                            step_s=400.0)
    plot_tune(tune(log, Config(), namespace="*", min_impressions=20), tmp_path / "tune.png")
    assert _is_png(tmp_path / "tune.png")
    refused = tune(log[:10], Config(), namespace="*")
    assert refused.pooled.fitted is None
    plot_tune(refused, tmp_path / "refused.png")  # says why, draws the current weights
    assert _is_png(tmp_path / "refused.png")


def test_the_plot_group_is_a_registry():
    assert {"links", "tune"} <= set(PLOTS)
    for entry in PLOTS.values():
        assert entry.help and callable(entry.add_arguments) and callable(entry.draw)


def test_plot_tune_draws_only_what_was_tuned_and_keeps_the_legend_off_the_points(tmp_path):
    # The log carries relevance, age, importance and usefulness: reinforcement and association
    # were not tuned, so they must not show as fitted points at their current value.
    log = synthetic_log(300, namespace="a") + synthetic_log(300, namespace="b", seed=2)
    result = tune(log, Config(), namespace="*", fit_half_life=True, min_impressions=20)
    drawn = plot_tune(result, tmp_path / "tune.png")
    assert _is_png(tmp_path / "tune.png")
    assert drawn == ["relevance", "recency", "importance", "usefulness", "half-life days"]
    fig, _ = _tune_figure(result, 12)
    fig.canvas.draw()
    legend = fig.legends[0].get_window_extent()
    for ax in fig.axes:
        assert ax.get_legend() is None
        assert not legend.overlaps(ax.get_window_extent())
    assert plot_tune(tune(log, Config(), min_impressions=20), tmp_path / "no-hl.png") == drawn[:4]


def test_an_exempt_policy_draws_no_threshold(tmp_path):
    policies = parse_policy({"threshold": 0.3, NAMESPACES_KEY: {
        "pinned": {"enabled": False}, "scratch": {"threshold": 0.5}}}, "test")
    fig, rows = _retention_figure(policies, ["x", "pinned"], 1.0, 0.0)
    thresholds = sorted(line.get_ydata()[0] for line in fig.axes[0].lines
                        if line.get_linestyle() == "--")
    assert thresholds == [0.3, 0.5]  # the global and scratch; pinned never forgets
    assert [r["label"] for r in rows] == ["global default (1 namespaces)", "pinned", "scratch"]


def test_plot_links_leaves_out_links_with_no_evidence(tmp_path):
    from heaprank.app import plots

    drawn: list[list[str]] = []
    real = plots._figure

    def spy(width, height):  # the real figure, remembered to read its labels back
        fig = real(width, height)
        drawn.append(fig)
        return fig

    links = [Link("kind:fact", p=0.4, n=120.0, low=0.3, high=0.5, pos=48, neg=72),
             Link("num:yes", p=0.5, n=0.0, low=0.01, high=0.99, pos=0, neg=0),
             Link("date:yes", p=0.2, n=3.0, low=0.05, high=0.5, pos=1, neg=2)]
    plots._figure = spy
    try:
        plot_links(links, tmp_path / "links.png")
    finally:
        plots._figure = real
    labels = [t.get_text() for t in drawn[0].axes[0].get_yticklabels()]
    assert labels == ["kind:fact  (n 120)", "date:yes  (n 3)"]  # num:yes (n 0) is only the prior
    assert _is_png(tmp_path / "links.png")


def test_plot_tune_with_nothing_fitted_says_so_above_the_bars():
    refused = tune(synthetic_log(10, namespace="a"), Config(), namespace="*")
    assert refused.pooled.fitted is None
    fig, _ = _tune_figure(refused, 12)
    ax = fig.axes[0]
    assert ax.get_title().startswith("Current weights: nothing fitted\n")
    assert refused.fit.reason.split()[0] in ax.get_title()
    assert "Fitted weights" not in ax.get_title() and len(ax.texts) == 0  # no note over the bars


def test_an_exempt_policy_is_drawn_as_never_forgetting():
    policies = parse_policy({"threshold": 0.3, NAMESPACES_KEY: {"pinned": {"enabled": False}}},
                            "test")
    fig, rows = _retention_figure(policies, ["pinned"], 1.0, 0.0)
    curves = {line.get_label(): line.get_ydata() for line in fig.axes[0].lines
              if line.get_label().startswith(("global", "pinned"))}
    assert set(curves["pinned (exempt)"]) == {1.0}
    assert min(curves["global default (0 namespaces)"]) < 0.3  # the global one does decay
    assert rows[1]["forgotten_after_days"] == float("inf")
