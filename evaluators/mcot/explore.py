"""MCoT's item views for the explorer (mmfaith/explorer/views.py; issue 31).

One view per question: its image with the target boxes (gold) and the model's crop boxes in the
order it zoomed (from the trace in predictions.jsonl), the trace's turns, the answer of the trace
and of each replay (no intervention, text, visual) and the flags "flip: text intervention" and
"flip: visual intervention" where an intervention changed whether the answer is right (what ATE
averages, docs/mcot.md). The item's verdict is the trace's (the replays alter the trace on purpose; their
answers keep their own verdicts). Facets: category, and whether the trace zoomed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.explorer.views import box, each_item, gold_option, image, model_view, option_lines, read_probe, xyxy_box

PROBES = ("trace", "replay_none", "replay_text", "replay_visual")


def _ate(correct: dict[str, Any], probe: str) -> float | None:
    after, before = correct.get(probe), correct.get("replay_none")
    return None if after is None or before is None else float(after) - float(before)


def _view(question: Any, item: dict[str, Any], lines: dict) -> dict[str, Any]:
    record = question.record
    correct = item.get("correct") or {}
    probes = [read_probe(lines, question.id, name, (item.get("answers") or {}).get(name),
                         None if correct.get(name) is None else bool(correct[name])) for name in PROBES]
    trace = ((lines.get((question.id, "trace")) or {}).get("meta") or {}).get("trace") or {}
    crops = [xyxy_box(crop["box"], f"crop {n + 1}", "crop") for n, crop in enumerate(trace.get("crops", []))
             if crop.get("box") and crop.get("image_number", 2) >= 2]
    turns = [{"role": "assistant", "text": turn.get("text") or ""} for turn in trace.get("turns", [])]
    parts = {"accuracy_trace": correct.get("trace"), "accuracy_replay_none": correct.get("replay_none"),
             "ATE_text": _ate(correct, "replay_text"), "ATE_visual": _ate(correct, "replay_visual"),
             "reliability": item.get("reliable"), "sufficiency": item.get("sufficient"),
             "crop_region_size": item.get("crop_region_size"), "tool_call_count": item.get("tool_calls")}
    flags = [f"flip: {kind} intervention" for kind in ("text", "visual") if _ate(correct, f"replay_{kind}")]
    return {
        "id": question.id, "title": record["question"], "options": option_lines(record["options"]),
        "gold": gold_option(record["answer"], record["options"]),
        "images": [image("image", record["image_sha256"], question.image_path, question.size,
                         [box(t["bbox"], t.get("label", "target"), "gold") for t in record.get("targets", [])])],
        "facets": {"category": record.get("category", "-"), "zoomed": "yes" if crops else "no"},
        "model": model_view(probes, parts, flags, [{**crop, "image": 0} for crop in crops], turns, judged=("trace",))}


def item_views(dataset: Any, items: list[dict[str, Any]], predictions: Path | None) -> list[dict[str, Any]]:
    """The views of a score dir's questions, in items.jsonl's order (module docstring)."""
    return each_item({question.id: question for question in dataset.items}, items, predictions, _view)
