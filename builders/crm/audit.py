"""CRM's part of the naturalness audit (builders/audit_set.py, docs/audit.md).

A CRM item is a question about COCO objects with those objects masked (`specific`) and regions of
the same sizes masked elsewhere (`random`). A careful annotator judges the question (is the gold
right, can the objects be recognised, is every instance annotated, could a count be checked) and
the specific masks (does any style or shape leave the answer readable: a silhouette that names the
object, blur or mean that keep its colour, a reflection or an unmasked twin that stays visible).

- Recipes: the embedded sample with box masks in the plain styles (black, gray, noise) and in the
  styles that keep something of the region (blur, mean), with segment masks over every template
  (count, relation and present existence are refused there: `variants.SHAPE_KEEPS_ANSWER`, so it
  gives colour-free absent existence), segment and box masks in gray and noise over colour alone
  (every colour of the sample but one cake's is black, and a black mask over a black object keeps
  it: stage `mask_leak`) and counts alone; the 128-image sample with box and segment masks, colour
  alone, counts alone, and relation alone in three style sets (a relation is the last template an
  image's quota reaches, and the samples hold few). The recipes of one template or shape lift the
  gold cap (`_ANY_GOLD`). NoDerivs images are allowed (audit builds are looked at, never published).
- Key: `<candidate key>=<gold text>|<shape>|<styles>` (e.g.
  `coco:count:49:56407+58884=2|box|black+gray+noise`): the same question with the same gold, masked
  in the same shape and styles, is the same item whatever its options' order and the seed; a changed
  gold or a new style is a new item to label.
- Kind: `<template> <shape>` (`count box`, `color segment`, ...).
- Gates, read on the accepted item: `mirror_score` (the evidence's reflection, `reflections.py`,
  below `MIRROR_LIMIT`; -1 without instance masks), `smallest_evidence_area` (the smallest evidence
  box over the image, above `min_counted_area` for count and present existence, above
  `min_instance_area` otherwise; absent existence has none: its evidence is the anchor).
- Views: the original with the evidence outlined (written once under `BUILD_DIR/audit/`), then
  every specific variant, then the first random one.
- Candidates: the questions the source proposed (records.jsonl plus rejected.jsonl).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from mmfaith.builders.audit_set import AuditItem, AuditPart, AuditRecipe, GateReading
from mmfaith.builders.coco_questions import QuestionRules
from mmfaith.builders.crm.variants import item_id
from mmfaith.builders.reflections import MIRROR_LIMIT
from mmfaith.images import png_bytes
from mmfaith.jsonl import read_jsonl, write_atomic

_ALL = ("--per-image", "4", "--allow-noderivs", "--max-items", "200")
_ANY_GOLD = ("--gold-margin", "1")
"""The gold cap lifted (`--gold-margin 1`): it refuses an item for the build's mix of golds, not for anything a person
sees in it, and a one-template build's golds are skewed (most colours of both samples are black, most counts 1: the
cap refused every one after the first few)."""
_C128 = ("--per-image", "2", "--allow-noderivs")
RECIPES: tuple[AuditRecipe, ...] = (
    AuditRecipe("embedded-box-plain", "embedded", (*_ALL, "--mask-style", "black,gray,noise", "--seed", "0")),
    AuditRecipe("embedded-box-blur-mean", "embedded", (*_ALL, "--mask-style", "blur,mean", "--seed", "2")),
    AuditRecipe("embedded-segment", "embedded", (*_ALL, *_ANY_GOLD, "--mask-shape", "segment",
                                                 "--mask-style", "blur,mean,noise", "--seed", "1")),
    AuditRecipe("embedded-segment-color", "embedded", (*_ALL, *_ANY_GOLD, "--templates", "color", "--mask-shape",
                                                       "segment", "--mask-style", "gray,noise", "--seed", "3")),
    AuditRecipe("embedded-color", "embedded", (*_ALL, *_ANY_GOLD, "--templates", "color", "--mask-style", "gray,noise",
                                               "--seed", "4")),
    AuditRecipe("embedded-count", "embedded", (*_ALL, *_ANY_GOLD, "--templates", "count", "--mask-style", "black,noise",
                                               "--seed", "0")),
    AuditRecipe("coco128-box", "coco128", (*_C128, "--max-items", "60", "--mask-style", "black,noise", "--seed", "0")),
    AuditRecipe("coco128-segment-color", "coco128", (*_C128, *_ANY_GOLD, "--max-items", "40", "--templates", "color",
                                                     "--mask-shape", "segment", "--mask-style", "gray,noise",
                                                     "--seed", "1")),
    AuditRecipe("coco128-color", "coco128", (*_C128, *_ANY_GOLD, "--max-items", "40", "--templates", "color",
                                             "--mask-style", "gray,noise", "--seed", "4")),
    AuditRecipe("coco128-count", "coco128", (*_C128, *_ANY_GOLD, "--max-items", "60", "--templates", "count",
                                             "--mask-style", "black,noise", "--seed", "0")),
    AuditRecipe("coco128-relation", "coco128", (*_C128, *_ANY_GOLD, "--max-items", "40", "--templates", "relation",
                                                "--mask-style", "black,gray,noise", "--seed", "0")),
    AuditRecipe("coco128-relation-blur-mean", "coco128", (*_C128, *_ANY_GOLD, "--max-items", "40",
                                                          "--templates", "relation", "--mask-style", "blur,mean",
                                                          "--seed", "1")),
    AuditRecipe("coco128-relation-noise", "coco128", (*_C128, *_ANY_GOLD, "--max-items", "40", "--templates",
                                                      "relation", "--mask-style", "noise", "--seed", "5")),
)
VIEWS = "audit"
OUTLINE = (0, 255, 0)


def audit_part() -> AuditPart:
    """CRM's recipes, accepted items and candidate count (module docstring)."""
    return AuditPart(recipes=RECIPES, items=audit_items, candidates=candidates)


def candidates(build_dir: Path) -> int:
    """The questions the source proposed: kept (records.jsonl) plus refused (rejected.jsonl)."""
    return sum(1 for _ in read_jsonl(build_dir / "records.jsonl")) + \
        sum(1 for _ in read_jsonl(build_dir / "rejected.jsonl"))


def gold_text(record: dict[str, Any]) -> str:
    """The gold option's text (the free-form answer for an item without options)."""
    return next((o["text"] for o in record["options"] if o["label"] == record["answer"]), str(record["answer"]))


def item_key(record: dict[str, Any]) -> str:
    """`<candidate key>=<gold text>|<shape>|<styles>` (module docstring)."""
    mask = record["build"]["mask"]
    return f"{record['build']['key']}={gold_text(record)}|{mask['shape']}|{'+'.join(mask['styles'])}"


def audit_items(build_dir: Path) -> Iterator[AuditItem]:
    """Every item of a CRM build as an `AuditItem` (module docstring)."""
    for _, record in read_jsonl(build_dir / "records.jsonl"):
        yield AuditItem(key=item_key(record), kind=f"{record['question_type']} {record['build']['mask']['shape']}",
                        gates=_gates(record), images=_views(build_dir, record), lines=_lines(record))


def _gates(record: dict[str, Any]) -> tuple[GateReading, ...]:
    readings = [GateReading("mirror_score", float(record["build"]["gates"].get("mirror_score", -1.0)), MIRROR_LIMIT,
                            "below")]
    if record["question_type"] == "existence" and record["facts"].get("count") == 0:
        return tuple(readings)
    rules = QuestionRules()
    counted = record["question_type"] in ("count", "existence")
    smallest = min(r["bbox"][2] * r["bbox"][3] for r in record["regions"]) / float(record["width"] * record["height"])
    readings.append(GateReading("smallest_evidence_area", smallest,
                                rules.min_counted_area if counted else rules.min_instance_area, "above"))
    return tuple(readings)


def _lines(record: dict[str, Any]) -> tuple[str, ...]:
    options = "   ".join(f"{o['label']}. {o['text']}" for o in record["options"])
    regions = ", ".join(f"{r['label']} {r['bbox'][2]:.0f}x{r['bbox'][3]:.0f} px" for r in record["regions"])
    mask = record["build"]["mask"]
    return (f"Q: {record['question']}", options, f"gold: {record['answer']} ({gold_text(record)})",
            f"evidence (outlined): {regions}; masks: {mask['shape']}, {', '.join(mask['styles'])} "
            f"({record['source']['file_name']})")


def _views(build_dir: Path, record: dict[str, Any]) -> tuple[tuple[str, Path], ...]:
    """The original with the evidence outlined (written once under BUILD_DIR/audit/), every specific variant, the
    first random one."""
    outlined = build_dir / VIEWS / f"{item_id(record['build']['key'])}-evidence.png"
    if not outlined.is_file():
        with Image.open(build_dir / record["image_original"]) as opened:
            image = opened.convert("RGB")
        draw = ImageDraw.Draw(image)
        width = max(2, round(image.width / 320))
        for region in record["regions"]:
            x, y, w, h = region["bbox"]
            draw.rectangle([x - width, y - width, x + w + width, y + h + width], outline=OUTLINE, width=width)
        outlined.parent.mkdir(exist_ok=True)
        write_atomic(outlined, png_bytes(np.asarray(image)))
    variants = [v for v in record["variants"] if v["mode"] == "specific"]
    variants += [v for v in record["variants"] if v["mode"] == "random"][:1]
    return (("original, evidence outlined", outlined),
            *((f"{v['mode']}-{v['style']} ({v['mask_shape']})", build_dir / v["image"]) for v in variants))
