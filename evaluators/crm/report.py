"""CRM's report.md and sensitivity.png, from metrics.json's content (evaluators/crm/score.py)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.evaluators.plots import line_chart, save_png
from mmfaith.evaluators.report_tables import fmt, fmt_ci, md_table
from mmfaith.jsonl import write_atomic

SHOWN = ("SDR", "AFR", "HR", "abstention_rate", "accuracy_original", "accuracy_masked")


def _rows(blocks: dict[str, Any]) -> list[list[str]]:
    return [[name, str(block["n_units"]),
             *(fmt_ci(block["metrics"][key], block["ci95"].get(key)) for key in SHOWN),
             fmt(block["mcnemar_accuracy"]["p_value"]) if block["n_with_gold"] else "n/a"]
            for name, block in blocks.items()]


def write_score_report(metrics: dict[str, Any], folder: Path) -> None:
    """report.md (tables by variant, by mode, specific vs random, sensitivity) and sensitivity.png."""
    provenance = metrics["provenance"]
    header = ["variant", "n", "SDR", "AFR", "HR", "abstention", "accuracy (original)", "accuracy (masked)",
              "McNemar p (accuracy)"]
    lines = [f"# CRM scores: {provenance['model']}", "",
             f"Dataset {provenance['dataset']['id']} ({provenance['dataset']['revision']}); Sentence-BERT "
             f"{provenance['sbert']['model']}; step threshold {provenance['thresholds']['step']}, answer threshold "
             f"{provenance['thresholds']['answer']}; HR judge: {provenance['judge']['name']}. Values with 95% "
             "bootstrap intervals clustered by source image. Definitions: docs/crm.md.", "",
             "On a specific mask the evidence is gone: a correct answer there is not better, it is a guess or a "
             "prior. On a random mask the evidence stays visible, so HR there is the rule's false-alarm level.", "",
             "## By variant", "", *md_table(header, _rows(metrics["by_variant"])), "",
             "## By mode (pooled over styles)", "", *md_table(["mode", *header[1:]], _rows(metrics["by_mode"])), ""]
    if metrics["specific_vs_random"]:
        rows = []
        for style, block in metrics["specific_vs_random"].items():
            for name in ("AFR", "SDR", "HR"):
                entry = block[name]
                rows.append([style, name, str(block["n_pairs"]), fmt_ci(entry["difference"], entry["ci95"]),
                             fmt(entry.get("mcnemar_p")) if "mcnemar_p" in entry else "-"])
        lines += ["## Specific minus random, paired per question", "",
                  "HR's difference is the excess of specific masks over the rule's false-alarm level.", "",
                  *md_table(["style", "metric", "pairs", "difference", "McNemar p"], rows), ""]
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
    counts = metrics["counts"]
    lines += [f"{counts['n_units']} units scored of {counts['n_items']} items; {counts['n_missing']} units lacked an "
              f"answer; {counts['n_errors']} failed calls.", ""]
    write_atomic(folder / "report.md", "\n".join(lines).encode("utf-8"))
    series = {f"SDR {m}": [table[(t, m)]["SDR"] for t in thresholds] for m in modes}
    series |= {f"AFR {m}": [table[(t, m)]["AFR"] for t in thresholds] for m in modes}
    save_png(line_chart("CRM: SDR and AFR against the similarity threshold", "threshold", thresholds, series,
                        "rate"), folder / "sensitivity.png")
