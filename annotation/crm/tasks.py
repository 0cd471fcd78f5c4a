"""CRM's side of the annotation round trip: the labeling config, record -> task, annotation -> Vote.

Contract with annotation/crm/labeling.xml (control names): `evidence` (rectangles, one per
evidence region, pre-filled from the record with the region's id as the rectangle's id: people
move or resize them, never add or delete one), `verdict` (accept|reject: the question is
answerable from the image and the boxes cover its evidence), `reasons` (with reject), `notes`.
A rectangle moved by more than MOVE_TOLERANCE_PX on any side becomes an edit of
`regions.<i>.bbox` (pixels, rounded to 0.01); the merge applies it to an accepted record and keeps
the old box in `verification.history`. The next `mmfaith build crm` on the build dir remakes that
item's variants (builders/crm/build.py), and only that item's.
"""
from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from mmfaith.annotation.family import Family
from mmfaith.annotation.regions import rectangle
from mmfaith.annotation.votes import VERDICTS, Misfit, Vote

NAME = "crm"
REASONS = ("not answerable from the image", "wrong answer", "evidence cannot be boxed", "other")
IMAGE_FIELDS = {"image_original": "image_original_sha256"}
MOVE_TOLERANCE_PX = 0.5


def label_config() -> str:
    """The Label Studio labeling config (annotation/crm/labeling.xml, package data)."""
    return files("mmfaith.annotation.crm").joinpath("labeling.xml").read_text(encoding="utf-8")


def task_data(record: dict[str, Any], url: Callable[[str], str], extra_files: dict[str, str]) -> dict[str, Any]:
    """The task's `data`: the original image, the question, options, answer and the regions as text."""
    return {
        "image": url(record["image_original"]),
        "question": record["question"],
        "options": "  ".join(f"({o['label']}) {o['text']}" for o in record["options"]) or "(free-form question)",
        "answer": f"Gold answer: {record['answer'] if record['answer'] is not None else 'none given'}",
        "regions": "\n".join(f"{r['id']}: {r['label']}" for r in record["regions"]),
    }


def rectangles(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's regions as pre-filled editable Label Studio rectangles (percent of the image, ids kept)."""
    size = (record["width"], record["height"])
    return [rectangle(region["id"], "evidence", "image", region["bbox"], size, "evidence") for region in record["regions"]]


def prefilled(build_dir: Path, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The Family's task_predictions: `rectangles` (the record holds the image's size)."""
    return rectangles(record)


def _box(item: dict[str, Any], record: dict[str, Any]) -> list[float]:
    value = item.get("value") or {}
    try:
        x, y, w, h = (float(value[k]) for k in ("x", "y", "width", "height"))
    except (KeyError, TypeError, ValueError):
        raise Misfit(f"evidence {item.get('id')!r}: a rectangle needs x, y, width and height") from None
    if value.get("rotation"):
        raise Misfit(f"evidence {item.get('id')!r}: boxes are not rotated")
    width, height = record["width"], record["height"]
    return [round(x / 100 * width, 2), round(y / 100 * height, 2), round(w / 100 * width, 2), round(h / 100 * height, 2)]


def _choices(item: dict[str, Any], name: str, allowed: tuple[str, ...]) -> list[str]:
    chosen = item.get("value", {}).get("choices")
    if not isinstance(chosen, list) or not chosen or any(c not in allowed for c in chosen):
        raise Misfit(f"{name}: expected choices among {list(allowed)}, found {chosen!r}")
    return chosen


def read_vote(result: list[dict[str, Any]], record: dict[str, Any], annotation_id: int,
              annotator: str, time: str | None) -> Vote:
    """An annotation's result as a Vote (box edits included); Misfit when it does not fit the config."""
    kinds = {"verdict": "choices", "reasons": "choices", "notes": "textarea", "evidence": "rectanglelabels"}
    by_region = {region["id"]: index for index, region in enumerate(record["regions"])}
    seen: dict[str, dict[str, Any]] = {}
    edits: dict[str, Any] = {}
    for item in result:
        name = item.get("from_name") if isinstance(item, dict) else None
        if name not in kinds:
            raise Misfit(f"unknown control {name!r}")
        if item.get("type") != kinds[name]:
            raise Misfit(f"{name}: expected type {kinds[name]}, found {item.get('type')!r}")
        if name == "evidence":
            index = by_region.get(item.get("id"))
            if index is None:
                raise Misfit(f"evidence {item.get('id')!r}: not one of the record's regions "
                             f"({', '.join(by_region)}); boxes are adjusted, never added")
            box = _box(item, record)
            if max(abs(a - b) for a, b in zip(box, record["regions"][index]["bbox"])) > MOVE_TOLERANCE_PX:
                edits[f"regions.{index}.bbox"] = box
            continue
        if name in seen:
            raise Misfit(f"{name}: given twice")
        seen[name] = item
    if "verdict" not in seen:
        raise Misfit("no verdict (accept or reject)")
    verdict = _choices(seen["verdict"], "verdict", VERDICTS)
    if len(verdict) != 1:
        raise Misfit(f"verdict: expected one of {list(VERDICTS)}, found {verdict!r}")
    reasons = tuple(sorted(_choices(seen["reasons"], "reasons", REASONS))) if "reasons" in seen else ()
    if verdict[0] == "reject" and not reasons:
        raise Misfit("reject without a reason")
    if verdict[0] == "accept" and reasons:
        raise Misfit(f"accept with reject reasons {list(reasons)}")
    text = (seen.get("notes") or {}).get("value", {}).get("text") or [""]
    return Vote(annotation_id=annotation_id, annotator=annotator, verdict=verdict[0], reasons=reasons,
                notes=(text[0] or "").strip() or None, edits=edits, time=time)


def family() -> Family:
    """CRM as a Family for the generic push/pull machinery."""
    return Family(name=NAME, schema="crm_item", label_config=label_config, image_fields=IMAGE_FIELDS,
                  task_data=task_data, read_vote=read_vote, task_predictions=prefilled)
