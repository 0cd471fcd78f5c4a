"""Human-readable SPD-Faith results: one model's report.md and plots, and `mmfaith report` comparisons.

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
and the scoring definitions.

Plots use matplotlib's Agg canvas with no Software metadata, so the PNG bytes depend only on the numbers.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators import stats
from mmfaith.evaluators.spd_faith.metrics import (CI_METRICS, DRF_ERRORS, GROUPS, headline_from_sums, item_components)
from mmfaith.jsonl import read_jsonl, write_atomic

PLOT_METRICS = ("DS", "DQR", "existence_rate", "TF1", "CF1", "DRF", "contradiction_rate", "consistency_ratio")
BINARY_METRICS = {"DQR": "DQR", "existence_rate": "existence"}


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _fmt_ci(value: float | None, interval: Sequence[float] | None) -> str:
    return _fmt(value) + ("" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}]")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _block_rows(blocks: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Table rows (n_items, then every rate with its interval) of blocks side by side (by_difficulty groups)."""
    return [["n_items", *(str(b["n_items"]) for b in blocks)],
            *([m, *(_fmt_ci(b[m], b["ci95"].get(m)) for b in blocks)] for m in CI_METRICS)]


def _figure(width: float) -> Any:
    """A matplotlib Figure on the Agg canvas (no pyplot, no global backend state)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MmfaithError("the report's plots need matplotlib: pip install matplotlib "
                           "(metrics.json and items.jsonl are already written).") from exc
    return Figure(figsize=(width, 4.0))


def _bars(path: Path, title: str, categories: Sequence[str], series: Mapping[str, Sequence[float | None]],
          intervals: Mapping[str, Sequence[Sequence[float] | None]], ylabel: str = "") -> None:
    """Grouped bar chart, one bar per series in each category, with interval error bars where known."""
    figure = _figure(max(6.0, 1.1 * len(categories) + 1.0))
    axes = figure.add_subplot()
    width = 0.8 / max(1, len(series))
    for k, (label, values) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(categories))]
        heights = [v if v is not None else 0.0 for v in values]
        bounds = intervals.get(label, [None] * len(values))
        low = [h - b[0] if b else 0.0 for h, b in zip(heights, bounds)]
        high = [b[1] - h if b else 0.0 for h, b in zip(heights, bounds)]
        axes.bar(xs, heights, width, label=label, yerr=[low, high] if any(bounds) else None, capsize=3)
    axes.set_xticks(range(len(categories)), categories, rotation=20, ha="right")
    axes.axhline(0.0, color="black", linewidth=0.6)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    if len(series) > 1:
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None})


def _lines(path: Path, title: str, categories: Sequence[str], series: Mapping[str, Sequence[float | None]],
           intervals: Mapping[str, Sequence[Sequence[float] | None]]) -> None:
    """Line plot over ordered categories with interval error bars (missing points left out)."""
    figure = _figure(6.0)
    axes = figure.add_subplot()
    for label, values in series.items():
        known = [(i, v, b) for i, (v, b) in enumerate(zip(values, intervals[label])) if v is not None]
        axes.errorbar([i for i, _, _ in known], [v for _, v, _ in known], capsize=3, marker="o", label=label,
                      yerr=[[v - b[0] if b else 0.0 for _, v, b in known],
                            [b[1] - v if b else 0.0 for _, v, b in known]])
    axes.set_xticks(range(len(categories)), categories)
    axes.set_ylim(-0.05, 1.05)
    axes.set_title(title)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None})


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


def write_score_report(metrics: Mapping[str, Any], out: Path) -> None:
    """report.md and the three plots of one score dir (module docstring)."""
    overall, groups, counts, control = (metrics[k] for k in ("overall", "by_difficulty", "counts", "control"))
    lines = [f"# SPD-Faith scores: {metrics['provenance']['model']}", "", *_header(metrics), "",
             f"{counts['n_items']} pairs: {counts['n_scored']} with differences, {counts['n_control']} controls; "
             f"{counts['n_errors']} failed calls.", "",
             *_table(["probe", "unparsed", "truncated", "missing"],
                     [[p, str(counts["n_unparsed"][p]), str(counts["n_truncated"][p]), str(counts["n_missing"][p])]
                      for p in counts["n_unparsed"]]),
             "", "## Overall (items with at least one difference)", "",
             *_table(["metric", "value [95% CI]"],
                     [[m, _fmt_ci(overall[m], metrics["ci95"].get(m))] for m in CI_METRICS]),
             "", "Left out (undefined for the item): " +
             ", ".join(f"{k} {v}" for k, v in overall["n_left_out"].items()), "",
             "## By difficulty", "",
             *_table(["metric", *GROUPS], _block_rows([groups[g] for g in GROUPS])),
             "", "## TF1 by type", "",
             *_table(["type", "precision", "recall", "F1"],
                     [[t, *(_fmt(v[k]) for k in ("precision", "recall", "f1"))]
                      for t, v in overall["TF1_by_type"].items()]),
             "", "## DRF error classes (claim counts)", "",
             *_table(list(DRF_ERRORS), [[str(overall["DRF_errors"][k]) for k in DRF_ERRORS]]),
             "", "## Control pairs (no difference)", "",
             f"false alarm rate {_fmt(control['false_alarm_rate'])} over {control['n_items']} controls "
             f"({control['n_left_out']} left out); by probe: " +
             ", ".join(f"{p} {_fmt(v)}" for p, v in control["false_alarm_by_probe"].items()), "",
             *([f"Judge agreement ({metrics['judge_agreement']['measure']}): "
                f"{_fmt(metrics['judge_agreement']['claims_multiset'])} over "
                f"{metrics['judge_agreement']['n_responses']} responses.", ""] if "judge_agreement" in metrics else []),
             "![metrics by difficulty](metrics_by_difficulty.png)", "", "![DRF error classes](drf_errors.png)", "",
             "![yes-ratio of same? by difficulty](yes_ratio_same.png)", ""]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    _bars(out / "metrics_by_difficulty.png", "Metrics by difficulty", PLOT_METRICS,
          {g: [groups[g][m] for m in PLOT_METRICS] for g in GROUPS},
          {g: [groups[g]["ci95"].get(m) for m in PLOT_METRICS] for g in GROUPS})
    _bars(out / "drf_errors.png", "DRF error classes (describe claims)", DRF_ERRORS,
          {"claims": [overall["DRF_errors"][k] for k in DRF_ERRORS]}, {}, ylabel="claims")
    trend = ("yes_ratio_same", "contradiction_rate")
    _lines(out / "yes_ratio_same.png", 'Yes-ratio of "same?" and contradiction rate by difficulty', GROUPS,
           {m: [groups[g][m] for g in GROUPS] for m in trend},
           {m: [groups[g]["ci95"].get(m) for g in GROUPS] for m in trend})


def load_score_dir(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics.json, items.jsonl) of a score dir."""
    metrics_path, items_path = path / "metrics.json", path / "items.jsonl"
    if not metrics_path.is_file() or not items_path.is_file():
        raise MmfaithError(f"{path}: not a score dir (needs metrics.json and items.jsonl); "
                           "make one with `mmfaith score spd-faith --out DIR`.")
    return json.loads(metrics_path.read_text(encoding="utf-8")), [item for _, item in read_jsonl(items_path)]


def _labels(paths: Sequence[Path], metrics: Sequence[Mapping[str, Any]]) -> list[str]:
    models = [m["provenance"]["model"] for m in metrics]
    return [model if models.count(model) == 1 else f"{model} ({path.name})" for model, path in zip(models, paths)]


def compare_pair(items_a: Sequence[Mapping[str, Any]], items_b: Sequence[Mapping[str, Any]], n_bootstrap: int,
                 seed: int) -> dict[str, Any]:
    """Paired differences (a - b) on the items both scored, with intervals, and McNemar p-values."""
    by_id = {item["id"]: item for item in items_b if item["num_differences"] > 0}
    shared = [(item, by_id[item["id"]]) for item in items_a if item["id"] in by_id]
    if not shared:
        raise MmfaithError("the score dirs share no scored item; score them on the same dataset.")
    diffs = stats.paired_bootstrap([item_components(a) for a, _ in shared], [item_components(b) for _, b in shared],
                                   [a["cluster"] for a, _ in shared], headline_from_sums, n_bootstrap, seed)
    mcnemar = {}
    for metric, key in BINARY_METRICS.items():
        b = sum(a["scores"][key] == 1 and o["scores"][key] == 0 for a, o in shared)
        c = sum(a["scores"][key] == 0 and o["scores"][key] == 1 for a, o in shared)
        mcnemar[metric] = {"a_only": b, "b_only": c, "p_value": round(stats.mcnemar_exact(b, c), 6)}
    return {"n_shared": len(shared),
            "difference": {m: {"value": None if d is None else round(d, 6),
                               "ci95": None if ci is None else [round(ci[0], 6), round(ci[1], 6)]}
                           for m, (d, ci) in diffs.items()},
            "mcnemar": mcnemar}


def compare_scores(score_dirs: Sequence[Path], out: Path, n_bootstrap: int = 1000, seed: int = 0,
                   all_pairs: bool = False) -> dict[str, Any]:
    """Write the comparison of several score dirs (module docstring); return comparison.json's content."""
    if len(score_dirs) < 1:
        raise MmfaithError("name at least one score dir: mmfaith report SCORE_DIR... --out DIR.")
    if n_bootstrap < 0:
        raise MmfaithError(f"--bootstrap must be 0 or more, not {n_bootstrap}.")
    loaded = [load_score_dir(path) for path in score_dirs]
    metrics = [m for m, _ in loaded]
    for path, m in zip(score_dirs[1:], metrics[1:]):
        for what, get in (("dataset revision", lambda x: x["provenance"]["dataset"]["revision"]),
                          ("definitions_version", lambda x: x["definitions_version"])):
            if get(m) != get(metrics[0]):
                raise MmfaithError(f"{path}: {what} {get(m)!r} differs from {get(metrics[0])!r} of {score_dirs[0]}; "
                                   "compare scores of one dataset made by one mmfaith version.")
    labels = _labels(score_dirs, metrics)
    pairs = list(combinations(range(len(loaded)), 2)) if all_pairs else [(0, k) for k in range(1, len(loaded))]
    comparison = {"models": labels, "dataset": metrics[0]["provenance"]["dataset"],
                  "bootstrap": {"n": n_bootstrap, "seed": seed, "unit": "source image"},
                  "pairs": [{"a": labels[i], "b": labels[j],
                             **compare_pair(loaded[i][1], loaded[j][1], n_bootstrap, seed)} for i, j in pairs]}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "comparison.json", (json.dumps(comparison, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    _write_comparison_md(out, labels, metrics, comparison)
    _bars(out / "compare_overall.png", "Overall metrics (95% CI)", PLOT_METRICS,
          {label: [m["overall"][k] for k in PLOT_METRICS] for label, m in zip(labels, metrics)},
          {label: [m["ci95"].get(k) for k in PLOT_METRICS] for label, m in zip(labels, metrics)})
    _bars(out / "compare_by_difficulty.png", "DQR by difficulty (95% CI)", GROUPS,
          {label: [m["by_difficulty"][g]["DQR"] for g in GROUPS] for label, m in zip(labels, metrics)},
          {label: [m["by_difficulty"][g]["ci95"].get("DQR") for g in GROUPS] for label, m in zip(labels, metrics)})
    return comparison


def _write_comparison_md(out: Path, labels: Sequence[str], metrics: Sequence[Mapping[str, Any]],
                         comparison: Mapping[str, Any]) -> None:
    lines = ["# SPD-Faith comparison", "", *_header(metrics[0]), "",
             "Models: " + ", ".join(f"`{label}` (judge `{m['provenance']['judge']['name']}`)"
                                    for label, m in zip(labels, metrics)), "",
             "## Overall (95% CI)", "",
             *_table(["metric", *labels], [[k, *(_fmt_ci(m["overall"][k], m["ci95"].get(k)) for m in metrics)]
                                           for k in CI_METRICS])]
    for group in GROUPS:
        lines += ["", f"## {group}", "",
                  *_table(["metric", *labels], _block_rows([m["by_difficulty"][group] for m in metrics]))]
    for pair in comparison["pairs"]:
        lines += ["", f"## {pair['a']} minus {pair['b']} ({pair['n_shared']} shared items, paired bootstrap)", "",
                  *_table(["metric", "difference [95% CI]", "McNemar p (a only / b only)"],
                          [[k, _fmt_ci(d["value"], d["ci95"]),
                            (f"{pair['mcnemar'][k]['p_value']:.4f} ({pair['mcnemar'][k]['a_only']} / "
                             f"{pair['mcnemar'][k]['b_only']})") if k in pair["mcnemar"] else ""]
                           for k, d in pair["difference"].items()])]
    lines += ["", "![overall](compare_overall.png)", "", "![DQR by difficulty](compare_by_difficulty.png)", ""]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
