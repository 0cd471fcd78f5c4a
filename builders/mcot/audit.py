"""MCoT's part of the naturalness audit (builders/audit_set.py, docs/audit.md).

MCoT edits nothing: its items are small-target questions from the shared COCO generator
(builders/mcot/coco.py), so what a careful annotator judges is the question itself: is the gold
right (the colour of the object, the side it is on), and can the target be recognised and told
apart (a colour question about a 20-pixel blur, a relation between objects that overlap)?

- Recipes: the embedded sample at the default small-target limit (1 % of the image) and at wider
  ones with other seeds (the sample has few small objects), and the 128-image sample at the
  default, wider limits and none (every object may be asked about), with a looser gold cap where
  the limit is wide.
- Key: `<template>:<image file>:<subject annotation>[><reference annotation>]=<gold text>`: the
  same object(s) asked with the same gold is the same item whatever its options' order; a changed
  gold is a new item to label.
- Kind: the template (`color`, `relation`).
- Gates: the generator's rules read on the item: `subject_area` (its box's share of the image,
  below the recipe's `max_subject_area`), `smallest_target_area` (above `min_instance_area`),
  for a relation `relation_gap` (the x-gap between the boxes over the width, above
  `min_relation_gap`), for a colour `color_share` (the gold name's share of the object's pixels,
  above `MIN_DOMINANT_SHARE`).
- Views: the image with its targets outlined (the subject orange, the reference cyan) and each
  target zoomed (ZOOM_SIDE pixels, with context around it), written once per item under
  `BUILD_DIR/audit/` (deterministic PNGs).
- Candidates: what the two templates could ask about in the source before any of the generator's
  rules (`candidates`), so the yield falls when a rule refuses more.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from mmfaith.builders.audit_set import AuditItem, AuditPart, AuditRecipe, GateReading
from mmfaith.builders.coco_questions import QuestionRules
from mmfaith.builders.coco_source import CocoSource, embedded_sample
from mmfaith.builders.colors import MIN_DOMINANT_SHARE, name_labs, rgb_to_lab
from mmfaith.builders.mcot.build import EMBEDDED_ORIGIN, IMAGES
from mmfaith.builders.mcot.coco import mcot_rules
from mmfaith.builders.mcot.preview import TARGET_COLORS
from mmfaith.builders.targets import PEOPLE
from mmfaith.images import png_bytes
from mmfaith.jsonl import read_json_object, read_jsonl, write_atomic
from mmfaith.vocabulary import COLOR_NAMES

RECIPES: tuple[AuditRecipe, ...] = (
    AuditRecipe("embedded-default", "embedded", ("--seed", "0")),
    AuditRecipe("embedded-area05-seed1", "embedded", ("--seed", "1", "--max-subject-area", "0.05")),
    AuditRecipe("embedded-area10-seed2", "embedded", ("--seed", "2", "--max-subject-area", "0.10",
                                                      "--gold-margin", "0.5")),
    AuditRecipe("coco128-default", "coco128", ("--seed", "0")),
    AuditRecipe("coco128-area03-seed1", "coco128", ("--seed", "1", "--max-subject-area", "0.03")),
    AuditRecipe("coco128-area10-seed2", "coco128", ("--seed", "2", "--max-subject-area", "0.10",
                                                    "--gold-margin", "0.5")),
    AuditRecipe("coco128-all-seed3", "coco128", ("--seed", "3", "--max-subject-area", "1.0",
                                                 "--gold-margin", "0.5")),
)
VIEWS = "audit"
ZOOM_SIDE = 384
ZOOM_CONTEXT = 1.5  # the zoom shows the box and this many box-sides of context around it (at least 48 pixels)
FULL_WIDTH = 768


def audit_part() -> AuditPart:
    """MCoT's recipes, accepted items and candidate count (module docstring)."""
    return AuditPart(recipes=RECIPES, items=audit_items, candidates=candidates)


def candidates(build_dir: Path) -> int:
    """What the templates could ask about before any rule (size, gap, nameability, colour, cap): per image,
    every object alone in its category (no crowd region of it) and under the recipe's `max_subject_area`,
    not a person, for a colour question; every pair of objects alone in their categories, one of them
    under `max_subject_area`, for a relation."""
    recipe = read_json_object(build_dir / "build.json", "").get("recipe", {})
    limit = recipe.get("rules", {}).get("max_subject_area") or 1.0
    source = _source(str(_annotations(recipe.get("origin", ""))), str(build_dir / IMAGES))
    total = 0
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        crowded = {inst.category for inst in scene.instances if inst.iscrowd}
        by_category: dict[str, list[Any]] = {}
        for inst in scene.instances:
            by_category.setdefault(inst.category, []).append(inst)
        singles = [insts[0] for category, insts in by_category.items() if len(insts) == 1 and category not in crowded]
        small = [_box_share(inst.bbox, scene.width, scene.height) < limit for inst in singles]
        total += sum(1 for inst, is_small in zip(singles, small) if is_small and inst.category not in PEOPLE)
        total += sum(1 for i in range(len(singles)) for j in range(i + 1, len(singles)) if small[i] or small[j])
    return total


def _box_share(bbox: list[float] | tuple[float, ...], width: int, height: int) -> float:
    return bbox[2] * bbox[3] / float(width * height)


def _annotations(origin: str) -> Path:
    """The COCO instances file a build's `origin` names (the embedded sample's by its name)."""
    return embedded_sample()[0] if origin == EMBEDDED_ORIGIN else Path(origin)


def item_key(record: dict[str, Any]) -> str:
    """`template:file:subject[>reference]=gold` (module docstring)."""
    anns = ">".join(target["id"].removeprefix("ann") for target in record["targets"])
    gold = next(option["text"] for option in record["options"] if option["label"] == record["answer"])
    return f"{record['category']}:{record['source']['file_name']}:{anns}={gold}"


def audit_items(build_dir: Path) -> Iterator[AuditItem]:
    """Every question of an MCoT build from the COCO source as an `AuditItem` (module docstring)."""
    recipe = read_json_object(build_dir / "build.json", "").get("recipe", {})
    rules = mcot_rules(recipe.get("rules", {}).get("max_subject_area"))
    for _, record in read_jsonl(build_dir / "records.jsonl"):
        key = item_key(record)
        yield AuditItem(key=key, kind=record["category"], gates=_gates(build_dir, record, rules, recipe.get("origin", "")),
                        images=_views(build_dir, record, key), lines=_lines(record))


def _area(record: dict[str, Any], target: dict[str, Any]) -> float:
    return _box_share(target["bbox"], record["width"], record["height"])


def _gates(build_dir: Path, record: dict[str, Any], rules: QuestionRules, origin: str) -> tuple[GateReading, ...]:
    targets = record["targets"]
    readings = [GateReading("smallest_target_area", min(_area(record, t) for t in targets),
                            rules.min_instance_area, "above")]
    if rules.max_subject_area is not None:
        readings.insert(0, GateReading("subject_area", _area(record, targets[0]), rules.max_subject_area, "below"))
    if record["category"] == "relation":
        (x1, _, w1, _), (x2, _, w2, _) = targets[0]["bbox"], targets[1]["bbox"]
        gap = max(x2 - (x1 + w1), x1 - (x2 + w2)) / record["width"]
        readings.append(GateReading("relation_gap", gap, rules.min_relation_gap, "above"))
    if record["category"] == "color":
        share = _color_share(build_dir, record, origin)
        if share is not None:
            readings.append(GateReading("color_share", share, MIN_DOMINANT_SHARE, "above"))
    return tuple(readings)


@cache
def _source(annotations: str, images: str) -> CocoSource:
    return CocoSource(Path(annotations), Path(images))


def _color_share(build_dir: Path, record: dict[str, Any], origin: str) -> float | None:
    """The gold colour name's share of the object's mask pixels (the build's lossless copy of the image, the
    source's mask), or None when the source's annotations are not at hand."""
    annotations = _annotations(origin)
    if not annotations.is_file():
        return None
    scene = _source(str(annotations), str(build_dir / IMAGES)).scene(record["source"]["image_id"])
    ann_id = int(record["targets"][0]["id"].removeprefix("ann"))
    instance = next(inst for inst in scene.instances if inst.ann_id == ann_id)
    with Image.open(build_dir / record["image"]) as image:
        rgb = np.asarray(image.convert("RGB"))
    names = name_labs(rgb_to_lab(rgb[instance.mask(scene.height, scene.width)]))
    return float(np.mean(names == COLOR_NAMES.index(record["source"]["facts"]["color"])))


def _lines(record: dict[str, Any]) -> tuple[str, ...]:
    options = "   ".join(f"{o['label']}. {o['text']}" for o in record["options"])
    gold = next(o["text"] for o in record["options"] if o["label"] == record["answer"])
    sizes = ", ".join(f"{t['label']} {t['bbox'][2]:.0f}x{t['bbox'][3]:.0f} px" for t in record["targets"])
    return (f"Q: {record['question']}", options, f"gold: {record['answer']} ({gold})",
            f"targets: {sizes} ({record['source']['file_name']})")


def _views(build_dir: Path, record: dict[str, Any], key: str) -> tuple[tuple[str, Path], ...]:
    """The full image with the targets outlined, then each target zoomed; written once under BUILD_DIR/audit/."""
    stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", key)
    folder = build_dir / VIEWS
    folder.mkdir(exist_ok=True)
    with Image.open(build_dir / record["image"]) as opened:
        image = opened.convert("RGB")
    views = [("image, targets outlined", folder / f"{stem}-image.png")]
    views += [(f"zoom: {t['label']}", folder / f"{stem}-zoom{n}.png") for n, t in enumerate(record["targets"])]
    if all(path.is_file() for _, path in views):
        return tuple(views)
    full = image.copy()
    draw = ImageDraw.Draw(full)
    width = max(2, round(image.width / FULL_WIDTH * 2))
    for n, target in enumerate(record["targets"]):
        x, y, w, h = target["bbox"]
        draw.rectangle([x - width, y - width, x + w + width, y + h + width], outline=TARGET_COLORS[min(n, 1)],
                       width=width)
    scale = FULL_WIDTH / image.width
    full = full.resize((FULL_WIDTH, round(image.height * scale)), Image.Resampling.LANCZOS)
    write_atomic(views[0][1], png_bytes(np.asarray(full)))
    for (_, path), target in zip(views[1:], record["targets"]):
        write_atomic(path, png_bytes(np.asarray(_zoom(image, target["bbox"]))))
    return tuple(views)


def _zoom(image: Image.Image, bbox: list[float]) -> Image.Image:
    """The box with context around it, square, scaled to ZOOM_SIDE pixels, the box outlined thinly."""
    x, y, w, h = bbox
    side = max(48.0, max(w, h) * (1 + 2 * ZOOM_CONTEXT) / 2)
    cx, cy = x + w / 2, y + h / 2
    left, top = round(cx - side), round(cy - side)
    crop = Image.new("RGB", (round(2 * side), round(2 * side)), (0, 0, 0))
    crop.paste(image.crop((max(0, left), max(0, top), min(image.width, left + crop.width),
                           min(image.height, top + crop.height))), (max(0, -left), max(0, -top)))
    scale = ZOOM_SIDE / crop.width
    zoom = crop.resize((ZOOM_SIDE, ZOOM_SIDE), Image.Resampling.LANCZOS)
    ImageDraw.Draw(zoom).rectangle([(x - left) * scale - 2, (y - top) * scale - 2, (x + w - left) * scale + 2,
                                    (y + h - top) * scale + 2], outline=(255, 0, 255), width=1)
    return zoom
