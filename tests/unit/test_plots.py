"""The plots draw real PNG files (matplotlib's Agg renderer), also from empty or refused data."""

from __future__ import annotations

from heaprank import Config, Link
from heaprank.plots import PLOTS, plot_links, plot_tune
from heaprank.tuning import tune
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
