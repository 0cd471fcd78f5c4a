"""What the report's plots draw for a model scoring exactly 0 and one whose metrics are undefined.

Real scores of a real build: a blind model (sees nothing: every count 0, no claims) and a garbled
model (no answer parses) are scored from hand-written submissions, next to an oracle; the test then
reads the text artists of the matplotlib Figures the report saves (bar labels, "n/a" marks,
footnotes, titles, axis labels, ticks), not only the markdown tables.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.evaluators import plots
from mmfaith.evaluators.spd_faith.report import (PLOT_METRICS, comparison_figures, compare_scores, score_figures,
                                                 write_score_report)
from mmfaith.evaluators.spd_faith.metrics import GROUPS
from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith
from mmfaith.families import get as get_family
from tests.spd_faith.test_spd_score import blind_responses, oracle_responses, prediction_lines, write_lines

RATE_PANEL = [key for key in PLOT_METRICS if get_family("spd-faith").metric(key).kind == "rate"]


def garbled_responses(record: dict[str, Any]) -> dict[str, str]:
    """Answers no probe can parse: every yes/no and count is unparsed, no claim is made."""
    return {probe: "I cannot tell." for probe in ("same", "different", "count", "describe")}


@pytest.fixture(scope="module")
def scores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Score dirs of the oracle, blind and garbled models on a tiny build (1 per tier, 1 multi, 1 control asked for;
    the embedded sample gives no easy pair since vases are not recoloured, so the easy group has no items and every
    value drawn for it must be "n/a" with that reason)."""
    root = tmp_path_factory.mktemp("report-plots")
    build = root / "build"
    build_spd_faith(BuildRequest(out=build, per_tier=1, multi=1, controls=1, seed=0, progress=False))
    dirs = {}
    for model, responses in (("oracle", oracle_responses), ("blind", blind_responses),
                             ("garbled", garbled_responses)):
        predictions = write_lines(root / f"{model}.jsonl", prediction_lines(build, responses, model))
        score_spd_faith(ScoreRequest(dataset=build, predictions=predictions, out=root / model, n_bootstrap=50))
        dirs[model] = root / model
    return dirs


def metrics_of(score_dir: Path) -> dict[str, Any]:
    return json.loads((score_dir / "metrics.json").read_text())


def bar_texts(figure: Figure, panel: int = 0) -> list[str]:
    """The value labels and n/a marks of one panel, in drawing order (series by series, category by category)."""
    return [text.get_text() for text in figure.axes[panel].texts]


NOTE = re.compile(r"^n/a: (?P<head>.+?) (?P<joint>for|in) (?P<members>.+?)(?: \((?P<reason>[^()]*)\))?$")


def na_marks(figure: Figure) -> set[tuple[str, str, str]]:
    """(series, category, reason) of every undefined value the figure's footnote names, whichever way a line
    groups them ("n/a: DRF for blind, garbled (why)": category then series; "n/a: easy in DS, DQR (why)": series
    then categories)."""
    marks = set()
    for line in figure.get_supxlabel().splitlines():
        match = NOTE.match(line)
        assert match, f"unparsable footnote line {line!r}"
        for member in match["members"].split(", "):
            pair = (member, match["head"]) if match["joint"] == "for" else (match["head"], member)
            marks.add((*pair, match["reason"] or ""))
    return marks


def groups_with_items(metrics: dict[str, Any]) -> list[str]:
    """The difficulty groups (in plot order) that hold at least one scored item."""
    return [group for group in GROUPS if metrics["by_difficulty"][group]["n_items"]]


def by_group(metrics: dict[str, Any], value: str) -> list[str]:
    """One label per difficulty group: `value` where the group has items, "n/a" where it has none."""
    present = groups_with_items(metrics)
    return [value if group in present else "n/a" for group in GROUPS]


def assert_reads_alone(figure: Figure, title: str) -> None:
    """Titled, both axes labelled, and any legend outside every panel (never on the data)."""
    figure.canvas.draw()
    assert figure.get_suptitle() == title
    for axes in figure.axes:
        assert axes.get_xlabel() and axes.get_ylabel()
        assert axes.get_legend() is None
    renderer = figure.canvas.get_renderer()
    for legend in figure.legends:
        box = legend.get_window_extent(renderer)
        assert not any(box.overlaps(axes.get_window_extent(renderer)) for axes in figure.axes)


def test_blind_model_zeros_are_labelled_and_undefined_metrics_marked(scores: dict[str, Path], tmp_path: Path) -> None:
    metrics = metrics_of(scores["blind"])
    figures = write_score_report(metrics, tmp_path)
    by_difficulty = figures["metrics_by_difficulty.png"]
    assert_reads_alone(by_difficulty, "blind: metrics by difficulty (95% CI)")
    # 4 difficulty groups x the rate metrics: every value 0.00, except DRF (no claims): n/a; a group without items
    # is n/a throughout.
    present = groups_with_items(metrics)
    assert present, "the build has no pair with differences"
    expected = [("n/a" if key == "DRF" or group not in present else "0.00") for group in GROUPS for key in RATE_PANEL]
    assert bar_texts(by_difficulty) == expected
    assert bar_texts(by_difficulty, 1) == ["n/a"] * 4  # consistency ratio: neither probe claims anything
    marks = na_marks(by_difficulty)
    drawn = [plots.short_name(get_family("spd-faith").metric(key)) for key in PLOT_METRICS]
    assert marks == {(group, "DRF", "no described differences") for group in present} | \
        {(group, "consistency ratio", "neither same? nor different? names a difference") for group in present} | \
        {(group, name, "no items") for group in GROUPS if group not in present for name in drawn}
    # Rates on [0, 1], the signed consistency ratio on [-1, 1]: no negative tick for a rate.
    assert [t for t in by_difficulty.axes[0].get_yticks()][::5] == [0.0, 1.0]
    assert (by_difficulty.axes[1].get_yticks()[0], by_difficulty.axes[1].get_yticks()[-1]) == (-1.0, 1.0)

    drf = figures["drf_errors.png"]
    assert_reads_alone(drf, "blind: DRF error classes of the describe claims")
    assert bar_texts(drf) == ["0"] * 5
    assert all(float(t).is_integer() and t >= 0 for t in drf.axes[0].get_yticks())

    trend = figures["yes_ratio_same.png"]
    # says yes to "same?" always, never contradicts
    assert bar_texts(trend) == by_group(metrics, "1.00") + by_group(metrics, "0.00")
    # The files on disk are these figures.
    for name, figure in figures.items():
        assert (tmp_path / name).read_bytes() == plots.save_png(figure, tmp_path / "again.png").read_bytes()


def test_garbled_model_draws_n_a_with_the_reason_not_zero_bars(scores: dict[str, Path], tmp_path: Path) -> None:
    metrics = metrics_of(scores["garbled"])
    assert metrics["overall"]["yes_ratio_same"] is None and metrics["control"]["false_alarm_rate"] is None
    trend = score_figures(metrics)["yes_ratio_same.png"]
    assert bar_texts(trend) == ["n/a"] * 8
    assert not trend.axes[0].patches  # no bar at all: an undefined value is not a zero bar
    present = groups_with_items(metrics)
    reasons = {"yes-ratio (same?)": "no parsed same? answers",
               "contradiction rate (lower is better)": "no item with both same? and different? parsed"}
    assert na_marks(trend) == {(series, group, reason if group in present else "no items")
                               for series, reason in reasons.items() for group in GROUPS}

    write_score_report(metrics, tmp_path)
    report = (tmp_path / "report.md").read_text()
    scored, control = metrics["counts"]["n_scored"], metrics["counts"]["n_control"]
    assert f"| yes_ratio_same | n/a (no parsed same? answers: {scored} of {scored} items left out) |" in report
    assert f"false alarm rate n/a (no parsed answers: {control} of {control} items left out)" in report
    assert report.index("## Metrics shown") < report.index("## Overall")
    assert ("| `contradiction_rate` | contradiction rate | share of pairs whose same? and different? answers "
            "agree in polarity | lower | [0, 1] | [1] |") in report


def test_comparison_plots_label_every_model_and_mark_undefined_values(scores: dict[str, Path], tmp_path: Path) -> None:
    dirs = [scores["oracle"], scores["blind"], scores["garbled"]]
    compare_scores(dirs, tmp_path / "cmp", n_bootstrap=50)
    metrics = [metrics_of(d) for d in dirs]
    figures = comparison_figures(["oracle", "blind", "garbled"], metrics)
    overall = figures["compare_overall.png"]
    assert_reads_alone(overall, "Overall metrics by model (95% CI)")
    texts = bar_texts(overall)
    n = len(RATE_PANEL)
    assert texts[:n] == ["0.00" if key == "contradiction_rate" else "1.00" for key in RATE_PANEL]
    assert texts[n:2 * n] == ["n/a" if key == "DRF" else "0.00" for key in RATE_PANEL]
    assert texts[2 * n:] == ["n/a" if key in ("DRF", "contradiction_rate") else "0.00" for key in RATE_PANEL]
    assert bar_texts(overall, 1) == ["1.00", "n/a", "n/a"]
    assert [t.get_text() for t in overall.legends[0].get_texts()] == ["oracle", "blind", "garbled"]
    assert "n/a: DRF for blind, garbled (no described differences)" in overall.get_supxlabel()
    by_difficulty = figures["compare_by_difficulty.png"]
    assert bar_texts(by_difficulty) == by_group(metrics[0], "1.00") + by_group(metrics[1], "0.00") + \
        by_group(metrics[2], "0.00")
    assert {(model, group, "no items") for model in ("oracle", "blind", "garbled")
            for group in GROUPS if group not in groups_with_items(metrics[0])} == na_marks(by_difficulty)
    assert by_difficulty.axes[0].get_ylabel() == "DQR (0 to 1)"
    report = (tmp_path / "cmp" / "report.md").read_text()
    assert report.startswith("# SPD-Faith comparison") and "## Metrics shown" in report
    scored = metrics[1]["counts"]["n_scored"]
    assert f"| DRF | 1.000 [1.000, 1.000] | n/a (no described differences: {scored} of {scored} items left out) |" in report


def test_value_axis_follows_the_declared_kind_and_range() -> None:
    family = get_family("spd-faith")
    assert plots.ValueAxis.for_metrics([family.metric("DQR")]) == plots.ValueAxis("rate (0 to 1)", 0.0, 1.0)
    signed = plots.ValueAxis.for_metrics([family.metric("consistency_ratio")])
    assert (signed.low, signed.high, signed.integer) == (-1.0, 1.0, False)
    with pytest.raises(ValueError, match="one kind"):
        plots.ValueAxis.for_metrics([family.metric("DQR"), family.metric("consistency_ratio")])
    assert [[m.key for m in members] for _, members in plots.panels_for(
        [family.metric(k) for k in PLOT_METRICS])] == [RATE_PANEL, ["consistency_ratio"]]
