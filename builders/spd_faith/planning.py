"""What to edit: the difficulty rule, the edit constraints, and the seeded rule planner.

Difficulty of a single-difference pair (SPD-Faith, appendix A.2, rule fixed by this project):
n = the image's non-crowd instance count, a = the edited mask's area over the image's area.
    easy   if n <= 6  and a >= 0.01   (sparse scene, clearly sized region)
    hard   if n >= 17 and a <  0.05   (dense scene and small region)
    medium otherwise
Objects smaller than a = 0.001 are never edited.

Constraints on an edit (all on the instance mask, never on the box alone):
- color: a <= 0.5, the photo is not monochrome, the object has a dominant color and a target color of its category's palette at
  least 40 delta E from its own (colors.py, targets.py); people only with --recolor-people.
- remove: a <= 0.15, the dilated hole covers at most the inpainter's hole limit of the image
  (targets.MAX_HOLE_AREA), the object carries no other object and is not partly hidden
  (targets.movable_reason), and the mask grown by the inpainting dilation covers at most 2% of any
  other instance's mask (so no neighbour is damaged).
- position: a <= 0.10, the same hole, support, hiding and neighbour rules, not a fixed, hung, worn or
  perched object (targets.NOT_MOVED), the object is not cut by the image border (a cut
  edge pasted mid-frame is an obvious artifact), and a place exists on the same ground line (a
  vertical shift of at most 10% of the image height, so objects do not float) where the object,
  grown by the blend radius, overlaps no other annotated instance (crowd regions included), not
  its own old (dilated) place, and no other edit of the same pair.
In a multi-difference pair the edits' footprints (the pixels each may change) are disjoint.

Edit types are drawn with weights per tier: color 0.4, remove 0.3, position 0.3 for medium and hard
(the paper: "color accounts for 40% in medium and hard"), a third each for easy and multi.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from mmfaith.builders.coco_source import Instance, Scene
from mmfaith.builders.colors import ObjectColor, distinct_targets, is_monochrome, object_color
from mmfaith.builders.edits import dilate, shift
from mmfaith.builders.targets import TargetRules, movable_reason

TIERS = ("easy", "medium", "hard")
EDIT_TYPES = ("color", "remove", "position")
EASY_MAX_INSTANCES = 6
HARD_MIN_INSTANCES = 17
EASY_MIN_AREA = 0.01
HARD_MAX_AREA = 0.05
MIN_AREA = 0.001
MAX_AREA = {"color": 0.5, "remove": 0.15, "position": 0.10}
MAX_NEIGHBOUR_OVERLAP = 0.02
MIN_TARGET_DELTA_E = 40.0
PLACEMENT_TRIES = 200
MAX_VERTICAL_SHIFT = 0.10
BORDER_MARGIN = 2
TYPE_WEIGHTS = {
    "easy": (1 / 3, 1 / 3, 1 / 3),
    "medium": (0.4, 0.3, 0.3),
    "hard": (0.4, 0.3, 0.3),
    None: (1 / 3, 1 / 3, 1 / 3),
}


def difficulty(instance_count: int, area_ratio: float) -> str:
    """The tier of a single-difference pair (module docstring)."""
    if instance_count <= EASY_MAX_INSTANCES and area_ratio >= EASY_MIN_AREA:
        return "easy"
    if instance_count >= HARD_MIN_INSTANCES and area_ratio < HARD_MAX_AREA:
        return "hard"
    return "medium"


@dataclass(frozen=True)
class Slot:
    """One attempt to make one pair: which subset and tier, how many edits, which image, which visit."""

    subset: str
    tier: str | None
    num_edits: int
    image_id: int
    visit: int

    @property
    def group(self) -> str:
        return f"{self.subset}/{self.tier if self.subset == 'single' else self.num_edits}"

    @property
    def key(self) -> str:
        return f"{self.group}/{self.image_id}/{self.visit}"

    @classmethod
    def from_key(cls, key: str) -> Slot:
        """The slot whose `key` this is (ValueError for a string no slot has as its key)."""
        subset, group, image_id, visit = key.split("/")
        if subset == "single":
            slot = cls(subset, group, 1, int(image_id), int(visit))
        elif subset in ("multi", "control"):
            slot = cls(subset, None, int(group), int(image_id), int(visit))
        else:
            raise ValueError(f"not a slot key: {key!r}")
        if slot.key != key:
            raise ValueError(f"not a slot key: {key!r}")
        return slot


@dataclass(frozen=True)
class PlannedEdit:
    """One concrete edit: the object, the operation and its parameters."""

    ann_id: int
    type: str
    color_after: str | None = None
    offset: tuple[int, int] | None = None

    def as_json(self) -> dict[str, Any]:
        return {"ann_id": self.ann_id, "type": self.type, "color_after": self.color_after,
                "offset": list(self.offset) if self.offset else None}


def plan_signature(file_name: str, subset: str, plan: list[dict[str, Any]]) -> str:
    """What makes two pairs the same for a build: one image, the same objects, the same edit types.

    Two pairs that move one object to two places (or paint it two colors) differ in pixels but test
    the same thing, so a build keeps only the first.
    """
    edits = sorted(f"{edit['ann_id']}:{edit['type']}" for edit in plan)
    return f"{file_name}|{subset}|{','.join(edits)}"


def seeded_rng(seed: int, *labels: object) -> np.random.Generator:
    """A generator that depends only on the seed and the given labels (stable across runs and processes)."""
    digest = hashlib.sha256("/".join([str(seed), *map(str, labels)]).encode("utf-8")).digest()
    return np.random.default_rng([int(word) for word in np.frombuffer(digest, dtype="<u4")])


class SceneView:
    """A decoded scene with its masks, answering the planners' feasibility questions."""

    def __init__(self, scene: Scene, rgb: np.ndarray, dilation: int, blend_radius: int,
                 rules: TargetRules = TargetRules()) -> None:
        self.scene = scene
        self.rgb = rgb
        self.dilation = dilation
        self.blend_radius = blend_radius
        self.rules = rules
        height, width = rgb.shape[:2]
        self.pixels = float(height * width)
        self.masks = {inst.ann_id: inst.mask(height, width) for inst in scene.instances}
        self.instances = {inst.ann_id: inst for inst in scene.instances}
        self._colors: dict[int, ObjectColor] = {}
        self._monochrome: bool | None = None
        self._feasible: dict[int, list[str]] = {}

    def area_ratio(self, ann_id: int) -> float:
        return float(self.masks[ann_id].sum()) / self.pixels

    def tier_of(self, ann_id: int) -> str:
        return difficulty(self.scene.instance_count, self.area_ratio(ann_id))

    def color(self, ann_id: int) -> ObjectColor:
        """The object's color from its own pixels (colors.object_color), cached."""
        if ann_id not in self._colors:
            self._colors[ann_id] = object_color(self.rgb, self.masks[ann_id])
        return self._colors[ann_id]

    def color_name(self, ann_id: int) -> str:
        return self.color(ann_id).name

    def color_targets(self, ann_id: int) -> list[str]:
        """Plausible target colors (category palette), far enough from a dominant color; else none."""
        if self._monochrome is None:
            self._monochrome = is_monochrome(self.rgb)
        palette = () if self._monochrome else self.rules.color_palette(self.instances[ann_id].category)
        return distinct_targets(self.color(ann_id), MIN_TARGET_DELTA_E, palette) if palette else []

    def removal_blocker(self, ann_id: int) -> str | None:
        """Why the object may not be removed or moved (targets.movable_reason, hole limit), or None."""
        hole = float(dilate(self.masks[ann_id], self.dilation).sum()) / self.pixels
        if hole > self.rules.max_hole_area:
            return (f"hole {hole:.3f} of the image exceeds the {self.rules.inpainter} limit "
                    f"{self.rules.max_hole_area}")
        boxes = {ann: inst.bbox for ann, inst in self.instances.items()}
        crowd = frozenset(ann for ann, inst in self.instances.items() if inst.iscrowd)
        return movable_reason(ann_id, self.masks, boxes, crowd)

    def editable_for(self, tier: str | None) -> list[Instance]:
        """Objects that may be edited in a pair of this tier (None: multi, any size that fits)."""
        chosen = []
        for inst in self.scene.editable:
            ratio = self.area_ratio(inst.ann_id)
            if ratio < MIN_AREA:
                continue
            if tier is not None and difficulty(self.scene.instance_count, ratio) != tier:
                continue
            chosen.append(inst)
        return chosen

    def others_union(self, ann_id: int) -> np.ndarray:
        union = np.zeros(self.rgb.shape[:2], dtype=bool)
        for other_id, mask in self.masks.items():
            if other_id != ann_id:
                union |= mask
        return union

    def spares_neighbours(self, ann_id: int) -> bool:
        """True when the dilated hole covers at most MAX_NEIGHBOUR_OVERLAP of every other instance."""
        hole = dilate(self.masks[ann_id], self.dilation)
        for other_id, mask in self.masks.items():
            if other_id == ann_id:
                continue
            other_area = mask.sum()
            if other_area and (hole & mask).sum() > MAX_NEIGHBOUR_OVERLAP * other_area:
                return False
        return True

    def footprint(self, edit: PlannedEdit) -> np.ndarray:
        """Every pixel the edit may change."""
        mask = self.masks[edit.ann_id]
        if edit.type == "color":
            return mask
        hole = dilate(mask, self.dilation)
        if edit.type == "position" and edit.offset is not None:
            hole = hole | dilate(shift(mask, *edit.offset), self.blend_radius)
        return hole

    def find_offset(self, ann_id: int, blocked: np.ndarray, rng: np.random.Generator) -> tuple[int, int] | None:
        """A whole-pixel (dx, dy) that puts the object on free ground, or None after PLACEMENT_TRIES."""
        mask = self.masks[ann_id]
        ys, xs = np.nonzero(mask)
        y0, y1, x0, x1 = int(ys.min()), int(ys.max()), int(xs.min()), int(xs.max())
        height, width = mask.shape
        crop = dilate(mask, self.blend_radius)[max(0, y0 - self.blend_radius): y1 + self.blend_radius + 1,
                                               max(0, x0 - self.blend_radius): x1 + self.blend_radius + 1]
        occupied = blocked | self.others_union(ann_id) | dilate(mask, self.dilation)
        top, left = max(0, y0 - self.blend_radius), max(0, x0 - self.blend_radius)
        span_y, span_x = height - crop.shape[0], width - crop.shape[1]
        if span_y < 0 or span_x < 0:
            return None
        max_dy = int(MAX_VERTICAL_SHIFT * height)
        low_top, high_top = max(0, top - max_dy), min(span_y, top + max_dy)
        for _ in range(PLACEMENT_TRIES):
            new_top = int(rng.integers(low_top, high_top + 1))
            new_left = int(rng.integers(0, span_x + 1))
            window = occupied[new_top:new_top + crop.shape[0], new_left:new_left + crop.shape[1]]
            if not (window & crop).any():
                return new_left - left, new_top - top
        return None

    def touches_border(self, ann_id: int) -> bool:
        ys, xs = np.nonzero(self.masks[ann_id])
        height, width = self.masks[ann_id].shape
        return bool(ys.min() < BORDER_MARGIN or xs.min() < BORDER_MARGIN
                    or ys.max() >= height - BORDER_MARGIN or xs.max() >= width - BORDER_MARGIN)

    def feasible_types(self, ann_id: int) -> list[str]:
        """The edit types the constraints allow for this object (cached)."""
        if ann_id not in self._feasible:
            self._feasible[ann_id] = self._feasible_types(ann_id)
        return self._feasible[ann_id]

    def _feasible_types(self, ann_id: int) -> list[str]:
        ratio = self.area_ratio(ann_id)
        kinds = []
        if ratio <= MAX_AREA["color"] and self.color_targets(ann_id):
            kinds.append("color")
        spared = None
        for kind in ("remove", "position"):
            if kind == "position" and (self.touches_border(ann_id)
                                        or not self.rules.may_move(self.instances[ann_id].category)):
                continue
            if ratio <= MAX_AREA[kind]:
                if spared is None:
                    spared = self.removal_blocker(ann_id) is None and self.spares_neighbours(ann_id)
                if spared:
                    kinds.append(kind)
        return kinds

    def concretize(self, ann_id: int, kind: str, blocked: np.ndarray, rng: np.random.Generator,
                   color: str | None = None) -> PlannedEdit | None:
        """Fill in an edit's parameters (target color, placement); None when impossible."""
        if kind == "color":
            targets = self.color_targets(ann_id)
            if color is None and targets:
                color = targets[int(rng.integers(len(targets)))]
            return PlannedEdit(ann_id, "color", color_after=color) if color in targets else None
        if kind == "position":
            offset = self.find_offset(ann_id, blocked, rng)
            return PlannedEdit(ann_id, "position", offset=offset) if offset else None
        return PlannedEdit(ann_id, "remove")


def rule_plan(view: SceneView, slot: Slot, seed: int,
              edit_types: tuple[str, ...] = EDIT_TYPES) -> list[PlannedEdit] | None:
    """Pick `slot.num_edits` objects and an edit of `edit_types` for each, honouring every constraint; None if impossible.

    The objects of an image are tried in one seeded order per (image, group), started `num_edits`
    further along at each visit, so successive visits of an image edit different objects.
    """
    rng = seeded_rng(seed, "plan", slot.key)
    candidates = view.editable_for(slot.tier if slot.subset == "single" else None)
    if not candidates:
        return None
    base = seeded_rng(seed, "objects", slot.group, slot.image_id).permutation(len(candidates))
    base = np.roll(base, -(slot.visit * slot.num_edits) % len(candidates))
    order = [candidates[i].ann_id for i in base]
    weights = np.array([TYPE_WEIGHTS[slot.tier if slot.subset == "single" else None][EDIT_TYPES.index(k)]
                        for k in edit_types])
    blocked = np.zeros(view.rgb.shape[:2], dtype=bool)
    edits: list[PlannedEdit] = []
    while len(edits) < slot.num_edits:
        # The type is drawn first (by the tier's weights) so the mix follows the weights even where
        # most objects allow only a recolor; the other types are the fallbacks, in drawn order.
        preference = rng.choice(len(edit_types), size=len(edit_types), replace=False, p=weights / weights.sum())
        edit = None
        for kind in (edit_types[int(i)] for i in preference):
            for ann_id in order:
                if any(e.ann_id == ann_id for e in edits) or kind not in view.feasible_types(ann_id):
                    continue
                if (view.footprint(PlannedEdit(ann_id, "remove")) & blocked).any():
                    continue
                edit = view.concretize(ann_id, kind, blocked, rng)
                if edit is not None:
                    break
            if edit is not None:
                break
        if edit is None:
            return None
        edits.append(edit)
        blocked |= view.footprint(edit)
    return edits
