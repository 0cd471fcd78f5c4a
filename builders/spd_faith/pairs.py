"""One SPD-Faith slot to one pair: plan, edit, gate, and assemble the record (runs in a worker).

Everything here depends only on its arguments (the slot, the scene, the settings), so a pair made in
a worker process is byte-identical to one made in the main process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mmfaith.builders.coco_source import Scene
from mmfaith.builders.edits import EditOutcome, dilate, edit_color, edit_move, edit_remove, mask_bbox
from mmfaith.builders.gates import (FILL_REACH, MAX_FILL_BLOTCH, MAX_GROUND_DELTA_E, MIN_FILL_SURROUND, FillReading,
                                    fill_reading, mean_delta_e, outside_changes)
from mmfaith.builders.inpainters import Inpainter, InpainterSpec, process_inpainter
from mmfaith.builders.spd_faith.planners import PlannerSpec, SlotPlanner
from mmfaith.builders.spd_faith.planning import PlannedEdit, SceneView, Slot, plan_signature
from mmfaith.builders.stage_clock import StageClock
from mmfaith.builders.targets import TargetRules
from mmfaith.images import UnreadableImage, place_name, png_bytes, read_rgb_kept, sha256_bytes
from mmfaith.jsonl import canonical_json

ID_PREFIX = "spdf-"
GATE_MEASURE = "mean CIE76 delta E*ab over the edit's evidence region"
FILL_MEASURE = "mean Sobel gradient of luma inside the filled hole / in a 12 px ring around it"
SURROUND_MEASURE = "share of the 12 px ring's pixels within delta E 25 of the ring's median color"
BLOTCH_MEASURE = "mean delta E inside the hole between the fill and a Telea fill, both blurred (sigma 3 px)"


@dataclass(frozen=True)
class PairSettings:
    """What every worker needs to make pairs, fixed for the whole build."""

    seed: int
    dilation: int
    blend_radius: int
    min_delta_e: float
    min_fill_texture: float
    max_pixels: int
    inpainter: InpainterSpec
    planner: PlannerSpec
    dataset: str
    split: str
    version: str
    targets: TargetRules = TargetRules()
    hole_cache: Path | None = None
    """Folder where this build's workers share their fills (inpainters.HoleCache); None: no cache."""


@dataclass
class SlotOutcome:
    """A made pair (record and PNG bytes, or the PNGs' staged paths once a worker wrote them; see
    builders/staging.py) or a rejection, for the main process to journal."""

    slot_key: str
    record: dict[str, Any] | None = None
    rejection: dict[str, Any] | None = None
    original_png: bytes | None = None
    edited_png: bytes | None = None
    planner_calls: int = 0
    staged: dict[str, str] = field(default_factory=dict)
    clock: StageClock = field(default_factory=StageClock)


_PLANNERS: dict[PlannerSpec, SlotPlanner] = {}


def _tools(settings: PairSettings) -> tuple[Inpainter, SlotPlanner]:
    """The inpainter and planner of this process, built once (weights load once per worker)."""
    if settings.planner not in _PLANNERS:
        _PLANNERS[settings.planner] = settings.planner.build()
    return process_inpainter(settings.inpainter, settings.hole_cache), _PLANNERS[settings.planner]


def duplicate_rejection(slot_key: str, record_id: str, image_id: int, file_name: str) -> dict[str, Any]:
    """The rejection of a pair that edits the same objects the same way as an earlier pair of the build."""
    return {"slot": slot_key, "id": record_id, "image_id": image_id, "file_name": file_name,
            "stage": "duplicate", "reason": "an earlier pair already edits the same objects the same way"}


def original_path(scene: Scene) -> str:
    return f"images/original/{scene.image_id:012d}.png"


def pair_id(dataset: str, scene: Scene, subset: str, edits: list[PlannedEdit]) -> str:
    """Stable id from the source image and the edit plan (same plan, same id, in every build)."""
    key = {"dataset": dataset, "file_name": scene.file_name, "subset": subset, "edits": [e.as_json() for e in edits]}
    return ID_PREFIX + sha256_bytes(canonical_json(key).encode("utf-8"))[:16]


def _box_place(bbox: list[float], width: int, height: int) -> str:
    return place_name(bbox[0] + bbox[2] / 2, bbox[1] + bbox[3] / 2, width, height)


def describe(edit: PlannedEdit, category: str, color_before: str, bbox_before: list[float],
             bbox_after: list[float] | None, width: int, height: int) -> str:
    """The standardized sentence for one difference."""
    if edit.type == "color":
        return f"The {category} changed color from {color_before} to {edit.color_after}."
    if edit.type == "remove":
        return f"The {category} was removed."
    assert bbox_after is not None and edit.offset is not None
    before, after = _box_place(bbox_before, width, height), _box_place(bbox_after, width, height)
    if before != after:
        return f"The {category} moved from the {before} to the {after} of the image."
    dx, dy = edit.offset
    way = ("left" if dx < 0 else "right") if abs(dx) >= abs(dy) else ("up" if dy < 0 else "down")
    return f"The {category} moved {way}, staying in the {after} of the image."


def _source(scene: Scene, settings: PairSettings) -> dict[str, Any]:
    return {
        "dataset": settings.dataset,
        "split": settings.split,
        "image_id": scene.image_id,
        "file_name": scene.file_name,
        "license": {"id": scene.license.id, "name": scene.license.name, "url": scene.license.url},
        "flickr_url": scene.flickr_url,
        "coco_url": scene.coco_url,
        "attribution": f"COCO 2017 image {scene.image_id} ({scene.flickr_url or scene.coco_url}), "
                       f"licensed {scene.license.name}; annotations COCO Consortium, CC BY 4.0.",
    }


def _later_footprints(view: SceneView, edits: list[PlannedEdit], index: int) -> np.ndarray:
    """Every pixel the edits after `index` may change."""
    later = np.zeros(view.rgb.shape[:2], dtype=bool)
    for edit in edits[index + 1:]:
        later |= view.footprint(edit)
    return later


def _fill_gates(readings: list[FillReading | None], min_fill_texture: float) -> dict[str, Any]:
    """The fill gates' figures of a pair's edits (None for an edit without a hole, or not measured) and limits."""
    return {"fill_texture": [r and r.texture for r in readings], "fill_surround": [r and r.surround for r in readings],
            "fill_blotch": [r and r.blotch for r in readings], "min_fill_texture": min_fill_texture,
            "min_fill_surround": MIN_FILL_SURROUND, "max_fill_blotch": MAX_FILL_BLOTCH, "fill_measure": FILL_MEASURE,
            "surround_measure": SURROUND_MEASURE, "blotch_measure": BLOTCH_MEASURE}


def _own_failure(view: SceneView, edits: list[PlannedEdit], index: int, outcome: EditOutcome,
                 settings: PairSettings) -> tuple[float, FillReading | None] | None:
    """The edit's own gate measures (delta E, fill reading) when they fail and no later edit can change
    them (their pixels, and the fill gates' ring, Sobel and blur reach, lie outside every later footprint);
    else None. Such a pair is rejected before the later edits are made."""
    if index == len(edits) - 1:
        return None
    later = _later_footprints(view, edits, index)
    if (outcome.allowed & later).any():
        return None
    delta_e = round(mean_delta_e(view.rgb, outcome.image, outcome.evidence), 3)
    fill = None
    if outcome.hole is not None and not (dilate(outcome.hole, FILL_REACH) & later).any():
        fill = fill_reading(outcome.image, outcome.hole)
    if delta_e < settings.min_delta_e or (fill is not None and fill.problems(settings.min_fill_texture)):
        return delta_e, fill
    return None


def _apply(view: SceneView, edits: list[PlannedEdit], inpainter: Inpainter, settings: PairSettings,
           clock: StageClock) -> tuple[np.ndarray, list[EditOutcome], tuple[int, float, FillReading | None] | None]:
    """Make the edits in order; stops at the first edit whose own gate fails for sure (_own_failure):
    then (its index, delta E, fill reading) is the third element."""
    image = view.rgb
    outcomes = []
    for index, edit in enumerate(edits):
        mask = view.masks[edit.ann_id]
        with clock.stage("inpaint"):
            if edit.type == "color":
                outcome = edit_color(image, mask, edit.color_after or "")
            elif edit.type == "remove":
                outcome = edit_remove(image, mask, inpainter, settings.dilation)
            else:
                outcome = edit_move(image, mask, edit.offset or (0, 0), inpainter, settings.dilation,
                                    settings.blend_radius)
        image = outcome.image
        outcomes.append(outcome)
        with clock.stage("gates"):
            failure = _own_failure(view, edits, index, outcome, settings)
        if failure is not None:
            return image, outcomes, (index, *failure)
    return image, outcomes, None


def _early_rejection(common: dict[str, Any], record_id: str, edits: list[PlannedEdit],
                     failure: tuple[int, float, FillReading | None], plan: Any, settings: PairSettings) -> dict[str, Any]:
    """The rejection of a pair stopped at edit `failure[0]` (its own gate failed; later edits not made)."""
    index, delta_e, fill = failure
    edit = edits[index]
    reasons = []
    if delta_e < settings.min_delta_e:
        reasons.append(f"edit {index} ({edit.type} of annotation {edit.ann_id}) is invisible: "
                       f"mean delta E {delta_e} < {settings.min_delta_e}")
    reasons += [f"edit {index} ({edit.type} of annotation {edit.ann_id}) {problem}"
                for problem in (fill.problems(settings.min_fill_texture) if fill is not None else [])]
    unmeasured: list[float | None] = [None] * len(edits)
    gates = {"delta_e": [delta_e if i == index else None for i in range(len(edits))], "outside_changed_pixels": None,
             **_fill_gates([fill if i == index else None for i in range(len(edits))], settings.min_fill_texture),
             "color_share": unmeasured, "stopped_at_edit": index}
    return {**common, "id": record_id, "stage": "gate", "reason": "; ".join(reasons),
            "plan": [e.as_json() for e in edits], "gates": gates, "planner": plan.provenance}


def make_pair(slot: Slot, scene: Scene, settings: PairSettings, original_sha256: str | None,
              used: frozenset[str] = frozenset(), taken: frozenset[str] = frozenset()) -> SlotOutcome:
    """Plan, edit and gate one slot; never raises for a bad plan, a failed gate or a source image that
    cannot be read, is too large or does not match its annotations (those are rejections, stage "source").

    The checks run from cheap to dear: the plan; then whether an earlier pair of the build already
    made the same edits (`taken`: the plan signatures of the image's and subset's pairs when the
    slot was handed out); then the edits in order, each gated on its own as soon as later edits
    cannot change its measures (_own_failure); then the gates on the finished image; PNG encoding
    last, only for a pair that passed.

    `original_sha256`: the hash of the scene's original PNG when the build has it already (then it
    is not encoded again); None asks for its bytes in the outcome. `used`: the "ann_id:type" options
    that earlier pairs of this image and subset took (planners.SlotPlanner).
    """
    result = SlotOutcome(slot.key)
    clock = result.clock
    common = {"slot": slot.key, "image_id": scene.image_id, "file_name": scene.file_name}
    with clock.stage("plan"):
        try:
            rgb = read_rgb_kept(scene.path, settings.max_pixels)
        except UnreadableImage as exc:  # one bad source image is skipped, not the end of the build
            result.rejection = {**common, "stage": "source", "reason": str(exc)}
            return result
    if (rgb.shape[1], rgb.shape[0]) != (scene.width, scene.height):
        result.rejection = {**common, "stage": "source",
                            "reason": f"{scene.path}: image is {rgb.shape[1]}x{rgb.shape[0]} but the annotations "
                                      f"say {scene.width}x{scene.height}; the masks would not fit it."}
        return result
    if slot.subset == "control":
        record_id = pair_id(settings.dataset, scene, "control", [])
        with clock.stage("encode"):
            original = png_bytes(rgb)
            digest = sha256_bytes(original)
        result.original_png = None if original_sha256 else original
        result.edited_png = original
        result.record = _record(record_id, slot, scene, settings, digest, digest, [], {"name": "none"},
                                {"delta_e": [], "outside_changed_pixels": 0})
        return result

    inpainter, planner = _tools(settings)
    with clock.stage("plan"):
        view = SceneView(scene, rgb, settings.dilation, settings.blend_radius, settings.targets)
        plan = planner.plan(view, slot, settings.seed, used)
    result.planner_calls = plan.calls
    if plan.edits is None:
        result.rejection = {**common, "stage": "plan", "reason": plan.failure or "no feasible plan",
                            "planner": plan.provenance}
        return result
    record_id = pair_id(settings.dataset, scene, slot.subset, plan.edits)
    plan_json = [e.as_json() for e in plan.edits]
    if plan_signature(scene.file_name, slot.subset, plan_json) in taken:
        result.rejection = duplicate_rejection(slot.key, record_id, scene.image_id, scene.file_name)
        return result
    edited, outcomes, failure = _apply(view, plan.edits, inpainter, settings, clock)
    if failure is not None:
        result.rejection = _early_rejection(common, record_id, plan.edits, failure, plan, settings)
        return result
    with clock.stage("gates"):
        delta_es = [round(mean_delta_e(rgb, edited, o.evidence), 3) for o in outcomes]
        allowed = np.zeros(rgb.shape[:2], dtype=bool)
        for outcome in outcomes:
            allowed |= outcome.allowed
        outside_pixels, outside_max = outside_changes(rgb, edited, allowed)
        fills = [None if o.hole is None else fill_reading(edited, o.hole) for o in outcomes]
        grounds = [view.moved_ground(e.ann_id, e.offset or (0, 0)) if e.type == "position" else None
                   for e in plan.edits]
    shares = [round(view.color(e.ann_id).share, 3) if e.type == "color" else None for e in plan.edits]
    gates = {"delta_e": delta_es, "outside_changed_pixels": outside_pixels,
             **_fill_gates(fills, settings.min_fill_texture), "ground_delta_e": grounds,
             "max_ground_delta_e": MAX_GROUND_DELTA_E, "color_share": shares}
    faint = [i for i, value in enumerate(delta_es) if value < settings.min_delta_e]
    unnatural = [(i, problem) for i, reading in enumerate(fills) if reading is not None
                 for problem in reading.problems(settings.min_fill_texture)]
    unnatural += [(i, f"stands on other ground: ground delta E {value} > {MAX_GROUND_DELTA_E}")
                  for i, value in enumerate(grounds) if value is not None and value > MAX_GROUND_DELTA_E]
    if faint or outside_pixels or unnatural:
        reasons = [f"edit {i} ({plan.edits[i].type} of annotation {plan.edits[i].ann_id}) is invisible: "
                   f"mean delta E {delta_es[i]} < {settings.min_delta_e}" for i in faint]
        reasons += [f"edit {i} ({plan.edits[i].type} of annotation {plan.edits[i].ann_id}) {problem}"
                    for i, problem in unnatural]
        if outside_pixels:
            reasons.append(f"{outside_pixels} pixels changed outside the edited regions (largest change {outside_max})")
        result.rejection = {**common, "id": record_id, "stage": "gate", "reason": "; ".join(reasons),
                            "plan": plan_json, "gates": gates, "planner": plan.provenance}
        return result
    differences = []
    for edit, outcome in zip(plan.edits, outcomes):
        inst = view.instances[edit.ann_id]
        before = view.color_name(edit.ann_id)
        bbox_before = mask_bbox(view.masks[edit.ann_id])
        differences.append({
            "type": edit.type,
            "category": inst.category,
            "category_id": inst.category_id,
            "source_ann_id": inst.ann_id,
            "color_before": before,
            "color_after": None if edit.type == "remove" else (edit.color_after or before),
            "bbox_before": bbox_before,
            "bbox_after": outcome.bbox_after,
            "area_ratio": round(view.area_ratio(edit.ann_id), 6),
            "description": describe(edit, inst.category, before, bbox_before, outcome.bbox_after,
                                    rgb.shape[1], rgb.shape[0]),
        })
    with clock.stage("encode"):
        if original_sha256 is None:  # encoded only for pairs that passed, and only once per build
            result.original_png = png_bytes(rgb)
            original_sha256 = sha256_bytes(result.original_png)
        result.edited_png = png_bytes(edited)
        edited_sha256 = sha256_bytes(result.edited_png)
    result.record = _record(record_id, slot, scene, settings, original_sha256, edited_sha256,
                            differences, plan.provenance, gates, inpainter.provenance(), plan_json)
    if slot.subset == "single":
        result.record["difficulty"] = view.tier_of(plan.edits[0].ann_id)
    return result


def _record(record_id: str, slot: Slot, scene: Scene, settings: PairSettings, original_sha256: str,
            edited_sha256: str, differences: list[dict[str, Any]], planner: dict[str, Any],
            gates: dict[str, Any], inpainter: dict[str, Any] | None = None,
            plan: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    folder = "control" if slot.subset == "control" else "edited"
    return {
        "id": record_id,
        "image_a": original_path(scene),
        "image_b": f"images/{folder}/{record_id}.png",
        "image_a_sha256": original_sha256,
        "image_b_sha256": edited_sha256,
        "subset": slot.subset,
        "difficulty": None,
        "num_differences": len(differences),
        "differences": differences,
        "instance_count": scene.instance_count,
        "caption": None,
        "source": _source(scene, settings),
        "verification": {"status": "pending", "annotators": [], "reasons": [], "notes": None,
                         "task_id": None, "time": None, "history": []},
        "build": {
            "mmfaith_version": settings.version,
            "seed": settings.seed,
            "slot": slot.key,
            "planner": planner,
            "inpainter": inpainter,
            "plan": plan or [],
            "gates": {"measure": GATE_MEASURE, "min_delta_e": settings.min_delta_e,
                      "dilation": settings.dilation, "blend_radius": settings.blend_radius, **gates},
        },
    }
