"""Human-readable VFaith results: one model's report.md, and `mmfaith report` across models.

Both open with the key to the metrics shown (from the family's declarations, evaluators/report_tables.py)
and write an undefined value as "n/a (why)"; p-values in the one format (`fmt_p`); plots drawn by
evaluators/plots.py.

One score dir (`write_score_report`): the headline metrics with their 95% intervals, the table of
the paper's Table 2 for this model (categories x Raw / Edit / delta, then Repeat and Perception),
the McNemar test of raw vs edited correctness and the answer counts; metrics_by_category.png (raw
and edit accuracy and delta per category and overall, 95% CI).

Several score dirs (`compare_scores`): the paper's Table 2 with one row per model (each category's
Raw / Edit / delta, overall Raw / Edit / delta, Repeat, Perception), and for each pair of models
(every pair, or each against the first) the paired bootstrap interval of each headline metric's
difference on the items both scored (stats.paired_bootstrap, clustered by source image). The score dirs'
items.jsonl are read line by line, each item kept as its components, source image and template
(`FOLD`, evaluators/scored_items.py), so a comparison's memory is numbers per item, not its lines.
Written: report.md, comparison.json and compare_overall.png (every headline metric per model, 95% CI).
The score dirs must share the dataset revision and the scoring definitions.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators import coverage, plots
from mmfaith.evaluators.blind_gain import BlindMeasure, blind_report_lines, gain_and_leakage
from mmfaith.evaluators.circular import controls_lines
from mmfaith.evaluators.coverage import STATUSES
from mmfaith.evaluators.report_tables import fmt, fmt_ci, fmt_p, md_table, metrics_key
from mmfaith.evaluators.score_dir import score_labels
from mmfaith.evaluators.scored_items import ItemFold, match, paired, read_scored
from mmfaith.evaluators.vfaith.metrics import CATEGORIES, HEADLINE, headline_from_sums, item_components
from mmfaith.families import get as get_family
from mmfaith.jsonl import write_atomic

FAMILY = get_family("vfaith")
SHOWN = (*HEADLINE, "mcnemar_raw_vs_edit.p_value")
WHY = {"repeat_ratio": "no parsed wrong edited answer", "repeat_ratio_own": "no parsed wrong edited answer with a "
       "parsed original answer", "perception_accuracy": "no perception items"}
BY_CATEGORY = ("raw_accuracy", "edit_accuracy", "delta")
"""What the paper's Table 2 and metrics_by_category.png show per category."""
NO_CATEGORY = "no pair of this category"


def _why(key: str) -> str:
    return WHY.get(key, "no pairs")


def _overall(metrics: Mapping[str, Any], key: str) -> str:
    value = metrics["overall"][key]
    return fmt_ci(value, metrics["ci95"].get(key), "" if value is not None else _why(key))


def _table2_row(metrics: Mapping[str, Any]) -> list[str]:
    cells = []
    for cat in CATEGORIES:
        block = metrics["by_category"].get(cat)
        cells += [fmt(block[m], "no parsed answers") if block else f"n/a ({NO_CATEGORY})" for m in BY_CATEGORY]
    overall = metrics["overall"]
    cells += [fmt(overall[m], _why(m)) for m in (*BY_CATEGORY, "repeat_ratio", "perception_accuracy")]
    return cells


def _infos(keys: Sequence[str]) -> list[Any]:
    return [metric for metric in map(FAMILY.metric, keys) if metric is not None]


def category_figure(metrics: Mapping[str, Any]) -> Any:
    """metrics_by_category.png: raw and edit accuracy and delta per category of the paper, then overall."""
    blocks = {cat: metrics["by_category"].get(cat) for cat in CATEGORIES}
    values = {cat: {key: block[key] if block else None for key in BY_CATEGORY} for cat, block in blocks.items()}
    values["overall"] = {key: metrics["overall"][key] for key in BY_CATEGORY}
    intervals = {cat: block["ci95"] for cat, block in blocks.items() if block} | {"overall": metrics["ci95"]}
    reasons = {cat: {key: NO_CATEGORY if not blocks.get(cat) else "no parsed answers" for key in BY_CATEGORY
                     if values[cat][key] is None} for cat in values}
    return plots.metric_chart(f"{metrics['provenance']['model']}: accuracy by category (95% CI)", _infos(BY_CATEGORY),
                              values, intervals=intervals, reasons=reasons, legend_title="category")


TABLE2_HEADER = [*(f"{cat} {m}" for cat in CATEGORIES for m in ("Raw", "Edit", "Δ")), "Overall Raw", "Overall Edit",
                 "Overall Δ", "Repeat", "Perception"]


def write_score_report(metrics: Mapping[str, Any], out: Path) -> None:
    """report.md of one score dir (module docstring)."""
    provenance, counts, test = metrics["provenance"], metrics["counts"], metrics["mcnemar_raw_vs_edit"]
    lines = [f"# VFaith: {provenance['model']}", "",
             f"dataset {provenance['dataset']['id']} (revision {provenance['dataset']['revision']}); "
             f"{counts['n_pairs']} pairs, {counts['n_perception']} perception items; prompts "
             f"{provenance['prompt_templates_sha256'][:12]}; bootstrap {provenance['bootstrap']['n']} replicates "
             "clustered by source image.", "",
             *metrics_key(FAMILY, SHOWN), "", "## Overall", "",
             *md_table(["metric", "value [95% CI]"], [[key, _overall(metrics, key)] for key in HEADLINE]), "",
             "## By category (the paper's Table 2)", "",
             *md_table(["model", *TABLE2_HEADER], [[provenance["model"], *_table2_row(metrics)]]), "",
             "![accuracy by category](metrics_by_category.png)", "",
             "## Raw vs edited (exact McNemar)", "",
             f"right on the original only: {test['b_raw_right_edit_wrong']}; on the edited only: "
             f"{test['c_raw_wrong_edit_right']}; p = {fmt_p(test['p_value'])} ({test['n_pairs']} pairs); clustered by "
             f"source image (Durkalski): p = {fmt_p(test['p_clustered'])}.", "",
             *coverage.markdown(metrics["answers"]),
             *md_table(["probe", *STATUSES], [[probe, *(str(c[s]) for s in STATUSES)]
                                              for probe, c in counts["answers"].items()]), "",
             *controls_lines([provenance["model"]], [metrics])]
    if provenance.get("no_image"):
        lines.insert(2, "Asked WITHOUT the images (`run --no-image`): pair it with the with-image score in "
                        "`mmfaith report` for the multimodal gain.\n")
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    plots.save_png(category_figure(metrics), out / "metrics_by_category.png")


BLIND_KEYS = ("raw_accuracy", "edit_accuracy", "delta", "repeat_ratio", "perception_accuracy")
FOLD = ItemFold(key=lambda item: item["id"], components=item_components, cluster=lambda item: item["cluster"],
                labels={"template": lambda item: item.get("category") or item["kind"]})
"""What the comparison keeps of an items.jsonl line: its id, its `item_components` and source image, and its
template (the category, or "perception")."""
BLIND_MEASURE = BlindMeasure(statistic=headline_from_sums)


def _metrics(path: Path) -> dict[str, Any]:
    try:
        return json.loads((path / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MmfaithError(f"{path}: no readable metrics.json ({exc}); "
                           "pass score dirs of `mmfaith score vfaith`.") from exc


def compare_scores(score_dirs: Sequence[Path], out: Path, n_bootstrap: int = 1000, seed: int = 0,
                   all_pairs: bool = False) -> dict[str, Any]:
    """`mmfaith report` over VFaith score dirs (module docstring); returns comparison.json's content."""
    loaded = read_scored([Path(path) for path in score_dirs], FOLD, _metrics)
    revisions = {json.dumps(m["provenance"]["dataset"], sort_keys=True) for m, _ in loaded}
    if len(revisions) != 1 or len({m["definitions_version"] for m, _ in loaded}) != 1:
        raise MmfaithError("the score dirs were scored on different datasets or definitions; compare scores of one "
                           "dataset revision.")
    labels = score_labels(score_dirs, [m for m, _ in loaded])
    pairs = [(0, j) for j in range(1, len(loaded))] if not all_pairs else \
        [(i, j) for i in range(len(loaded)) for j in range(i + 1, len(loaded))]
    differences = []
    for i, j in pairs:
        result = paired(loaded[i][1], loaded[j][1], *match(loaded[i][1], loaded[j][1]), headline_from_sums,
                        n_bootstrap, seed)
        differences.append({"a": labels[i], "b": labels[j], "metrics": {
            key: {"difference": None if result[key][0] is None else round(result[key][0], 6),
                  "ci95": None if result[key][1] is None else [round(v, 6) for v in result[key][1]]}
            for key in HEADLINE}})
    blind = gain_and_leakage(loaded, labels, BLIND_MEASURE, BLIND_KEYS, n_bootstrap, seed)
    comparison = {"family": "vfaith", "models": labels, "overall": [m["overall"] for m, _ in loaded],
                  "no_image": [bool(m["provenance"].get("no_image")) for m, _ in loaded],
                  "circular": [m.get("circular") for m, _ in loaded],
                  "position_bias": [m.get("position_bias") for m, _ in loaded],
                  "paired": differences, "bootstrap": {"n": n_bootstrap, "seed": seed}, **blind}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "comparison.json", (json.dumps(comparison, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    lines = ["# VFaith: models compared", "", *metrics_key(FAMILY, SHOWN), "",
             "## The paper's Table 2", "", *md_table(["model", *TABLE2_HEADER],
                                                     [[label, *_table2_row(m)] for label, (m, _) in zip(labels, loaded)]),
             "", "![overall metrics by model](compare_overall.png)",
             "", "## Paired differences (a - b, 95% paired bootstrap CI, clustered by source image)", ""]
    for diff in differences:
        lines += [f"### {diff['a']} - {diff['b']}", "", *md_table(["metric", "difference"], [
            [key, fmt_ci(value["difference"], value["ci95"], "undefined for one of the two")]
            for key, value in diff["metrics"].items()]), ""]
    lines += blind_report_lines(blind, BLIND_KEYS)
    if blind["multimodal_gain"]:
        lines += ["The gain in `delta` is the edit's effect net of the no-image run's (what the question alone "
                  "moves), and the gain in `repeat_ratio` the repeat ratio net of it.", ""]
    lines += controls_lines(labels, [m for m, _ in loaded])
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    plots.save_png(plots.metric_chart(
        "VFaith: overall metrics by model (95% CI)", _infos(HEADLINE),
        {label: {key: m["overall"][key] for key in HEADLINE} for label, (m, _) in zip(labels, loaded)},
        intervals={label: m["ci95"] for label, (m, _) in zip(labels, loaded)},
        reasons={label: {key: _why(key) for key in HEADLINE if m["overall"][key] is None}
                 for label, (m, _) in zip(labels, loaded)}), out / "compare_overall.png")
    return comparison
