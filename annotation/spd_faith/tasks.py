"""SPD-Faith's side of the annotation round trip: the labeling config, record -> task, annotation -> Vote.

Contract with annotation/spd_faith/labeling.xml (control names): `verdict` (one of accept|reject),
`reasons` (one or more of REASONS, only with reject), `notes` and `caption` (free text),
`description_<i>` (the corrected standardized description of differences[i]), `outline`
(the view toggle, carries no verdict), and `outline_a` / `outline_b`: the edited regions as
read-only rectangles numbered like the differences, pre-filled at push (`outlines`) and drawn by
Label Studio on the outlined views, so a push renders no image; an annotation carries them back
unchanged and the pull ignores them. Anything else in a result is a Misfit. People never edit
the structured gold (types, categories, colors, boxes): the task shows it as text only.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from mmfaith.annotation.family import Family
from mmfaith.annotation.regions import image_size, rectangle
from mmfaith.annotation.votes import Misfit, Vote, controls_of, verdict_of
from mmfaith.annotation.votes import choices_of as _choices
from mmfaith.annotation.votes import text_of as _texts

NAME = "spd-faith"
REASONS = ("artifact", "invisible change", "unnatural", "other")
IMAGE_FIELDS = {"image_a": "image_a_sha256", "image_b": "image_b_sha256"}
OUTLINE_TOGGLE = "Outline the edited regions"
OUTLINE_CONTROLS = ("outline_a", "outline_b")
_DESCRIPTION = re.compile(r"^description_(\d+)$")


def label_config() -> str:
    """The Label Studio labeling config (annotation/spd_faith/labeling.xml, shipped as package data)."""
    return files("mmfaith.annotation.spd_faith").joinpath("labeling.xml").read_text(encoding="utf-8")


def outlines(build_dir: Path, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Each difference's box as a read-only rectangle labelled with its number, drawn by Label Studio
    on the outlined views of both images: on A the box before, on B the box after (the box before
    when the difference records none). A difference without boxes (an official GitHub-layout import)
    has none. Only the images' headers are read (for their sizes)."""
    sizes = {side: image_size(build_dir / record[f"image_{side}"]) for side in ("a", "b")}
    regions = []
    for side in ("a", "b"):
        for number, diff in enumerate(record["differences"], start=1):
            box = diff["bbox_before"] if side == "a" or diff["bbox_after"] is None else diff["bbox_after"]
            if box is not None:
                regions.append(rectangle(f"{side}{number}", f"outline_{side}", f"outlined_{side}", box, sizes[side],
                                         str(number), readonly=True))
    return regions


def _planned_line(number: int, diff: dict[str, Any]) -> str:
    """One difference's gold as a line of text: number, type, category, colors, boxes."""
    parts = [f"{number}. {diff['type']}: {diff['category']}"]
    if diff["type"] == "color" and diff["color_before"] is None and diff["color_after"] is None:
        parts.append("colors not recorded")  # an official import: the release names no colors
    elif diff["type"] == "color":
        parts.append(f"color {diff['color_before']} -> {diff['color_after']}")
    elif diff["color_before"]:
        parts.append(f"color {diff['color_before']}")
    parts.append(f"box before {diff['bbox_before']}" if diff["bbox_before"] is not None else "box not recorded")
    if diff["bbox_after"] is not None and diff["bbox_after"] != diff["bbox_before"]:
        parts.append(f"box after {diff['bbox_after']}")
    return ", ".join(parts)


def task_data(record: dict[str, Any], url: Callable[[str], str], extra_files: dict[str, str]) -> dict[str, Any]:
    """The task's `data` for one record. `url` maps a path relative to the build dir to the URL
    Label Studio serves it from; no helper files (`extra_files` is empty): the outlined views show
    the same two images, with `outlines` drawn on them by Label Studio."""
    diffs = record["differences"]
    planned = "\n".join(_planned_line(n, d) for n, d in enumerate(diffs, start=1)) or "none: a control pair, the images are identical"
    return {
        "image_a": url(record["image_a"]),
        "image_b": url(record["image_b"]),
        "planned": planned,
        "differences": [{"planned": _planned_line(n, d), "description": d["description"]}
                        for n, d in enumerate(diffs, start=1)],
        "caption": record["caption"] or "",
    }


def read_vote(result: list[dict[str, Any]], record: dict[str, Any], annotation_id: int,
              annotator: str, time: str | None) -> Vote:
    """Turn an annotation's result into a Vote for `record`; Misfit when it does not fit the config
    (unknown control, wrong type, value outside the config, no verdict, reject without reason,
    reasons on an accept, a description for a difference the record lacks, an empty description)."""
    kinds = {"verdict": "choices", "reasons": "choices", "outline": "choices", "notes": "textarea", "caption": "textarea"}
    result = [item for item in result if not (isinstance(item, dict) and item.get("from_name") in OUTLINE_CONTROLS
                                              and item.get("type") == "rectanglelabels")]
    seen = controls_of(result, lambda name: "textarea" if _DESCRIPTION.match(name) else kinds.get(name))
    for name in seen:
        match = _DESCRIPTION.match(name)
        if match and int(match.group(1)) >= len(record["differences"]):
            raise Misfit(f"{name}: the record has {len(record['differences'])} difference(s)")
    verdict, reasons = verdict_of(seen, REASONS)
    if "outline" in seen:
        _choices(seen["outline"], "outline", (OUTLINE_TOGGLE,))
    edits: dict[str, str] = {}
    for name, item in sorted(seen.items()):
        match = _DESCRIPTION.match(name)
        if match:
            text = _texts(item, name)
            if not text:
                raise Misfit(f"{name}: empty description")
            edits[f"differences.{match.group(1)}.description"] = text
    if "caption" in seen and (caption := _texts(seen["caption"], "caption")):
        edits["caption"] = caption
    notes = _texts(seen["notes"], "notes") if "notes" in seen else ""
    return Vote(annotation_id=annotation_id, annotator=annotator, verdict=verdict, reasons=reasons,
                notes=notes or None, edits=edits, time=time)


def family() -> Family:
    """SPD-Faith as a Family for the generic push/pull machinery."""
    return Family(name=NAME, schema="spd_faith_pair", label_config=label_config, image_fields=IMAGE_FIELDS,
                  task_data=task_data, read_vote=read_vote, task_predictions=outlines)
