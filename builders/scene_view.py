"""A decoded COCO scene with its masks, answering what every family's edit planner asks.

Shared by the builders that edit COCO objects (SPD-Faith's planner, VFaith's question edits): the
objects' masks and area shares, their colour (colors.object_color) and plausible recolour targets
(targets.TargetRules), whether a person could name it (targets.nameable_reason: nothing is edited that
could not be), whether an object may be taken away (targets.movable_reason, the inpainter's
hole limit, neighbours spared), and free places to move an object to. Every random choice comes
from `seeded_rng(seed, *labels)`, so a plan depends only on the seed and what it is for.

Rules and thresholds (docs/spd_faith_build.md states them):
- a recolour target lies at least MIN_TARGET_DELTA_E (40) from the object's own colour;
- a removal's dilated hole covers at most MAX_NEIGHBOUR_OVERLAP (2%) of any other instance's mask;
- a move stays on the same ground line (a vertical shift of at most MAX_VERTICAL_SHIFT, 10% of the
  height), overlaps no other instance, nor the object's own old (dilated) place; PLACEMENT_TRIES
  (200) seeded draws are tried;
- `removal_refusal` (what SPD-Faith's and VFaith's removals and moves obey) adds two rules of
  issue 29's audit to the shared ones: an object whose hole (its mask grown by the dilation) comes
  within BORDER_MARGIN (2 px) of the border is never removed or moved (the fill has the photo on
  one side only, and where COCO's outline stops a few pixels short of the border a strip of the
  object stays: a frisbee's edge), nor one whose mirror image lies right below it
  (reflections.mirror_score >= MIRROR_LIMIT: the reflection of a bottle on a glass table would stay);
- a recolour target named on NEIGHBOUR_SHARE (30 %) or more of the ring NEIGHBOUR_RING (3..10 px)
  around the object is refused: the object would merge with what touches it (issue 29's audit: a
  border-cut umbrella painted the green of its neighbour reads as a panel of that one);
- an object whose mask holds another object's mirror image is a glass or polished surface (a glass
  table under a bottle) and is never recoloured: the recolour would paint the reflection and what is
  seen through it. The other object's reflection is read by reflections.mirror_score (at least
  MIRROR_LIMIT) and lies in the mask when the mask covers at least MIRROR_HOLD_SHARE (half) of the
  other object's box mirrored below its bottom.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import cv2
import numpy as np

from mmfaith.builders.coco_source import Scene
from mmfaith.builders.colors import ObjectColor, distinct_targets, is_monochrome, name_labs, object_color, rgb_to_lab
from mmfaith.builders.edits import dilate, shift
from mmfaith.builders.gates import ground_delta_e
from mmfaith.builders.mask_box import grown_box, mask_extent
from mmfaith.builders.recolour import ObjectPaint
from mmfaith.builders.reflections import MIRROR_LIMIT, mirror_score
from mmfaith.builders.targets import TargetRules, image_detail, movable_reason, nameable_reason
from mmfaith.vocabulary import COLOR_NAMES

MAX_NEIGHBOUR_OVERLAP = 0.02
MIN_TARGET_DELTA_E = 40.0
PLACEMENT_TRIES = 200
MAX_VERTICAL_SHIFT = 0.10
BORDER_MARGIN = 2
MIRROR_HOLD_SHARE = 0.5
NEIGHBOUR_RING = (3, 10)
NEIGHBOUR_SHARE = 0.30
REMEMBERED_SCENES = 256
"""How many scenes' object facts a process keeps (SceneFacts): a build visits each image once per quota
and visit, and the facts (colour, nameability, recolour targets) cost far more than the visit."""


def seeded_rng(seed: int, *labels: object) -> np.random.Generator:
    """A generator that depends only on the seed and the given labels (stable across runs and processes)."""
    digest = hashlib.sha256("/".join([str(seed), *map(str, labels)]).encode("utf-8")).digest()
    return np.random.default_rng([int(word) for word in np.frombuffer(digest, dtype="<u4")])


@dataclass
class SceneFacts:
    """What a SceneView learns about a scene's objects that depends only on the image, the masks and the
    rules: kept per process (facts_of) so every slot of the same image reuses it instead of recomputing
    areas (each a mask decoded), colour names, nameability, recolour and removal refusals (the dearest part
    of planning)."""

    areas: dict[int, int] = field(default_factory=dict)
    colors: dict[int, ObjectColor] = field(default_factory=dict)
    unnameable: dict[int, str | None] = field(default_factory=dict)
    targets: dict[int, list[str]] = field(default_factory=dict)
    refusals: dict[int, str | None] = field(default_factory=dict)
    mirrors: dict[int, float] = field(default_factory=dict)
    detail: float | None = None
    monochrome: bool | None = None
    family: dict[str, dict] = field(default_factory=dict)
    """A family's own per-object facts of the scene, under a name the family chooses (e.g. SPD-Faith's edit
    feasibility): kept as long as the shared ones."""


_FACTS: OrderedDict[tuple, SceneFacts] = OrderedDict()


def facts_of(key: tuple) -> SceneFacts:
    """This process's SceneFacts for a scene key (the REMEMBERED_SCENES most recently used are kept)."""
    facts = _FACTS.pop(key, None) or SceneFacts()
    _FACTS[key] = facts
    while len(_FACTS) > REMEMBERED_SCENES:
        _FACTS.popitem(last=False)
    return facts


class DecodedMasks(Mapping[int, np.ndarray]):
    """A scene's instance masks by annotation id, each decoded when first asked for and kept (a planner that
    refuses an object early never pays for decoding the others; do not modify a mask)."""

    def __init__(self, scene: Scene, height: int, width: int) -> None:
        self._instances = {inst.ann_id: inst for inst in scene.instances}
        self._shape = (height, width)
        self._decoded: dict[int, np.ndarray] = {}

    def __getitem__(self, ann_id: int) -> np.ndarray:
        if ann_id not in self._decoded:
            self._decoded[ann_id] = self._instances[ann_id].mask(*self._shape)
        return self._decoded[ann_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._instances)

    def __len__(self) -> int:
        return len(self._instances)


class SceneView:
    """A decoded scene with its masks (module docstring)."""

    def __init__(self, scene: Scene, rgb: np.ndarray, dilation: int, blend_radius: int,
                 rules: TargetRules = TargetRules()) -> None:
        self.scene = scene
        self.rgb = rgb
        self.dilation = dilation
        self.blend_radius = blend_radius
        self.rules = rules
        height, width = rgb.shape[:2]
        self.pixels = float(height * width)
        self.masks: Mapping[int, np.ndarray] = DecodedMasks(scene, height, width)
        self.instances = {inst.ann_id: inst for inst in scene.instances}
        self.boxes = {inst.ann_id: inst.bbox for inst in scene.instances}
        self.facts = facts_of((str(scene.path), scene.image_id, rgb.shape, dilation, rules))
        self._paints: dict[int, ObjectPaint] = {}
        self._gray: np.ndarray | None = None
        self._holes: dict[int, np.ndarray] = {}

    def area(self, ann_id: int) -> int:
        """The object's mask's pixel count, cached (SceneFacts)."""
        areas = self.facts.areas
        if ann_id not in areas:
            areas[ann_id] = int(self.masks[ann_id].sum())
        return areas[ann_id]

    def area_ratio(self, ann_id: int) -> float:
        return float(self.area(ann_id)) / self.pixels

    def hole(self, ann_id: int) -> np.ndarray:
        """The object's mask grown by the inpainting dilation (what a removal fills), cached: do not modify."""
        if ann_id not in self._holes:
            self._holes[ann_id] = dilate(self.masks[ann_id], self.dilation)
        return self._holes[ann_id]

    def color(self, ann_id: int) -> ObjectColor:
        """The object's color from its own pixels (colors.object_color), cached."""
        colors = self.facts.colors
        if ann_id not in colors:
            colors[ann_id] = object_color(self.rgb, self.masks[ann_id])
        return colors[ann_id]

    def color_name(self, ann_id: int) -> str:
        return self.color(ann_id).name

    def unnameable(self, ann_id: int) -> str | None:
        """Why a person could not point at the object and name it (targets.nameable_reason), cached."""
        facts = self.facts
        if ann_id not in facts.unnameable:
            if facts.detail is None:
                facts.detail = image_detail(self.rgb)
            facts.unnameable[ann_id] = nameable_reason(self.rgb, self.masks[ann_id], facts.detail)
        return facts.unnameable[ann_id]

    def color_targets(self, ann_id: int) -> list[str]:
        """Plausible target colors (category palette), far enough from a dominant color, that the object can
        take naturally (recolour.ObjectPaint.refusal: a trustworthy outline, a reachable lightness); none for
        an object a person could not name. Cached per process (SceneFacts)."""
        facts = self.facts
        if ann_id not in facts.targets:
            facts.targets[ann_id] = self._color_targets(ann_id)
        return facts.targets[ann_id]

    def _color_targets(self, ann_id: int) -> list[str]:
        if self.unnameable(ann_id) is not None or self.holds_reflection(ann_id):
            return []
        facts = self.facts
        if facts.monochrome is None:
            facts.monochrome = is_monochrome(self.rgb)
        palette = () if facts.monochrome else self.rules.color_palette(self.instances[ann_id].category)
        if not palette:
            return []
        mask = self.masks[ann_id]
        around = self._named_on(dilate(mask, NEIGHBOUR_RING[1]) & ~dilate(mask, NEIGHBOUR_RING[0]))
        targets = [target for target in distinct_targets(self.color(ann_id), MIN_TARGET_DELTA_E, palette)
                   if target not in around]
        return [target for target in targets if self.paint(ann_id).refusal(target) is None]

    def _named_on(self, region: np.ndarray) -> set[str]:
        """The colour names (colors.name_labs) of at least NEIGHBOUR_SHARE of the region's pixels."""
        if not region.any():
            return set()
        counts = np.bincount(name_labs(rgb_to_lab(self.rgb[region])), minlength=len(COLOR_NAMES))
        return {name for name, count in zip(COLOR_NAMES, counts) if count >= NEIGHBOUR_SHARE * float(region.sum())}

    def holds_reflection(self, ann_id: int) -> bool:
        """True when the object's mask holds another object's mirror image (module docstring): it is glass or
        polished, and a recolour would paint the reflection."""
        mask = self.masks[ann_id]
        height = mask.shape[0]
        for other_id, inst in self.instances.items():
            if other_id == ann_id or inst.iscrowd:
                continue
            x, y, w, h = inst.bbox
            left, right, bottom = max(0, int(x)), int(np.ceil(x + w)), int(np.ceil(y + h))
            below = mask[bottom:min(height, bottom + int(np.ceil(h))), left:right]
            if below.size and float(below.mean()) >= MIRROR_HOLD_SHARE and self.mirror(other_id) >= MIRROR_LIMIT:
                return True
        return False

    def paint(self, ann_id: int) -> ObjectPaint:
        """The object ready to be recoloured (refined outline, shading), cached."""
        if ann_id not in self._paints:
            self._paints[ann_id] = ObjectPaint(self.rgb, self.masks[ann_id])
        return self._paints[ann_id]

    def removal_blocker(self, ann_id: int) -> str | None:
        """Why the object may not be removed or moved (targets.nameable_reason, targets.movable_reason, hole
        limit), or None; removal_refusal keeps its answer per process."""
        unnameable = self.unnameable(ann_id)
        if unnameable is not None:
            return f"not nameable: {unnameable}"
        hole = float(self.hole(ann_id).sum()) / self.pixels
        if hole > self.rules.max_hole_area:
            return (f"hole {hole:.3f} of the image exceeds the {self.rules.inpainter} limit "
                    f"{self.rules.max_hole_area}")
        return self.placement_reason(ann_id)

    def placement_reason(self, ann_id: int) -> str | None:
        """targets.movable_reason of the object in this scene (partly hidden, supporting another, ...), or None."""
        crowd = frozenset(ann for ann, inst in self.instances.items() if inst.iscrowd)
        return movable_reason(ann_id, self.masks, self.boxes, crowd)

    def removal_refusal(self, ann_id: int) -> str | None:
        """Why the object may not be removed or moved away (module docstring), or None when it may: the shared
        rules (removal_blocker, spares_neighbours), then its hole reaching the border, then its reflection.
        Cached per process (SceneFacts)."""
        refusals = self.facts.refusals
        if ann_id not in refusals:
            refusals[ann_id] = self._removal_refusal(ann_id)
        return refusals[ann_id]

    def _removal_refusal(self, ann_id: int) -> str | None:
        blocker = self.removal_blocker(ann_id)
        if blocker is not None:
            return blocker
        if not self.spares_neighbours(ann_id):
            return "its hole would damage a neighbour"
        if self.hole_touches_border(ann_id):
            return "cut by the image border, or its outline stops just short of it"
        mirror = self.mirror(ann_id)
        if mirror >= MIRROR_LIMIT:
            return f"its reflection would remain (mirror score {mirror:.2f} >= {MIRROR_LIMIT})"
        return None

    def mirror(self, ann_id: int) -> float:
        """reflections.mirror_score of the object: how much the image right below it mirrors it. Cached per
        process (SceneFacts)."""
        mirrors = self.facts.mirrors
        if ann_id not in mirrors:
            if self._gray is None:
                self._gray = cv2.cvtColor(np.ascontiguousarray(self.rgb), cv2.COLOR_RGB2GRAY)
            mirrors[ann_id] = mirror_score(self._gray, self.masks[ann_id])
        return mirrors[ann_id]

    def moved_ground(self, ann_id: int, offset: tuple[int, int]) -> float | None:
        """gates.ground_delta_e of moving the object by `offset`: the ground under it where it stood and where it
        would be pasted (its old hole left out), in the photo; None when either is not seen."""
        mask = self.masks[ann_id]
        return ground_delta_e(self.rgb, mask, shift(mask, *offset), self.hole(ann_id))

    def others_union(self, ann_id: int) -> np.ndarray:
        union = np.zeros(self.rgb.shape[:2], dtype=bool)
        for other_id, mask in self.masks.items():
            if other_id != ann_id:
                union |= mask
        return union

    def spares_neighbours(self, ann_id: int) -> bool:
        """True when the dilated hole covers at most MAX_NEIGHBOUR_OVERLAP of every other instance."""
        box = grown_box(self.hole(ann_id), 0)
        if box is None:
            return True
        hole = self.hole(ann_id)[box]
        for other_id, mask in self.masks.items():
            if other_id == ann_id:
                continue
            other_area = self.area(other_id)
            if other_area and (hole & mask[box]).sum() > MAX_NEIGHBOUR_OVERLAP * other_area:
                return False
        return True

    def find_offset(self, ann_id: int, blocked: np.ndarray, rng: np.random.Generator,
                    left_range: tuple[int, int] | None = None) -> tuple[int, int] | None:
        """A whole-pixel (dx, dy) that puts the object on free ground, or None after PLACEMENT_TRIES.

        `left_range` (inclusive) limits where the object's grown box may start along x (VFaith moves an
        object across another); None allows anywhere in the image.
        """
        mask = self.masks[ann_id]
        extent = mask_extent(mask)
        assert extent is not None, "an editable object has pixels"
        y0, y1, x0, x1 = extent
        height, width = mask.shape
        crop = dilate(mask, self.blend_radius)[max(0, y0 - self.blend_radius): y1 + self.blend_radius + 1,
                                               max(0, x0 - self.blend_radius): x1 + self.blend_radius + 1]
        occupied = blocked | self.others_union(ann_id) | self.hole(ann_id)
        top, left = max(0, y0 - self.blend_radius), max(0, x0 - self.blend_radius)
        span_y, span_x = height - crop.shape[0], width - crop.shape[1]
        if span_y < 0 or span_x < 0:
            return None
        low_left, high_left = (0, span_x) if left_range is None else (max(0, left_range[0]),
                                                                       min(span_x, left_range[1]))
        if low_left > high_left:
            return None
        max_dy = int(MAX_VERTICAL_SHIFT * height)
        low_top, high_top = max(0, top - max_dy), min(span_y, top + max_dy)
        for _ in range(PLACEMENT_TRIES):
            new_top = int(rng.integers(low_top, high_top + 1))
            new_left = int(rng.integers(low_left, high_left + 1))
            window = occupied[new_top:new_top + crop.shape[0], new_left:new_left + crop.shape[1]]
            if not (window & crop).any():
                return new_left - left, new_top - top
        return None

    def hole_touches_border(self, ann_id: int) -> bool:
        """True when the object's hole (its mask grown by the dilation) lies within BORDER_MARGIN of the image
        border: the object is cut by the border, or its outline stops a few pixels short of it (COCO polygons
        often do, and a removal then leaves a strip of the object along the border)."""
        hole = self.hole(ann_id)
        extent = mask_extent(hole)
        assert extent is not None, "an editable object has pixels"
        top, bottom, left, right = extent
        height, width = hole.shape
        return bool(top < BORDER_MARGIN or left < BORDER_MARGIN
                    or bottom >= height - BORDER_MARGIN or right >= width - BORDER_MARGIN)
