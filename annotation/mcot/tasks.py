"""MCoT's side of the annotation round trip: the labeling config, record -> task, annotation -> Vote.

Contract with annotation/mcot/labeling.xml (control names): `verdict` (accept|reject), `reasons` (one
or more of REASONS, only with reject), `question` (the question's corrected wording) and `notes`
(free text). The gold answer and the target boxes are shown as text and drawn on a copy of the
image; people accept or reject them, never edit them. Anything else in a result is a Misfit.
"""
from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from mmfaith.annotation.family import HELPER_PNG_LEVEL, Family
from mmfaith.annotation.votes import Misfit, Vote, controls_of, text_of, verdict_of

NAME = "mcot"
REASONS = ("question unclear", "answer wrong", "another option also right", "target box wrong", "other")
IMAGE_FIELDS = {"image": "image_sha256"}
OUTLINE_DIR = "annotation/outlined"
KINDS = {"verdict": "choices", "reasons": "choices", "question": "textarea", "notes": "textarea"}


def label_config() -> str:
    """The Label Studio labeling config (annotation/mcot/labeling.xml, shipped as package data)."""
    return files("mmfaith.annotation.mcot").joinpath("labeling.xml").read_text(encoding="utf-8")


def render_targets(build_dir: Path, record: dict[str, Any]) -> dict[str, str]:
    """A copy of the image with each target box outlined and numbered, under BUILD_DIR/annotation/outlined/
    (named by item and image hash; an existing copy is kept). Returns {"outlined": relpath}."""
    rel = f"{OUTLINE_DIR}/{record['id'].replace('/', '_').replace(':', '_')}_{record['image_sha256'][:12]}.png"
    target = build_dir / rel
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(build_dir / record["image"]) as source:
            image = source.convert("RGB")
        draw = ImageDraw.Draw(image)
        width = max(2, round(max(image.size) / 300))
        for number, box in enumerate(record["targets"], start=1):
            x, y, w, h = box["bbox"]
            draw.rectangle((x - width, y - width, x + w + width, y + h + width), outline=(255, 0, 0), width=width)
            draw.text((x + w + width + 2, y), str(number), fill=(255, 0, 0))
        tmp = target.with_name(target.name + ".tmp")
        image.save(tmp, format="PNG", compress_level=HELPER_PNG_LEVEL)
        tmp.replace(target)
    return {"outlined": rel}


def gold_text(record: dict[str, Any]) -> str:
    """The options (the gold marked), the category and the targets, as lines of text."""
    lines = [f"({o['label']}) {o['text']}" + ("   <- gold" if o["label"] == record["answer"] else "")
             for o in record["options"]] or [f"answer: {record['answer']}"]
    lines.append(f"category: {record['category']}")
    lines += [f"target {n}: {t['label']} at x={t['bbox'][0]:g}, y={t['bbox'][1]:g}, {t['bbox'][2]:g}x{t['bbox'][3]:g} px"
              for n, t in enumerate(record["targets"], start=1)] or ["no target boxes (the source has none)"]
    return "\n".join(lines)


def task_data(record: dict[str, Any], url: Callable[[str], str], extra_files: dict[str, str]) -> dict[str, Any]:
    """The task's `data` for one record (`url` maps a build-dir path to the URL Label Studio serves)."""
    return {"image": url(record["image"]), "outlined": url(extra_files["outlined"]), "question": record["question"],
            "gold": gold_text(record)}


def read_vote(result: list[dict[str, Any]], record: dict[str, Any], annotation_id: int,
              annotator: str, time: str | None) -> Vote:
    """An annotation's result as a Vote; Misfit when it does not fit the config (unknown control, wrong
    type, no verdict, reject without reason, reasons on an accept, an empty question)."""
    seen = controls_of(result, KINDS.get)
    verdict, reasons = verdict_of(seen, REASONS)
    edits = {}
    if "question" in seen:
        question = text_of(seen["question"], "question")
        if not question:
            raise Misfit("question: empty")
        if question != record["question"]:
            edits["question"] = question
    notes = text_of(seen["notes"], "notes") if "notes" in seen else ""
    return Vote(annotation_id=annotation_id, annotator=annotator, verdict=verdict, reasons=reasons,
                notes=notes or None, edits=edits, time=time)


def family() -> Family:
    """MCoT as a Family for the generic push/pull machinery."""
    return Family(name=NAME, schema="mcot_item", label_config=label_config, image_fields=IMAGE_FIELDS,
                  prepare=render_targets, task_data=task_data, read_vote=read_vote)
