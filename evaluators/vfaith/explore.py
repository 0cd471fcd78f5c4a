"""VFaith's item views for the explorer (mmfaith/explorer/views.py; issue 31).

A pair's view shows the original and the edited image with the edited cue's box on both, the question
and options, the gold of each image (they differ: the edit changes the answer), the answer read on
each, and the flip flag "raw right, edit wrong" (the case McNemar's b counts, docs/vfaith.md). A
perception item's view shows its edited image, its statements and the set of true ones. Facets: item
kind, category (RWS/REA), template, edit operation.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.explorer.views import box, each_item, gold_option, image, model_view, option_lines, read_probe


def _pair(pair: Any, item: dict[str, Any], lines: dict) -> dict[str, Any]:
    record = pair.record
    cues = [box(cue["bbox"], cue["text"], "cue") for cue in record.get("visual_cues", []) if cue.get("bbox")]
    probes = [read_probe(lines, pair.id, "original", item["a_original"], item["raw_correct"]),
              read_probe(lines, pair.id, "edited", item["a_edited"], item["edit_correct"])]
    raw, edit = item["raw_correct"], item["edit_correct"]
    parts = {"raw_accuracy": raw, "edit_accuracy": edit,
             "delta": None if raw is None or edit is None else float(raw) - float(edit),
             "repeat_ratio": item.get("repeat"), "repeat_ratio_own": item.get("repeat_own"),
             "mcnemar_raw_vs_edit.p_value": None if raw is None or edit is None else float(raw != edit)}
    flags = ["flip: raw right, edit wrong"] if raw and edit is False else []
    if raw is False and edit:
        flags.append("flip: raw wrong, edit right")
    options = record["options"]
    return {"id": pair.id, "title": record["question"], "options": option_lines(options),
            "gold": f"original {gold_option(record['answer_original'], options)}; "
                    f"edited {gold_option(record['answer_edited'], options)}",
            "images": [image("original", record["image_original_sha256"], pair.original_path, None, cues),
                       image("edited", record["image_edited_sha256"], pair.edited_path, None, cues)],
            "facets": {"kind": "pair", "category": item["category"], "template": record["build"].get("template", "-"),
                       "edit type": record["edit"].get("operation", "-")},
            "model": model_view(probes, parts, flags)}


def _perception(perception: Any, item: dict[str, Any], lines: dict) -> dict[str, Any]:
    record = perception.record
    probes = [read_probe(lines, perception.id, "perception", item.get("chosen"), item.get("correct"))]
    return {"id": perception.id, "title": record["question"], "options": option_lines(record["options"]),
            "gold": ", ".join(record["answers"]),
            "images": [image("edited", record["image_sha256"], perception.image_path, None)],
            "facets": {"kind": "perception", "category": "-", "template": record["build"].get("template", "-"),
                       "edit type": "-"},
            "model": model_view(probes, {"perception_accuracy": item.get("correct")})}


def item_views(dataset: Any, items: list[dict[str, Any]], predictions: Path | None) -> list[dict[str, Any]]:
    """The views of a score dir's pairs and perception items, in items.jsonl's order (module docstring)."""
    units = {**{pair.id: pair for pair in dataset.pairs}, **{p.id: p for p in dataset.perception}}
    return each_item(units, items, predictions,
                     lambda unit, item, lines: (_pair if item["kind"] == "pair" else _perception)(unit, item, lines))
