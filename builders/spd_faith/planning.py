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
  other instance's mask (so no neighbour is damaged) and does not reach the image border, and no
  reflection of the object lies below it (SceneView.removal_refusal; issue 29's audit: a strip of a
  frisbee left at the border, a bottle's reflection in a glass table).
- position: a <= 0.10, the same hole, support, hiding, neighbour, border and reflection rules (a cut
  edge pasted mid-frame is an obvious artifact), not a fixed, hung, worn or
  perched object (targets.NOT_MOVED), and a place exists on the same ground line (a
  vertical shift of at most 10% of the image height, so objects do not float) where the object,
  grown by the blend radius, overlaps no other annotated instance (crowd regions included), not
  its own old (dilated) place, and no other edit of the same pair.
SPD-Faith's own refusals (refusals.py, issue 29's audit): no removal or move of people, fixtures or held
things; no recolour of fitted appliances, cups, sinks, teal objects, a worn thing not whole in frame, fruit, or a
thing in an animal's fur.
In a multi-difference pair an edit's hole grown by the dilation meets no earlier edit's footprint (the pixels it may
change), except between recolours: two recolours may share SHARED_SLIVER (1 %) of the smaller mask, where COCO's
polygons of two touching objects overlap (the two beach umbrellas of COCO 315 share 43 of 5,430 pixels); the later
recolour paints the shared sliver. Two recolours of a pair that come within the dilation of each other never take
the same target: the two touching umbrellas of COCO 315 both painted blue merged into one canopy (issue 29's audit).

Edit types are drawn with weights per tier: color 0.4, remove 0.3, position 0.3 for medium and hard
(the paper: "color accounts for 40% in medium and hard"), a third each for easy and multi.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mmfaith.builders.coco_source import Instance, Scene
from mmfaith.builders.edits import dilate, shift
from mmfaith.builders.scene_view import SceneView as SharedSceneView
from mmfaith.builders.scene_view import seeded_rng
from mmfaith.builders.edit_refusals import recolour_refusal
from mmfaith.builders.edit_refusals import removal_refusal as spd_removal_refusal
from mmfaith.builders.targets import TargetRules

TIERS = ("easy", "medium", "hard")
EDIT_TYPES = ("color", "remove", "position")
EASY_MAX_INSTANCES = 6
HARD_MIN_INSTANCES = 17
EASY_MIN_AREA = 0.01
HARD_MAX_AREA = 0.05
MIN_AREA = 0.001
MAX_AREA = {"color": 0.5, "remove": 0.15, "position": 0.10}
SHARED_SLIVER = 0.01
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


class SceneView(SharedSceneView):
    """The shared scene view (builders/scene_view.py) with SPD-Faith's tiers and edit feasibility."""

    def __init__(self, scene: Scene, rgb: np.ndarray, dilation: int, blend_radius: int,
                 rules: TargetRules = TargetRules()) -> None:
        super().__init__(scene, rgb, dilation, blend_radius, rules)
        self._feasible: dict[tuple[int, str], bool] = self.facts.family.setdefault("spd-faith/feasible", {})

    def tier_of(self, ann_id: int) -> str:
        return difficulty(self.scene.instance_count, self.area_ratio(ann_id))

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

    def footprint(self, edit: PlannedEdit) -> np.ndarray:
        """Every pixel the edit may change."""
        mask = self.masks[edit.ann_id]
        if edit.type == "color":
            return mask
        hole = self.hole(edit.ann_id)
        if edit.type == "position" and edit.offset is not None:
            hole = hole | dilate(shift(mask, *edit.offset), self.blend_radius)
        return hole

    def clashes(self, ann_id: int, kind: str, edits: list[PlannedEdit], blocked: np.ndarray) -> bool:
        """Whether an edit of `kind` on the object would touch the pair's earlier `edits` (`blocked`: their
        footprints) beyond what the module docstring allows."""
        if kind != "color" or any(edit.type != "color" for edit in edits):
            return bool((self.footprint(PlannedEdit(ann_id, "remove")) & blocked).any())
        mask = self.masks[ann_id]
        return any(float((mask & self.masks[edit.ann_id]).sum()) >
                   SHARED_SLIVER * min(self.area(ann_id), self.area(edit.ann_id)) for edit in edits)

    def feasible_types(self, ann_id: int) -> list[str]:
        """The edit types the constraints allow for this object."""
        return [kind for kind in EDIT_TYPES if self.feasible(ann_id, kind)]

    def feasible(self, ann_id: int, kind: str) -> bool:
        """Whether the constraints allow this edit type for this object (cached with the scene's facts, so every
        slot of the image reuses it; each type is judged only when asked, so a planner trying a removal never
        pays for the recolour's checks)."""
        key = (ann_id, kind)
        if key not in self._feasible:
            self._feasible[key] = self._judge(ann_id, kind)
        return self._feasible[key]

    def _judge(self, ann_id: int, kind: str) -> bool:
        ratio = self.area_ratio(ann_id)
        if ratio > MAX_AREA[kind]:
            return False
        if kind == "color":
            return recolour_refusal(self, ann_id) is None and bool(self.color_targets(ann_id))
        if kind == "position" and not self.rules.may_move(self.instances[ann_id].category):
            return False
        return spd_removal_refusal(self, ann_id) is None and self.removal_refusal(ann_id) is None

    def concretize(self, ann_id: int, kind: str, blocked: np.ndarray, rng: np.random.Generator,
                   color: str | None = None, edits: tuple[PlannedEdit, ...] = ()) -> PlannedEdit | None:
        """Fill in an edit's parameters (target color, placement); None when impossible. A recolour takes no
        target of a recolour among the pair's earlier `edits` whose mask its hole meets (module docstring)."""
        if kind == "color":
            beside = {edit.color_after for edit in edits
                      if edit.type == "color" and (self.hole(ann_id) & self.masks[edit.ann_id]).any()}
            targets = [target for target in self.color_targets(ann_id) if target not in beside]
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
                if any(e.ann_id == ann_id for e in edits) or not view.feasible(ann_id, kind):
                    continue
                if view.clashes(ann_id, kind, edits, blocked):
                    continue
                edit = view.concretize(ann_id, kind, blocked, rng, edits=tuple(edits))
                if edit is not None:
                    break
            if edit is not None:
                break
        if edit is None:
            return None
        edits.append(edit)
        blocked |= view.footprint(edit)
    return edits
