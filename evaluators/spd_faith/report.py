"""Human-readable SPD-Faith results: one model's report.md and plots, and `mmfaith report` comparisons.

Both report.md files open with a key to the metrics shown (name, meaning, better direction, range,
where the definition is), read from the family's declarations (mmfaith.families), and write an
undefined value as "n/a (why)", the reason taken from the counts in metrics.json.

One score dir (`write_score_report`): report.md (dataset, model, prompt hash, judge, counts, every
overall metric with its 95% interval, per-difficulty and control tables, TF1 by type, DRF error
classes) and three plots as in the paper's figures: metrics_by_difficulty.png, drf_errors.png and
yes_ratio_same.png (yes-ratio of "same?" and contradiction rate by difficulty, appendix C.1).

Several score dirs (`compare_scores`, `mmfaith report`): the models side by side (overall and
per-difficulty tables with intervals, bar plots with error bars), and for each pair (every model
against the first, or all pairs) the paired bootstrap interval of each metric's difference on the
items both scored (stats.paired_bootstrap, clustered by source image) and exact McNemar p-values
for the binary per-item metrics DQR and existence. Written: report.md, comparison.json,
compare_overall.png, compare_by_difficulty.png. The score dirs must share the dataset revision
and the scoring definitions. Their items.jsonl are read line by line, each item kept as its components and the
few numbers compared (`FOLD`, evaluators/scored_items.py), so a comparison's memory is numbers per item.

Plots are drawn by the shared evaluators/plots.py (value labels, "n/a" marks, axes from each metric's
declared kind and range); `score_figures` and `comparison_figures` return them unsaved.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mmfaith.errors import MmfaithError
from mmfaith.evaluators import plots, stats
from mmfaith.evaluators.blind_gain import BlindMeasure, blind_report_lines, gain_and_leakage
from mmfaith.evaluators.score_dir import score_labels
from mmfaith.evaluators.scored_items import ItemFold, ScoredItems, match, number, paired, read_scored
from mmfaith.evaluators.spd_faith.metrics import CI_METRICS, DRF_ERRORS, GROUPS, headline_from_sums, item_components
from mmfaith.evaluators import coverage
from mmfaith.evaluators.report_tables import (fmt, fmt_ci, fmt_p, md_table, metric_block, metric_value, metrics_key,
                                              why_undefined)
from mmfaith.families import MetricInfo
from mmfaith.families import get as get_family
from mmfaith.jsonl import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FAMILY = get_family("spd-faith")

PLOT_METRICS = ("DS", "DQR", "existence_rate", "TF1", "CF1", "DRF", "contradiction_rate", "consistency_ratio")
TREND_METRICS = ("yes_ratio_same", "contradiction_rate")
BINARY_METRICS = {"DQR": "DQR", "existence_rate": "existence"}
SHOWN = (*CI_METRICS, "control.false_alarm_rate")
"""Every metric report.md shows, in the order of its "Metrics shown" table."""
WHY_LEFT_OUT = {metric.key: metric.undefined_when for metric in FAMILY.metrics if metric.undefined_when}
"""Why an item is left out of a metric that is undefined for some items (metrics.LEFT_OUT)."""
DRF_AXIS = plots.ValueAxis("describe claims", 0.0, None, integer=True, decimals=0)


def _info(key: str) -> MetricInfo:
    metric = FAMILY.metric(key)
    if metric is None:
        raise KeyError(f"{key}: not declared by the {FAMILY.name} family")
    return metric


def _cell(metrics: Mapping[str, Any], key: str, block: Mapping[str, Any] | None = None,
          ci: Mapping[str, Any] | None = None) -> str:
    """A table cell: the value with its interval, or "n/a (why)"."""
    value = metric_value(metrics, key, block)
    why = "" if value is not None else why_undefined(key, metric_block(metrics, key, block), WHY_LEFT_OUT)
    interval = (metrics["ci95"] if block is None else block.get("ci95", {})) if ci is None else ci
    return fmt_ci(value, interval.get(key), why)


def _block_rows(blocks: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Table rows (n_items, then every rate with its interval) of blocks side by side (by_difficulty groups)."""
    return [["n_items", *(str(b["n_items"]) for b in blocks)],
            *([m, *(_cell({}, m, b) for b in blocks)] for m in CI_METRICS)]


def _reasons(metrics: Mapping[str, Any], keys: Sequence[str], block: Mapping[str, Any] | None = None) -> dict[str, str]:
    """{key: why it is undefined} for the keys whose value is null in the block (plot footnotes: no counts)."""
    return {key: why_undefined(key, metric_block(metrics, key, block), WHY_LEFT_OUT, counts=False)
            for key in keys if metric_value(metrics, key, block) is None}


def _header(metrics: Mapping[str, Any]) -> list[str]:
    p = metrics["provenance"]
    judge = p["judge"]
    return [f"- dataset: `{p['dataset']['id']}` revision `{p['dataset']['revision']}`",
            f"- prompt templates: `{p['prompt_templates_sha256'][:16]}`",
            f"- judge: `{judge['name']}`" + (f" (prompt `{judge['prompt_sha256'][:16]}`, "
                                             f"{judge['fallbacks']} rule fallbacks)" if judge["prompt_sha256"] else
                                             f" ({judge['rules_version']})"),
            f"- definitions: `{metrics['definitions_version']}`, mmfaith {p['mmfaith_version']}; bootstrap "
            f"{p['bootstrap']['n']} replicates by {p['bootstrap']['unit']}, seed {p['bootstrap']['seed']}"]


def score_figures(metrics: Mapping[str, Any]) -> dict[str, Figure]:
    """The three plots of one score dir, by file name (module docstring), not yet saved."""
    model, groups, overall = metrics["provenance"]["model"], metrics["by_difficulty"], metrics["overall"]
    plotted = [_info(key) for key in PLOT_METRICS]
    trend = [_info(key) for key in TREND_METRICS]
    group_reasons = {g: _reasons(metrics, (*PLOT_METRICS, *TREND_METRICS), groups[g]) for g in GROUPS}
    return {
        "metrics_by_difficulty.png": plots.metric_chart(
            f"{model}: metrics by difficulty (95% CI)", plotted,
            {g: {key: groups[g][key] for key in PLOT_METRICS} for g in GROUPS},
            intervals={g: groups[g]["ci95"] for g in GROUPS}, reasons=group_reasons, legend_title="difficulty"),
        "drf_errors.png": plots.bar_chart(
            f"{model}: DRF error classes of the describe claims", [k.replace("_", " ") for k in DRF_ERRORS],
            {"claims": [overall["DRF_errors"][k] for k in DRF_ERRORS]}, DRF_AXIS, xlabel="error class"),
        "yes_ratio_same.png": plots.bar_chart(
            f"{model}: same? yes-ratio and contradiction rate (95% CI)", list(GROUPS),
            {plots.series_label(m): [groups[g][m.key] for g in GROUPS] for m in trend},
            plots.ValueAxis.for_metrics(trend), xlabel="difficulty",
            intervals={plots.series_label(m): [groups[g]["ci95"].get(m.key) for g in GROUPS] for m in trend},
            reasons={plots.series_label(m): {g: group_reasons[g][m.key] for g in GROUPS if m.key in group_reasons[g]}
                     for m in trend}, legend_title="metric"),
    }


def write_score_report(metrics: Mapping[str, Any], out: Path) -> dict[str, Figure]:
    """report.md and the three plots of one score dir (module docstring); returns the plots drawn, by file name."""
    overall, groups, counts, control = (metrics[k] for k in ("overall", "by_difficulty", "counts", "control"))
    lines = [f"# SPD-Faith scores: {metrics['provenance']['model']}", "", *_header(metrics), "",
             *metrics_key(FAMILY, SHOWN), "",
             f"{counts['n_items']} pairs: {counts['n_scored']} with differences, {counts['n_control']} controls; "
             f"{counts['n_errors']} failed calls.", "",
             *md_table(["probe", "unparsed", "truncated", "missing"],
                       [[p, str(counts["n_unparsed"][p]), str(counts["n_truncated"][p]), str(counts["n_missing"][p])]
                        for p in counts["n_unparsed"]]), "",
             *(coverage.markdown(metrics["answers"]) if "answers" in metrics else []),
             "## Overall (items with at least one difference)", "",
             *md_table(["metric", "value [95% CI]"], [[m, _cell(metrics, m)] for m in CI_METRICS]),
             "", "Beside DS and DQR, over differing and control pairs (docs/spd_faith_metrics.md, Headline): " +
             ", ".join(f"{name} {fmt_ci(value, metrics['headline']['ci95'].get(name), 'no parsed answers of a kind')}"
                       for name, value in metrics["headline"].items() if name != "ci95"),
             "", "Left out (undefined for the item): " +
             ", ".join(f"{k} {v}" for k, v in overall["n_left_out"].items()), "",
             "## By difficulty", "",
             *md_table(["metric", *GROUPS], _block_rows([groups[g] for g in GROUPS])),
             "", "## TF1 by type", "",
             *md_table(["type", "precision", "recall", "F1"],
                       [[t, *(fmt(v[k], "no claims or gold of this type") for k in ("precision", "recall", "f1"))]
                        for t, v in overall["TF1_by_type"].items()]),
             "", "## DRF error classes (claim counts)", "",
             *md_table(list(DRF_ERRORS), [[str(overall["DRF_errors"][k]) for k in DRF_ERRORS]]),
             "", "## Control pairs (no difference)", "",
             f"false alarm rate {_cell(metrics, 'control.false_alarm_rate', ci={})} over {control['n_items']} "
             f"controls ({control['n_left_out']} left out); by probe: " +
             ", ".join(f"{p} {fmt(v)}" for p, v in control["false_alarm_by_probe"].items()), "",
             *([f"Judge agreement ({metrics['judge_agreement']['measure']}): "
                f"{fmt(metrics['judge_agreement']['claims_multiset'])} over "
                f"{metrics['judge_agreement']['n_responses']} responses.", ""] if "judge_agreement" in metrics else []),
             "![metrics by difficulty](metrics_by_difficulty.png)", "", "![DRF error classes](drf_errors.png)", "",
             "![yes-ratio of same? by difficulty](yes_ratio_same.png)", ""]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    figures = score_figures(metrics)
    for name, figure in figures.items():
        plots.save_png(figure, out / name)
    return figures


FOLD = ItemFold(key=lambda item: item["id"], components=item_components, cluster=lambda item: item["cluster"],
                labels={"template": lambda item: item["group"]},
                numbers={"scored": lambda item: float(item["num_differences"] > 0),
                         **{key: lambda item, key=key: number(item["scores"][key]) for key in BINARY_METRICS.values()}})
"""What the comparison keeps of an items.jsonl line: its id, `item_components`, source image, difficulty group,
whether it has a difference (not a control) and its binary scores (DQR, existence; NaN for null)."""


def compare_pair(items_a: ScoredItems, items_b: ScoredItems, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Paired differences (a - b) on the items both scored (`FOLD`ed items), with intervals, and McNemar p-values."""
    pos_a, pos_b = match(items_a, items_b, use_b="scored")
    if not len(pos_a):
        raise MmfaithError("the score dirs share no scored item; score them on the same dataset.")
    diffs = paired(items_a, items_b, pos_a, pos_b, headline_from_sums, n_bootstrap, seed)
    clusters = stats.take(items_a.table, pos_a).cluster_names()
    mcnemar = {}
    for metric, key in BINARY_METRICS.items():
        x, y = items_a.numbers[key][pos_a], items_b.numbers[key][pos_b]
        only_a, only_b = (x == 1) & (y == 0), (x == 0) & (y == 1)
        b, c = int(only_a.sum()), int(only_b.sum())
        clustered = stats.clustered_mcnemar((only_a.astype(np.int64) - only_b).tolist(), clusters)
        mcnemar[metric] = {"a_only": b, "b_only": c, "p_value": round(stats.mcnemar_exact(b, c), 6),
                           "p_clustered": round(clustered, 6)}
    return {"n_shared": len(pos_a),
            "difference": {m: {"value": None if d is None else round(d, 6),
                               "ci95": None if ci is None else [round(ci[0], 6), round(ci[1], 6)]}
                           for m, (d, ci) in diffs.items()},
            "mcnemar": mcnemar}


BLIND_KEYS = ("DS", "DQR", "TF1", "contradiction_rate")
BLIND_MEASURE = BlindMeasure(statistic=headline_from_sums, scored="scored")
"""Multimodal gain and leakage (evaluators/blind_gain.py) per difficulty group of the pairs."""


def compare_scores(score_dirs: Sequence[Path], out: Path, n_bootstrap: int = 1000, seed: int = 0,
                   all_pairs: bool = False) -> dict[str, Any]:
    """Write the comparison of several score dirs (module docstring); return comparison.json's content."""
    if len(score_dirs) < 1:
        raise MmfaithError("name at least one score dir: mmfaith report SCORE_DIR... --out DIR.")
    if n_bootstrap < 0:
        raise MmfaithError(f"--bootstrap must be 0 or more, not {n_bootstrap}.")
    loaded = read_scored(score_dirs, FOLD)
    metrics = [m for m, _ in loaded]
    for path, m in zip(score_dirs[1:], metrics[1:]):
        for what, get in (("dataset revision", lambda x: x["provenance"]["dataset"]["revision"]),
                          ("definitions_version", lambda x: x["definitions_version"])):
            if get(m) != get(metrics[0]):
                raise MmfaithError(f"{path}: {what} {get(m)!r} differs from {get(metrics[0])!r} of {score_dirs[0]}; "
                                   "compare scores of one dataset made by one mmfaith version.")
    labels = score_labels(score_dirs, metrics)
    pairs = list(combinations(range(len(loaded)), 2)) if all_pairs else [(0, k) for k in range(1, len(loaded))]
    comparison = {"models": labels, "dataset": metrics[0]["provenance"]["dataset"],
                  "bootstrap": {"n": n_bootstrap, "seed": seed, "unit": "source image"},
                  "pairs": [{"a": labels[i], "b": labels[j],
                             **compare_pair(loaded[i][1], loaded[j][1], n_bootstrap, seed)} for i, j in pairs],
                  "no_image": [bool(m["provenance"].get("no_image")) for m in metrics],
                  **gain_and_leakage(loaded, labels, BLIND_MEASURE, BLIND_KEYS, n_bootstrap, seed)}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "comparison.json", (json.dumps(comparison, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    _write_comparison_md(out, labels, metrics, comparison)
    for name, figure in comparison_figures(labels, metrics).items():
        plots.save_png(figure, out / name)
    if any("perturb" in m["provenance"] for m in metrics):
        plots.save_png(perturbation_figure(metrics), out / "perturbation.png")
    return comparison


def perturbation_figure(metrics: Sequence[Mapping[str, Any]]) -> Figure:
    """DS and DQR against the masked share of the images (`--perturb blocks:RATIO`; an unperturbed
    score is share 0), one line per metric and model: the SPD-Faith paper's perturbation analysis."""
    points: dict[str, dict[float, float | None]] = {}
    for m in metrics:
        share = (m["provenance"].get("perturb") or {}).get("ratio", 0.0)
        for key in ("DS", "DQR"):
            points.setdefault(f"{key} {m['provenance']['model']}", {})[share] = m["overall"][key]
    shares = sorted({share for line in points.values() for share in line})
    return plots.line_chart("SPD-Faith under masked blocks: DS and DQR", "masked share of each image", shares,
                            {label: [line.get(share) for share in shares] for label, line in points.items()},
                            "rate")


def comparison_figures(labels: Sequence[str], metrics: Sequence[Mapping[str, Any]]) -> dict[str, Figure]:
    """The two comparison plots (compare_overall.png, compare_by_difficulty.png) by file name, not yet saved."""
    plotted = [_info(key) for key in PLOT_METRICS]
    dqr = _info("DQR")
    return {
        "compare_overall.png": plots.metric_chart(
            "Overall metrics by model (95% CI)", plotted,
            {label: {key: m["overall"][key] for key in PLOT_METRICS} for label, m in zip(labels, metrics)},
            intervals={label: m["ci95"] for label, m in zip(labels, metrics)},
            reasons={label: _reasons(m, PLOT_METRICS) for label, m in zip(labels, metrics)}),
        "compare_by_difficulty.png": plots.bar_chart(
            "DQR by difficulty and model (95% CI)", list(GROUPS),
            {label: [m["by_difficulty"][g]["DQR"] for g in GROUPS] for label, m in zip(labels, metrics)},
            plots.ValueAxis.for_metrics([dqr], label=f"{plots.short_name(dqr)} (0 to 1)"), xlabel="difficulty",
            intervals={label: [m["by_difficulty"][g]["ci95"].get("DQR") for g in GROUPS]
                       for label, m in zip(labels, metrics)},
            reasons={label: {g: r["DQR"] for g in GROUPS if "DQR" in (r := _reasons(m, ["DQR"], m["by_difficulty"][g]))}
                     for label, m in zip(labels, metrics)}, legend_title="model"),
    }


def _write_comparison_md(out: Path, labels: Sequence[str], metrics: Sequence[Mapping[str, Any]],
                         comparison: Mapping[str, Any]) -> None:
    lines = ["# SPD-Faith comparison", "", *_header(metrics[0]), "",
             "Models: " + ", ".join(f"`{label}` (judge `{m['provenance']['judge']['name']}`)"
                                    for label, m in zip(labels, metrics)), "",
             *metrics_key(FAMILY, SHOWN), "",
             "## Overall (95% CI)", "",
             *md_table(["metric", *labels], [[k, *(_cell(m, k) for m in metrics)] for k in SHOWN])]
    for group in GROUPS:
        lines += ["", f"## {group}", "",
                  *md_table(["metric", *labels], _block_rows([m["by_difficulty"][group] for m in metrics]))]
    for pair in comparison["pairs"]:
        lines += ["", f"## {pair['a']} minus {pair['b']} ({pair['n_shared']} shared items, paired bootstrap)", "",
                  *md_table(["metric", "difference [95% CI]", "McNemar p (a only / b only)"],
                          [[k, fmt_ci(d["value"], d["ci95"], "undefined for a model"),
                            (f"{fmt_p(pair['mcnemar'][k]['p_value'])} ({pair['mcnemar'][k]['a_only']} / "
                             f"{pair['mcnemar'][k]['b_only']})") if k in pair["mcnemar"] else ""]
                           for k, d in pair["difference"].items()])]
    lines += ["", *blind_report_lines(comparison, BLIND_KEYS)]
    lines += ["", "![overall](compare_overall.png)", "", "![DQR by difficulty](compare_by_difficulty.png)", ""]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
