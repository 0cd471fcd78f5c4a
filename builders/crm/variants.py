"""One CRM item: a candidate question masked in every mode and style, gated, as a record and its files.

Contract (`make_item(candidate, settings) -> ItemOutcome`)
---------------------------------------------------------
- The evidence mask: every region's pixel box (`masks.pixel_box`), or with `shape="segment"` the
  region's instance mask (`masks.segment_region`; sources without masks cannot use it).
- `specific` masks the evidence; `random` masks regions of the same sizes (and shapes) placed by
  `masks.random_boxes` with a generator seeded from (seed, item id): one placement per item,
  shared by every style. No valid placement: the item is rejected (stage `placement`) with the
  reason; so is an item whose box lies outside its image (stage `regions`).
- Each (mode, style) variant is `masks.apply_mask` of the decoded original (noise seeded from
  (seed, item id, mode)), must pass both gates (nothing outside the mask changed; a specific mask
  covers every evidence pixel), and is written as deterministic PNG
  `variants/<id>/<mode>-<style>.png`; the original is decoded and written the same way to
  `originals/<file stem>.png` (models then see original and variants through one lossless
  codec). The same candidate and settings give byte-identical files and record.
- A mask must not keep what the question asks about (issue 27 item 6). A style listed in
  `KEEPS_ANSWER` for the question's type is refused for it (stage `mask_style`): `blur` leaves the
  region's average colour and `mean` fills it with the image's average colour, either of which can
  name a colour question's answer. And a pixel test (stage `mask_leak`): for a colour question,
  the pixels under every specific variant's mask must not be named its gold colour by the rule the
  generator used (colors.object_color, dominant share): a black box over a black object shows its
  answer too, and such an item is rejected with the reason. Blur keeps colour for every other question
  too, and a colour can name an object (a green blob in a child's hand, a blue bar where the blue
  chair stood: issue 29's audit): a blurred specific region whose mean colour lies at least
  `BLUR_COLOR_LIMIT` (15, chroma distance in CIELAB a*b*) from the ring around it rejects the item
  (stage `mask_leak`), absent-object existence excepted (its mask covers the anchor). On that audit the
  three such leaks read 20.2 to 27.2 and no accepted blur item reached 20 (a planter on grass, 19.7,
  is given up with the margin).
- A segment mask keeps the object's outline, and an outline names what it outlines (two rearing
  horses, a bottle, an airliner: issue 29's audit): `segment` is refused (stage `mask_shape`) for
  count, relation and present-object existence questions, whose answer is which objects are there
  and where; colour questions and absent-object existence (whose mask covers the anchor, not the
  answer) keep it (`SHAPE_KEEPS_ANSWER`).
- A reflection is evidence the mask leaves visible: with instance masks (COCO), an evidence object
  whose mirror image lies right below it (`reflections.mirror_score` at least `MIRROR_LIMIT`: a
  bottle on a glass table) rejects the item (stage `mask_leak`), except the anchor of an absent-object
  question. The highest score is kept in `build.gates.mirror_score` (-1 without instance masks).
- `build.regions_sha256` is the hash of the regions the variants were made from: a build that
  finds it differs from the record's `regions` (a corrected box) remakes that item's variants.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from mmfaith import __version__
from mmfaith.builders.colors import object_color, rgb_to_lab
from mmfaith.builders.crm.sources import Candidate
from mmfaith.builders.masks import (MaskRegion, apply_mask, check_covers, check_outside_unchanged, mask_union,
                                    pixel_box, random_boxes, segment_region)
from mmfaith.builders.reflections import MIRROR_LIMIT, mirror_score
from mmfaith.images import DEFAULT_MAX_PIXELS, UnreadableImage, png_bytes, rgb_from_bytes, sha256_bytes
from mmfaith.jsonl import canonical_json

MODES = ("specific", "random")
KEEPS_ANSWER = {"color": {"blur": "blur keeps the region's average colour",
                          "mean": "mean fills the region with the image's average colour"}}
"""Mask styles that keep what a question type asks about: never paired with it (module docstring)."""
BLUR_COLOR_LIMIT = 15.0
"""Chroma distance (a*b*) from its surroundings at which a blurred region's colour shows what it hid (module docstring)."""
SHAPE_KEEPS_ANSWER = {"segment": "a segment mask keeps the object's outline, which names it"}
"""Mask shapes that keep the answer of count, relation and present-object existence questions (module docstring)."""


@dataclass(frozen=True)
class MaskSettings:
    """How every item is masked (part of the build's recipe)."""

    seed: int = 0
    styles: tuple[str, ...] = ("black",)
    modes: tuple[str, ...] = MODES
    shape: str = "box"
    margin: int = 8
    max_tries: int = 2000
    max_pixels: int = DEFAULT_MAX_PIXELS

    def provenance(self) -> dict[str, Any]:
        return {"shape": self.shape, "margin": self.margin, "styles": list(self.styles), "modes": list(self.modes),
                "max_tries": self.max_tries}


@dataclass
class ItemOutcome:
    """A made record with its files (path inside the build dir -> bytes), or a rejection."""

    key: str
    record: dict[str, Any] | None = None
    files: dict[str, bytes] | None = None
    rejection: dict[str, Any] | None = None
    staged: dict[str, str] = field(default_factory=dict)
    """Once a worker wrote the files into the build's staging folder (builders/staging.py): final -> staged path."""


def item_id(key: str) -> str:
    """The record id of a candidate key: stable across builds."""
    return "crm-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def regions_sha256(regions: Any) -> str:
    """The hash of a record's regions, the trigger for remaking its variants."""
    return hashlib.sha256(canonical_json(regions).encode("utf-8")).hexdigest()


def seed_of(seed: int, *parts: str) -> int:
    """An integer seed fixed by the build seed and the parts (item id, purpose)."""
    return int.from_bytes(hashlib.sha256(":".join([str(seed), *parts]).encode("utf-8")).digest()[:8], "big")


def evidence_regions(candidate: Candidate, regions: list[dict[str, Any]], shape: str, height: int,
                     width: int) -> list[MaskRegion]:
    """The pixel regions a specific mask covers (ValueError naming a box outside the image)."""
    if shape == "segment":
        assert candidate.segments is not None
        by_id = {f"ann{inst.ann_id}": inst for inst in candidate.segments}
        return [segment_region(by_id[region["id"]].mask(height, width)) if region["id"] in by_id
                else pixel_box(region["bbox"], width, height) for region in regions]
    return [pixel_box(region["bbox"], width, height) for region in regions]


def _reject(candidate: Candidate, stage: str, reason: str) -> ItemOutcome:
    return ItemOutcome(candidate.key, rejection={"key": candidate.key, "id": item_id(candidate.key), "stage": stage,
                                                 "reason": reason, "file_name": candidate.source["file_name"]})


def blur_color_contrast(masked: np.ndarray, mask: list[MaskRegion], height: int, width: int) -> float:
    """The largest chroma distance (a*b*, CIELAB) between a blurred region's mean colour and the mean colour of the
    ring around it (a quarter of its longer side wide, outside every masked region)."""
    union = mask_union(mask, height, width)
    largest = 0.0
    for region in mask:
        inside = mask_union([region], height, width)
        side = max(3, int(0.25 * max(region.width, region.height))) | 1
        ring = cv2.dilate(inside.astype(np.uint8), np.ones((side, side), np.uint8)).astype(bool) & ~union
        if not ring.any():
            continue
        region_ab = rgb_to_lab(masked[inside])[:, 1:].mean(axis=0)
        ring_ab = rgb_to_lab(masked[ring])[:, 1:].mean(axis=0)
        largest = max(largest, float(np.hypot(*(region_ab - ring_ab))))
    return largest


def answer_leak(candidate: Candidate, masked: np.ndarray, mask: list[MaskRegion], height: int, width: int,
                style: str) -> str | None:
    """Why the masked pixels still show the answer, or None (module docstring): a colour question's gold colour
    under any style; under blur, a colour standing out from its surroundings for any question but an absent
    object's (a green blob in a child's hand is the broccoli)."""
    gold = candidate.facts.get("color") if candidate.question_type == "color" else None
    if gold is None:
        if style != "blur" or (candidate.question_type == "existence" and candidate.facts.get("count") == 0):
            return None
        contrast = blur_color_contrast(masked, mask, height, width)
        if contrast >= BLUR_COLOR_LIMIT:
            return (f"blur keeps a colour standing out from its surroundings (chroma distance {contrast:.1f} >= "
                    f"{BLUR_COLOR_LIMIT:g}), which shows what the region held")
        return None
    named = object_color(masked, mask_union(mask, height, width))
    if named.dominant and named.name == gold:
        return f"the masked region is still named {gold!r}, the gold colour ({named.share:.0%} of its pixels)"
    return None


def asks_what_is_there(candidate: Candidate) -> bool:
    """Whether the answer is which objects are there and where: count, relation, present-object existence."""
    kind = candidate.question_type
    return kind in ("count", "relation") or (kind == "existence" and candidate.facts.get("count") != 0)


def reflection(candidate: Candidate, rgb: np.ndarray) -> tuple[float, str | None]:
    """The highest mirror score of the evidence objects' instance masks, and the region whose score reaches
    MIRROR_LIMIT (None when none does, or the question is about an absent object; -1 without instance masks)."""
    if candidate.segments is None or (candidate.question_type == "existence" and candidate.facts.get("count") == 0):
        return -1.0, None
    height, width = rgb.shape[:2]
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    scores = {f"ann{inst.ann_id}": mirror_score(gray, inst.mask(height, width)) for inst in candidate.segments}
    region, best = max(scores.items(), key=lambda item: item[1])
    return round(best, 4), (region if best >= MIRROR_LIMIT else None)


def make_item(candidate: Candidate, settings: MaskSettings, regions: list[dict[str, Any]] | None = None,
              original: bytes | None = None) -> ItemOutcome:
    """The record and files of one candidate (module docstring). `regions` replaces the candidate's
    (a corrected version); `original` gives the original PNG when the build already holds it."""
    regions = [dict(region) for region in (regions if regions is not None else candidate.regions)]
    identifier = item_id(candidate.key)
    kept = [f"{style}: {why}" for style, why in KEEPS_ANSWER.get(candidate.question_type, {}).items()
            if style in settings.styles]
    if kept and "specific" in settings.modes:
        return _reject(candidate, "mask_style", f"a {candidate.question_type} question is not masked in a style that "
                                                f"keeps its answer ({'; '.join(kept)}); use black, gray or noise")
    if settings.shape in SHAPE_KEEPS_ANSWER and asks_what_is_there(candidate):
        return _reject(candidate, "mask_shape", f"a {candidate.question_type} question is not masked in shape "
                                                f"{settings.shape} ({SHAPE_KEEPS_ANSWER[settings.shape]}); use box")
    try:
        data = original if original is not None else candidate.image_path.read_bytes()
    except OSError as exc:
        return _reject(candidate, "source", f"{candidate.image_path}: cannot read ({exc.strerror or exc})")
    try:
        rgb = rgb_from_bytes(data, candidate.image_path, settings.max_pixels)
    except UnreadableImage as exc:
        return _reject(candidate, "source", str(exc))
    height, width = rgb.shape[:2]
    mirror, mirrored = reflection(candidate, rgb)
    if mirrored is not None:
        return _reject(candidate, "mask_leak", f"{mirrored}: its mirror image stays visible below it (a reflection; "
                                               f"mirror score {mirror:.2f} >= {MIRROR_LIMIT})")
    try:
        evidence = evidence_regions(candidate, regions, settings.shape, height, width)
    except ValueError as exc:
        return _reject(candidate, "regions", str(exc))
    masks: dict[str, list[MaskRegion]] = {}
    tries = 0
    if "specific" in settings.modes:
        masks["specific"] = evidence
    if "random" in settings.modes:
        placement = random_boxes(evidence, width, height, np.random.default_rng(seed_of(settings.seed, identifier, "random")),
                                 settings.margin, settings.max_tries)
        if placement.regions is None:
            return _reject(candidate, "placement", str(placement.reason))
        masks["random"] = list(placement.regions)
        tries = placement.tries
    original_path = f"originals/{Path(candidate.source['file_name']).stem}.png"
    original_png = original if original is not None else png_bytes(rgb)
    files = {original_path: original_png}
    variants = []
    for mode in settings.modes:
        mask = masks[mode]
        share = round(float(mask_union(mask, height, width).mean()), 6)
        for style in settings.styles:
            masked = apply_mask(rgb, mask, style, seed_of(settings.seed, identifier, mode))
            problem = check_outside_unchanged(rgb, masked, mask) or (
                check_covers(mask, evidence, height, width) if mode == "specific" else None)
            if problem:  # the masking operation guarantees both; a failure is a bug, not a bad item
                raise AssertionError(f"{identifier} {mode}-{style}: {problem}")
            leak = answer_leak(candidate, masked, mask, height, width, style) if mode == "specific" else None
            if leak:
                return _reject(candidate, "mask_leak", f"{mode}-{style}: {leak}")
            png = png_bytes(masked)
            path = f"variants/{identifier}/{mode}-{style}.png"
            files[path] = png
            variants.append({"mode": mode, "style": style, "mask_shape": settings.shape, "image": path,
                             "sha256": sha256_bytes(png), "mask_boxes": [region.xywh() for region in mask],
                             "masked_share": share})
    record = {
        "id": identifier, "question": candidate.question, "question_type": candidate.question_type,
        "options": [dict(option) for option in candidate.options], "answer": candidate.answer,
        "facts": candidate.facts, "image_original": original_path, "image_original_sha256": sha256_bytes(original_png),
        "width": width, "height": height, "regions": regions, "variants": variants,
        "source": {**candidate.source, "key": candidate.key}, "verification": {"status": "pending"},
        "build": {"mmfaith_version": __version__, "seed": settings.seed, "key": candidate.key,
                  "mask": settings.provenance(), "regions_sha256": regions_sha256(regions),
                  "gates": {"outside_changed_pixels": 0, "uncovered_evidence_pixels": 0, "random_tries": tries,
                            "mirror_score": mirror}},
    }
    return ItemOutcome(candidate.key, record=record, files=files)
