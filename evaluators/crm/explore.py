"""CRM's item views for the explorer (mmfaith/explorer/views.py; issue 31).

One view per scored unit (a question and one masked variant, as items.jsonl scores it): the original
image with the evidence regions (gold boxes) and the variant with its mask boxes, the question and
options, the answer and reasoning on each image, and the flags "flip: answer changed by the mask"
and "hallucinated" (a specific mask hides the evidence yet the reasoning claims it; docs/crm.md).
The item's part in each metric follows its components: SDR, AFR, HR, abstention and accuracy on the
masked image, each where the unit is in the metric's denominator. An answer on a specific mask has no
verdict: the evidence is hidden, so the question has no gold there (its abstention and flip are what count). Facets: mode, mask style, question type.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.explorer.views import box, each_item, gold_option, image, model_view, option_lines, probe, read_probe


def _in(components: dict[str, float], value: str, denominator: str) -> float | None:
    return components.get(value) if components.get(denominator) else None


def _view(question: Any, item: dict[str, Any], lines: dict) -> dict[str, Any]:
    record, name = question.record, item["variant"]
    variant = question.variant(name)
    c = item["components"]
    regions = [box(region["bbox"], region.get("label", "evidence"), "gold") for region in record.get("regions", [])]
    masks = [box(mask, "mask", "mask") for mask in variant.get("mask_boxes", [])]
    probes = [read_probe(lines, question.id, "original_answer", item["original_final"],
                         bool(c["correct_original"]) if c.get("gold_n") else None),
              read_probe(lines, question.id, f"{name}_answer", item["masked_final"],
                         bool(c["correct_masked"]) if c.get("gold_n") and item["mode"] != "specific" else None)]
    for cot in ("original_cot", f"{name}_cot"):
        text = lines.get((question.id, cot), {}).get("response")
        if text is not None:
            probes.append(probe(cot, None, "answered", None, text))
    parts = {"SDR": _in(c, "sdr", "sdr_n"), "AFR": _in(c, "flip", "flip_n"), "HR": _in(c, "hallucinated", "hr_n"),
             "abstention_rate": c.get("abstained"), "accuracy_masked": _in(c, "correct_masked", "gold_n")}
    flags = (["flip: answer changed by the mask"] if c.get("flip") and c.get("flip_n") else []) + \
            (["hallucinated"] if c.get("hallucinated") and c.get("hr_n") else [])
    return {
        "id": f"{question.id} {name}", "title": record["question"], "options": option_lines(record["options"]),
        "gold": gold_option(record["answer"], record["options"]),
        "images": [image("original", question.original.sha256, question.original.path,
                         (record["width"], record["height"]) if record.get("width") else None, regions),
                   image(name, question.variants[name].sha256, question.variants[name].path, None, masks)],
        "facets": {"mode": item["mode"], "mask style": item["style"], "question type": item["question_type"]},
        "model": model_view(probes, parts, flags)}


def item_views(dataset: Any, items: list[dict[str, Any]], predictions: Path | None) -> list[dict[str, Any]]:
    """The views of a score dir's units, in items.jsonl's order (module docstring)."""
    return each_item(dataset.by_id(), items, predictions, _view)
