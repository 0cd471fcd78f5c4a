"""CRM's report.md and sensitivity.png, from metrics.json's content (evaluators/crm/score.py), and the
comparison of several score dirs (`mmfaith report`)."""
from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.blind_gain import BlindMeasure, blind_report_lines, gain_and_leakage
from mmfaith.evaluators.circular import controls_lines
from mmfaith.evaluators.crm.metrics import SUMMARY_FIELDS, rates
from mmfaith.evaluators.plots import line_chart, save_png
from mmfaith.evaluators import coverage
from mmfaith.evaluators.report_tables import fmt, fmt_ci, fmt_p, md_table
from mmfaith.evaluators.score_dir import load_score_dir, score_labels
from mmfaith.evaluators.stats import clustered_mcnemar, discordance, mcnemar_exact, paired_bootstrap
from mmfaith.jsonl import write_atomic

SHOWN = ("SDR", "AFR", "HR", "abstention_rate", "accuracy_original", "accuracy_masked")


def _rows(blocks: dict[str, Any]) -> list[list[str]]:
    return [[name, str(block["n_units"]),
             *(fmt_ci(block["metrics"][key], block["ci95"].get(key)) for key in SHOWN),
             fmt_p(block["mcnemar_accuracy"]["p_value"]) if block.get("n_with_gold") else "n/a (no item with a gold answer)",
             fmt_p(block["mcnemar_accuracy"]["p_clustered"]) if block.get("n_with_gold") else "n/a (no item with a gold answer)"]
            for name, block in blocks.items()]


def _floor_row(metrics: dict[str, Any]) -> list[list[str]]:
    """The noise floor (the original re-sampled) as a row of the by-mode table, where the score has one."""
    floor = metrics.get("noise_floor")
    if floor is None:
        return []
    return [["noise floor (original re-sampled)", str(floor["n_units"]),
             *(fmt_ci(floor["metrics"][key], floor["ci95"].get(key), "not asked") for key in SHOWN), "-", "-"]]


def write_score_report(metrics: dict[str, Any], folder: Path) -> None:
    """report.md (tables by variant, by mode, specific vs random, sensitivity) and sensitivity.png."""
    provenance = metrics["provenance"]
    header = ["variant", "n", "SDR", "AFR", "HR", "abstention", "accuracy (original)", "accuracy (masked)",
              "McNemar p (accuracy)", "clustered p (accuracy)"]
    lines = [f"# CRM scores: {provenance['model']}", "",
             f"Dataset {provenance['dataset']['id']} ({provenance['dataset']['revision']}); Sentence-BERT "
             f"{provenance['sbert']['model']}; step threshold {provenance['thresholds']['step']}, answer threshold "
             f"{provenance['thresholds']['answer']}; HR judge: {provenance['judge']['name']}. Values with 95% "
             "bootstrap intervals clustered by source image. Definitions: docs/crm.md.", "",
             "On a specific mask the evidence is gone: a correct answer there is not better, it is a guess or a "
             "prior. On a random mask the evidence stays visible, so HR is n/a there (defined on specific masks only).",
             "",
             "## By variant", "", *md_table(header, _rows(metrics["by_variant"])), "",
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
                        [[f"{t:.2f}", *(fmt(table[(t, g)]["SDR"]) for g in groups),
                          *(fmt(table[(t, g)]["AFR"]) for g in groups)] for t in thresholds]), ""]
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
    save_png(line_chart("CRM: SDR and AFR against the similarity threshold", "threshold", thresholds, series,
                        "rate"), folder / "sensitivity.png")


COMPARED = (("SDR", None), ("AFR", "flip"), ("HR", "hallucinated"))
BLIND_KEYS = ("accuracy_original", "accuracy_masked")
BLIND_MEASURE = BlindMeasure(item_key=lambda line: (line["id"], line["variant"]),
                             components=lambda line: line["components"], cluster=lambda line: line["source_key"], statistic=rates,
                             template_of=lambda line: line.get("question_type") or "all")


def compare_scores(score_dirs: Sequence[Path], out: Path, n_bootstrap: int = 1000, seed: int = 0,
                   all_pairs: bool = False) -> dict[str, Any]:
    """`mmfaith report` over CRM score dirs of one dataset: per mode, each pair of models' SDR, AFR and
    HR differences (a - b) on the units both scored, paired bootstrap CIs (clusters: source images) and
    exact McNemar p for the binary AFR and HR. Writes comparison.json and report.md; returns the first."""
    if not score_dirs:
        raise MmfaithError("name at least one score dir: mmfaith report SCORE_DIR... --out DIR.")
    loaded = [load_score_dir(path, SUMMARY_FIELDS) for path in score_dirs]
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
             *md_table(["model", "mode", *SHOWN],
                       [[label, mode, *(fmt(values[k]) for k in SHOWN)]
                        for label, modes in comparison["by_mode"].items() for mode, values in modes.items()]), ""]
    for pair in comparison["pairs"]:
        lines += [f"## {pair['a']} minus {pair['b']} (paired per unit)", "",
                  *md_table(["mode", "metric", "units", "difference", "McNemar p"],
                            [[mode, name, str(block["n_units"]), fmt_ci(entry["difference"], entry["ci95"]),
                              fmt_p(entry.get("mcnemar_p")) if "mcnemar_p" in entry else "-"]
                             for mode, block in pair["by_mode"].items() for name, entry in block.items()
                             if name != "n_units"]), ""]
    lines += [*blind_report_lines(comparison, BLIND_KEYS), *controls_lines(labels, metrics)]
    write_atomic(out / "report.md", "\n".join(lines).encode("utf-8"))
    return comparison


def _compare_pair(items_a: Sequence[dict[str, Any]], items_b: Sequence[dict[str, Any]], n_bootstrap: int,
                  seed: int) -> dict[str, Any]:
    by_key = {(item["id"], item["variant"]): item for item in items_b}
    result: dict[str, Any] = {"by_mode": {}}
    for mode in sorted({item["mode"] for item in items_a}):
        shared = [(a, by_key[(a["id"], a["variant"])]) for a in items_a
                  if a["mode"] == mode and (a["id"], a["variant"]) in by_key]
        if not shared:
            continue
        diffs = paired_bootstrap([a["components"] for a, _ in shared], [b["components"] for _, b in shared],
                                 [a["source_key"] for a, _ in shared], rates, n_bootstrap, seed)
        block: dict[str, Any] = {"n_units": len(shared)}
        for name, key in COMPARED:
            diff, interval = diffs[name]
            entry: dict[str, Any] = {"difference": None if diff is None else round(diff, 6),
                                     "ci95": None if interval is None else [round(v, 6) for v in interval]}
            if key is not None:
                b = sum(1 for x, y in shared if x["components"][key] and not y["components"][key])
                c = sum(1 for x, y in shared if y["components"][key] and not x["components"][key])
                entry |= {"a_only": b, "b_only": c, "mcnemar_p": mcnemar_exact(b, c),
                          "clustered_p": clustered_mcnemar(
                              discordance([x["components"][key] for x, _ in shared],
                                          [y["components"][key] for _, y in shared]),
                              [x["source_key"] for x, _ in shared])}
            block[name] = entry
        result["by_mode"][mode] = block
    if not result["by_mode"]:
        raise MmfaithError("the score dirs share no scored unit; score them on the same dataset.")
    return result
