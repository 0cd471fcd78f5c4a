"""`mmfaith report` over MCoT score dirs: the models side by side, and paired comparisons.

Written to OUT: comparison.json, report.md (every declared metric per model, ATEs with their
McNemar p-values and CIs; for each pair of models, on the items both scored, the paired bootstrap
interval of the trace-accuracy difference (stats.paired_bootstrap, clustered by image) and the exact
McNemar p-value of their paired trace correctness) and compare.png. The score dirs must share the
dataset revision and the definitions version. A model scored both with and without the images
(`run --no-image`) gets MMStar's `multimodal_gain` of trace accuracy, and a no-image score beside
the `prior` model's its `leakage` (evaluators/blind_gain.py), overall and per category; the report
ends with CircularEval (where a score has it) and answer-position bias (evaluators/circular.py). The score dirs'
items.jsonl are read line by line, each item kept as its trace correctness, image and category (`FOLD`,
evaluators/scored_items.py).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from mmfaith.errors import MmfaithError
from mmfaith.evaluators import plots, stats
from mmfaith.evaluators.blind_gain import BlindMeasure, blind_report_lines, gain_and_leakage
from mmfaith.evaluators.circular import controls_lines
from mmfaith.evaluators.report_tables import fmt, fmt_ci, fmt_p, md_table
from mmfaith.evaluators.scored_items import ItemFold, ScoredItems, one_per_key, paired, read_scored
from mmfaith.families import get as get_family
from mmfaith.jsonl import write_atomic


BLIND_KEYS = ("accuracy_trace",)
BLIND_MEASURE = BlindMeasure(statistic=lambda sums: {"accuracy_trace": sums["right"] / sums["n"]})
"""Multimodal gain and leakage of trace accuracy, paired per item, per category (the question's template)."""
FOLD = ItemFold(key=lambda item: item["id"],
                components=lambda item: {"n": 1.0, "right": float(item["correct"]["trace"])},
                cluster=lambda item: item["source_key"], labels={"template": lambda item: item["category"]},
                numbers={"right": lambda item: float(item["correct"]["trace"])})
"""What the comparison keeps of an items.jsonl line: its id, trace correctness, source image and category."""


def _load(score_dirs: Sequence[Path]) -> list[tuple[dict[str, Any], ScoredItems]]:
    """Each score dir's metrics.json and its items `FOLD`ed, one per id (a repeated id: its last line, in its first
    line's place), the dirs read side by side."""
    return [(metrics, one_per_key(items)) for metrics, items in read_scored(score_dirs, FOLD)]


def compare_pair(a: ScoredItems, b: ScoredItems, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """Trace accuracy of a minus b on the items both scored: the difference, its paired 95% CI, and McNemar."""
    at_a, at_b = ({key: p for p, key in enumerate(items.keys)} for items in (a, b))
    common = sorted(at_a.keys() & at_b.keys())
    pos_a = np.array([at_a[key] for key in common], dtype=np.int64)
    pos_b = np.array([at_b[key] for key in common], dtype=np.int64)
    right_a, right_b = a.numbers["right"][pos_a].tolist(), b.numbers["right"][pos_b].tolist()
    clusters = stats.take(a.table, pos_a).cluster_names()
    diff = paired(a, b, pos_a, pos_b, BLIND_MEASURE.statistic, n_bootstrap, seed)
    value, interval = diff["accuracy_trace"] if common else (None, None)
    only_a = sum(1 for x, y in zip(right_a, right_b) if x and not y)
    only_b = sum(1 for x, y in zip(right_a, right_b) if y and not x)
    return {"items": len(common), "accuracy_trace_diff": value,
            "ci95": None if interval is None else list(interval), "right_only_a": only_a, "right_only_b": only_b,
            "p_mcnemar": stats.mcnemar_exact(only_a, only_b),
            "p_clustered": stats.clustered_mcnemar(stats.discordance(right_a, right_b), clusters)}


def compare_scores(score_dirs: Sequence[Path], out: Path, n_bootstrap: int = 1000, seed: int = 0,
                   all_pairs: bool = False) -> dict[str, Any]:
    """Write the comparison (module docstring); return comparison.json's content."""
    if not score_dirs:
        raise MmfaithError("name at least one score dir: mmfaith report SCORE_DIR... --out DIR.")
    loaded = _load(score_dirs)
    first = loaded[0][0]
    for path, (metrics, _) in zip(score_dirs[1:], loaded[1:]):
        if metrics["provenance"]["dataset"] != first["provenance"]["dataset"]:
            raise MmfaithError(f"{path}: dataset {metrics['provenance']['dataset']} differs from {score_dirs[0]}'s; "
                               "compare scores of one dataset.")
        if metrics["definitions_version"] != first["definitions_version"]:
            raise MmfaithError(f"{path}: definitions_version differs from {score_dirs[0]}'s; rescore with one mmfaith.")
    labels = [f"{m['provenance']['model']} ({path.name})" for path, (m, _) in zip(score_dirs, loaded)]
    if len(set(labels)) < len(labels):
        raise MmfaithError("two score dirs have the same model and folder name; give them distinct folder names.")
    pairs = list(combinations(range(len(loaded)), 2)) if all_pairs else [(0, k) for k in range(1, len(loaded))]
    blind = gain_and_leakage(loaded, labels, BLIND_MEASURE, BLIND_KEYS, n_bootstrap, seed)
    comparison = {"models": labels, "dataset": first["provenance"]["dataset"],
                  "bootstrap": {"n": n_bootstrap, "seed": seed, "unit": "source image"},
                  "no_image": [bool(m["provenance"].get("no_image")) for m, _ in loaded],
                  "pairs": [{"a": labels[i], "b": labels[j], **compare_pair(loaded[i][1], loaded[j][1], n_bootstrap, seed)}
                            for i, j in pairs], **blind}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "comparison.json", (json.dumps(comparison, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    family = get_family("mcot")
    rows = []
    for label, (metrics, _) in zip(labels, loaded):
        overall = metrics["overall"]
        rows.append([label, *(fmt_ci(overall[m.key], overall["ate"]["text" if m.key == "ATE_text" else "visual"]["ci95"])
                              if m.key.startswith("ATE") else fmt(overall[m.key]) for m in family.metrics),
                     *(fmt_p(overall["ate"][k]["p_mcnemar"], "no item on both sides")
                       for k in ("text", "visual"))])
    lines = ["# MCoT comparison", "", f"Dataset {first['provenance']['dataset']['id']} "
             f"(revision {first['provenance']['dataset']['revision']}).", ""]
    lines += md_table(["model", *(m.name for m in family.metrics), "p (ATE_text)", "p (ATE_visual)"], rows) + [""]
    lines += ["## Pairs (trace accuracy, paired by item)", ""]
    lines += md_table(["a", "b", "items", "a - b", "right only a", "right only b", "McNemar p"],
                      [[p["a"], p["b"], str(p["items"]), fmt_ci(p["accuracy_trace_diff"], p["ci95"]),
                        str(p["right_only_a"]), str(p["right_only_b"]), fmt_p(p['p_mcnemar'])]
                       for p in comparison["pairs"]]) + [""]
    lines += blind_report_lines(blind, BLIND_KEYS)
    lines += controls_lines(labels, [metrics for metrics, _ in loaded]) + ["Plot: compare.png.", ""]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    shown = [m for m in family.metrics if m.kind != "count"]
    plots.save_png(plots.metric_chart("MCoT metrics by model", shown,
                                      {label: {m.key: metrics["overall"][m.key] for m in shown}
                                       for label, (metrics, _) in zip(labels, loaded)}), out / "compare.png")
    return comparison
