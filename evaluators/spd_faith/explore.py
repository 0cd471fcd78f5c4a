"""SPD-Faith's item views for the explorer (mmfaith/explorer/views.py; issue 31).

One view per pair: the original and the edited image with each gold difference's box (before on
the original, after on the edited; its label names the type and category), the four probes with
the answers the scorer read (same? and different? are right when they match whether the pair
differs; count? when it equals the number of differences; describe is judged by DRF, no verdict),
the item's part in each metric (docs/spd_faith_metrics.md) and a "contradiction" flag where same?
and different? agree in polarity.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.explorer.views import box, each_item, image, model_view, read_probe

PROBES = ("same", "different", "count", "describe")
PARTS = {"DS": "DS", "DQR": "DQR", "existence_rate": "existence", "DRF": "DRF", "consistency_ratio": "consistency",
         "contradiction_rate": "contradiction", "yes_ratio_same": "yes_same", "control.false_alarm_rate": "false_alarm"}


def _correct(name: str, value: Any, n: int) -> bool | None:
    if value is None or name == "describe":
        return None
    return {"same": value == (n == 0), "different": value == (n > 0), "count": value == n}[name]


def _answer(item: dict[str, Any], name: str) -> Any:
    """What the scorer read of a probe; describe's is its claims ("color: suitcase"), None when unread."""
    read = item["answers"][name]
    if name != "describe":
        return read["value"]
    if read["status"] not in ("ok", "truncated"):
        return None
    return ", ".join(f"{claim['type']}: {claim['category']}" for claim in item["claims"]["describe"]) or "(none)"


def _types(differences: list[dict[str, Any]]) -> str:
    kinds = sorted({d["type"] for d in differences})
    return "none" if not kinds else kinds[0] if len(kinds) == 1 else "mixed"


def _view(pair: Any, item: dict[str, Any], lines: dict) -> dict[str, Any]:
    record, n = pair.record, item["num_differences"]
    differences = record["differences"]
    before = [box(d["bbox_before"], f"{i + 1} {d['type']}: {d['category']}", "gold")
              for i, d in enumerate(differences) if d.get("bbox_before")]
    after = [box(d["bbox_after"], f"{i + 1} {d['type']}: {d['category']}", "gold")
             for i, d in enumerate(differences) if d.get("bbox_after") and d["type"] != "remove"]
    probes = [read_probe(lines, pair.id, name, _answer(item, name), _correct(name, item["answers"][name]["value"], n))
              for name in PROBES]
    parts = {key: item["scores"].get(field) for key, field in PARTS.items()}
    described = sum(item["type_counts"]["claims"].values())
    parts.update({"TF1": None if n == 0 else float(sum(item["type_counts"]["tp"].values())),
                  "CF1": None if n == 0 else float(item["category_tp"]),
                  "DRF_coverage": None if n == 0 else float(described > 0)})
    return {
        "id": pair.id,
        "title": "Are the two pictures the same? How many differences, and which?",
        "options": [], "gold": "; ".join(d.get("description") or f"{d['type']}: {d['category']}"
                                         for d in differences) or "no difference (control pair)",
        "images": [image("original", record["image_a_sha256"], pair.image_a_path, None, before),
                   image("edited", record["image_b_sha256"], pair.image_b_path, None, after)],
        "facets": {"subset": item["subset"], "tier": item.get("difficulty") or "-", "edit type": _types(differences),
                   "differences": str(n)},
        "model": model_view(probes, parts, ["contradiction"] if item["scores"].get("contradiction") else []),
    }


def item_views(dataset: Any, items: list[dict[str, Any]], predictions: Path | None) -> list[dict[str, Any]]:
    """The views of a score dir's pairs, in items.jsonl's order (module docstring)."""
    return each_item({pair.id: pair for pair in dataset.pairs}, items, predictions, _view)
