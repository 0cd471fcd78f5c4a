"""CRM's report.md and plots, from metrics.json's content (evaluators/crm/score.py), and the comparison of
several score dirs (`mmfaith report`), in the shape every family's reports share: the key to the metrics
shown (from the family's declarations), every value with its 95% interval, every n/a with its reason
(the block's own, e.g. HR on a random mask, else the metric's declared `undefined_when`), p-values in
one format (`fmt_p`), plots drawn by evaluators/plots.py.

One score dir (`write_score_report`): report.md (by variant, by mode with the noise floor, specific
minus random, threshold sensitivity, answer coverage), metrics_by_variant.png (every metric per
variant and for the noise floor, 95% CI) and sensitivity.png (SDR and AFR against the threshold).
Several (`compare_scores`): report.md and comparison.json (per mode, each pair of models' paired
differences with McNemar p), compare_by_mode.png (every metric per model and mode, 95% CI); the score dirs'
items.jsonl read line by line, each unit kept as its components and the few values compared (`FOLD`,
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
from mmfaith.evaluators.blind_gain import BlindMeasure, blind_report_lines, gain_and_leakage
from mmfaith.evaluators.circular import controls_lines
from mmfaith.evaluators.crm.metrics import rates
from mmfaith.evaluators import coverage, plots
from mmfaith.evaluators.report_tables import fmt, fmt_ci, fmt_p, md_table, metrics_key
from mmfaith.evaluators.score_dir import score_labels
from mmfaith.evaluators.scored_items import ItemFold, ScoredItems, match, paired, read_scored
from mmfaith.evaluators.stats import clustered_mcnemar, discordance, mcnemar_exact, take
from mmfaith.families import get as get_family
from mmfaith.jsonl import write_atomic

FAMILY = get_family("crm")
SHOWN = ("SDR", "AFR", "HR", "abstention_rate", "accuracy_original", "accuracy_masked")
PLOTTED = ("SDR", "AFR", "HR", "abstention_rate", "accuracy_masked")
"""The declared metrics the plots draw (accuracy on the original is the same for every variant)."""
NO_GOLD = "no item with a gold answer"
WHY = {**{m.key: m.undefined_when for m in FAMILY.metrics if m.undefined_when},
       "abstention_rate": "no masked final answer", "accuracy_original": NO_GOLD, "accuracy_masked": NO_GOLD}
FLOOR = "noise floor (original re-sampled)"


def why_na(block: dict[str, Any], key: str) -> str:
    """Why `key` is null in a by-variant or by-mode block: the block's own reason, else the metric's."""
    if not block.get("n_units"):
        return "no units"
    return block.get(f"{key}_na") or WHY.get(key, "undefined")


def _cell(block: dict[str, Any], key: str) -> str:
    value = block["metrics"][key]
    return fmt_ci(value, block["ci95"].get(key), "" if value is not None else why_na(block, key))


def _rows(blocks: dict[str, Any]) -> list[list[str]]:
    return [[name, str(block["n_units"]), *(_cell(block, key) for key in SHOWN),
             fmt_p(block["mcnemar_accuracy"]["p_value"]) if block.get("n_with_gold") else f"n/a ({NO_GOLD})",
             fmt_p(block["mcnemar_accuracy"]["p_clustered"]) if block.get("n_with_gold") else f"n/a ({NO_GOLD})"]
            for name, block in blocks.items()]


def _floor_row(metrics: dict[str, Any]) -> list[list[str]]:
    """The noise floor (the original re-sampled) as a row of the by-mode table, where the score has one."""
    floor = metrics.get("noise_floor")
    if floor is None:
        return []
    return [[FLOOR, str(floor["n_units"]), *(_cell(floor, key) for key in SHOWN),
             "n/a (the floor has no masked image)", "n/a (the floor has no masked image)"]]


def _chart(title: str, blocks: dict[str, dict[str, Any]], legend_title: str) -> Any:
    """Every plotted metric per block (a variant, a model and mode), with its 95% interval and n/a reasons."""
    infos = [metric for metric in map(FAMILY.metric, PLOTTED) if metric is not None]
    return plots.metric_chart(
        title, infos, {name: {key: block["metrics"].get(key) for key in PLOTTED} for name, block in blocks.items()},
        intervals={name: block["ci95"] for name, block in blocks.items()},
        reasons={name: {key: why_na(block, key) for key in PLOTTED if block["metrics"].get(key) is None}
                 for name, block in blocks.items()}, legend_title=legend_title)


def write_score_report(metrics: dict[str, Any], folder: Path) -> None:
    """report.md (tables by variant, by mode, specific vs random, sensitivity), metrics_by_variant.png and
    sensitivity.png (module docstring)."""
    provenance = metrics["provenance"]
    header = ["variant", "n", "SDR", "AFR", "HR", "abstention", "accuracy (original)", "accuracy (masked)",
              "McNemar p (accuracy)", "clustered p (accuracy)"]
    lines = [f"# CRM scores: {provenance['model']}", "",
             f"Dataset {provenance['dataset']['id']} ({provenance['dataset']['revision']}); Sentence-BERT "
             f"{provenance['sbert']['model']}; step threshold {provenance['thresholds']['step']}, answer threshold "
             f"{provenance['thresholds']['answer']}; HR judge: {provenance['judge']['name']}. Values with 95% "
             "bootstrap intervals clustered by source image. Definitions: docs/crm.md.", "",
             *metrics_key(FAMILY, SHOWN), "",
             "On a specific mask the evidence is gone: a correct answer there is not better, it is a guess or a "
             "prior. On a random mask the evidence stays visible, so HR is undefined there (defined on specific masks only).",
             "",
             "## By variant", "", *md_table(header, _rows(metrics["by_variant"])), "",
             "![metrics by variant](metrics_by_variant.png)", "",
             "## By mode (pooled over styles)", "",
             "The noise floor is the original asked again with another seed: the SDR and AFR that sampling alone "
             "produces. A masked value is mask-driven only as far as it exceeds the floor.", "",
             *md_table(["mode", *header[1:]], _rows(metrics["by_mode"]) + _floor_row(metrics)), ""]
    if metrics["specific_vs_random"]:
        rows = []
        for style, block in metrics["specific_vs_random"].items():
            for name in ("AFR", "SDR"):
                entry = block[name]
                rows.append([style, name, str(block["n_pairs"]), fmt_ci(entry["difference"], entry["ci95"]),
                             fmt_p(entry.get("mcnemar_p")) if "mcnemar_p" in entry else "-",
                             fmt_p(entry.get("clustered_p")) if "clustered_p" in entry else "-"])
        lines += ["## Specific minus random, paired per question", "",
                  "HR has no difference: it is not defined on random masks. AFR's McNemar test uses the questions "
                  "answered on all four sides.", "",
                  *md_table(["style", "metric", "pairs", "difference", "McNemar p", "clustered p"], rows), ""]
    groups = list(dict.fromkeys(row["group"] for row in metrics["sensitivity"]))
    modes = [row["group"] for row in metrics["sensitivity"] if row["kind"] == "mode"]
    modes = list(dict.fromkeys(modes))
    thresholds = sorted({row["threshold"] for row in metrics["sensitivity"]})
    table = {(row["threshold"], row["group"]): row for row in metrics["sensitivity"]}
    lines += ["## Threshold sensitivity", "", "SDR at each step threshold and AFR at each free-form answer threshold "
              "(multiple-choice flips do not depend on it), per variant and pooled per mode. Plot (per mode): "
              "sensitivity.png.", "",
              *md_table(["threshold", *(f"SDR {g}" for g in groups), *(f"AFR {g}" for g in groups)],
                        [[f"{t:.2f}", *(fmt(table[(t, g)]["SDR"], WHY["SDR"]) for g in groups),
                          *(fmt(table[(t, g)]["AFR"], WHY["AFR"]) for g in groups)] for t in thresholds]), "",
              "![SDR and AFR against the threshold](sensitivity.png)", ""]
    lines += controls_lines([provenance["model"]], [metrics])
    if provenance.get("no_image"):
        lines.insert(2, "Asked WITHOUT the images (`run --no-image`): pair it with the with-image score in "
                        "`mmfaith report` for the multimodal gain.\n")
    counts = metrics["counts"]
    lines += [f"{counts['n_units']} units scored of {counts['n_items']} items; {counts['n_missing']} units lacked an "
              f"answer; {counts['n_errors']} failed calls.", "", *coverage.markdown(metrics["answers"])]
    write_atomic(folder / "report.md", "\n".join(lines).encode("utf-8"))
    series = {f"SDR {m}": [table[(t, m)]["SDR"] for t in thresholds] for m in modes}
    series |= {f"AFR {m}": [table[(t, m)]["AFR"] for t in thresholds] for m in modes}
    plots.save_png(plots.line_chart("CRM: SDR and AFR against the similarity threshold", "threshold", thresholds,
                                    series, "rate"), folder / "sensitivity.png")
    blocks = dict(metrics["by_variant"]) | ({FLOOR: metrics["noise_floor"]} if metrics.get("noise_floor") else {})
    plots.save_png(_chart(f"{provenance['model']}: metrics by variant (95% CI)", blocks, "variant"),
                   folder / "metrics_by_variant.png")


COMPARED = (("SDR", None), ("AFR", "flip"), ("HR", "hallucinated"))
BLIND_KEYS = ("accuracy_original", "accuracy_masked")
BLIND_MEASURE = BlindMeasure(statistic=rates)
FOLD = ItemFold(key=lambda line: f"{len(line['id'])}:{line['id']}{line['variant']}",
                components=lambda line: line["components"], cluster=lambda line: line["source_key"],
                labels={"template": lambda line: line.get("question_type") or "all", "mode": lambda line: line["mode"]},
                numbers={key: lambda line, key=key: line["components"][key] for _, key in COMPARED if key is not None})
"""What the comparison keeps of a unit's items.jsonl line: its question's id and variant (the id's length first, so
two (id, variant) pairs have one key only when equal), its components, source image, question type and mask mode,
and its AFR flip and HR flag."""


def compare_scores(score_dirs: Sequence[Path], out: Path, n_bootstrap: int = 1000, seed: int = 0,
                   all_pairs: bool = False) -> dict[str, Any]:
    """`mmfaith report` over CRM score dirs of one dataset: per mode, each pair of models' SDR, AFR and
    HR differences (a - b) on the units both scored, paired bootstrap CIs (clusters: source images) and
    exact McNemar p for the binary AFR and HR. Writes comparison.json and report.md; returns the first."""
    if not score_dirs:
        raise MmfaithError("name at least one score dir: mmfaith report SCORE_DIR... --out DIR.")
    loaded = read_scored(score_dirs, FOLD)
    metrics = [m for m, _ in loaded]
    for path, m in zip(score_dirs[1:], metrics[1:]):
        if m["provenance"]["dataset"] != metrics[0]["provenance"]["dataset"]:
            raise MmfaithError(f"{path}: scored on another dataset than {score_dirs[0]}; compare scores of one dataset.")
    labels = score_labels(score_dirs, metrics)
    pairs = list(combinations(range(len(loaded)), 2)) if all_pairs else [(0, k) for k in range(1, len(loaded))]
    comparison = {"models": labels, "dataset": metrics[0]["provenance"]["dataset"],
                  "bootstrap": {"n": n_bootstrap, "seed": seed, "unit": "source image"},
                  "by_mode": {label: {mode: {k: block["metrics"][k] for k in SHOWN}
                                      for mode, block in m["by_mode"].items()} for label, m in zip(labels, metrics)},
                  "pairs": [{"a": labels[i], "b": labels[j], **_compare_pair(loaded[i][1], loaded[j][1], n_bootstrap,
                                                                             seed)} for i, j in pairs],
                  "no_image": [bool(m["provenance"].get("no_image")) for m in metrics],
                  "circular": [m.get("circular") for m in metrics],
                  "position_bias": [m.get("position_bias") for m in metrics],
                  **gain_and_leakage(loaded, labels, BLIND_MEASURE, BLIND_KEYS, n_bootstrap, seed)}
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "comparison.json", (json.dumps(comparison, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    lines = ["# CRM comparison", "", f"Dataset {comparison['dataset']['id']} ({comparison['dataset']['revision']}).", "",
             *metrics_key(FAMILY, SHOWN), "",
             "## By mode (95% CI)", "",
             *md_table(["model", "mode", *SHOWN],
                       [[label, mode, *(_cell(block, k) for k in SHOWN)]
                        for label, m in zip(labels, metrics) for mode, block in m["by_mode"].items()]), "",
             "![metrics by model and mode](compare_by_mode.png)", ""]
    for pair in comparison["pairs"]:
        lines += [f"## {pair['a']} minus {pair['b']} (paired per unit, 95% CI)", "",
                  *md_table(["mode", "metric", "units", "difference [95% CI]", "McNemar p (a only / b only)"],
                            [[mode, name, str(block["n_units"]),
                              fmt_ci(entry["difference"], entry["ci95"], WHY.get(name, "undefined") + " for a model"),
                              f"{fmt_p(entry['mcnemar_p'])} ({entry['a_only']} / {entry['b_only']})"
                              if "mcnemar_p" in entry else "n/a (not a yes/no outcome per unit)"]
                             for mode, block in pair["by_mode"].items() for name, entry in block.items()
                             if name != "n_units"]), ""]
    lines += [*blind_report_lines(comparison, BLIND_KEYS), *controls_lines(labels, metrics)]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    blocks = {f"{label} · {mode}": block for label, m in zip(labels, metrics) for mode, block in m["by_mode"].items()}
    plots.save_png(_chart("CRM: metrics by model and mode (95% CI)", blocks, "model · mode"),
                   out / "compare_by_mode.png")
    return comparison


def _compare_pair(items_a: ScoredItems, items_b: ScoredItems, n_bootstrap: int, seed: int) -> dict[str, Any]:
    pos_a, pos_b = match(items_a, items_b)
    modes = items_a.labels["mode"]
    shared_modes = np.array([modes[p] for p in pos_a.tolist()], dtype=object)
    result: dict[str, Any] = {"by_mode": {}}
    for mode in sorted(set(modes)):
        chosen = np.flatnonzero(shared_modes == mode)
        if not chosen.size:
            continue
        at_a, at_b = pos_a[chosen], pos_b[chosen]
        diffs = paired(items_a, items_b, at_a, at_b, rates, n_bootstrap, seed)
        block: dict[str, Any] = {"n_units": int(chosen.size)}
        for name, key in COMPARED:
            diff, interval = diffs[name]
            entry: dict[str, Any] = {"difference": None if diff is None else round(diff, 6),
                                     "ci95": None if interval is None else [round(v, 6) for v in interval]}
            if key is not None:
                x, y = items_a.numbers[key][at_a].tolist(), items_b.numbers[key][at_b].tolist()
                b = sum(1 for first, second in zip(x, y) if first and not second)
                c = sum(1 for first, second in zip(x, y) if second and not first)
                clusters = take(items_a.table, at_a).cluster_names()
                entry |= {"a_only": b, "b_only": c, "mcnemar_p": mcnemar_exact(b, c),
                          "clustered_p": clustered_mcnemar(discordance(x, y), clusters)}
            block[name] = entry
        result["by_mode"][mode] = block
    if not result["by_mode"]:
        raise MmfaithError("the score dirs share no scored unit; score them on the same dataset.")
    return result
