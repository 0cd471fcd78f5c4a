"""Count and existence flipped by reframing the photo: a crop that leaves the one object of its kind out of frame.

VFaith edits the visual cue a question depends on (VFaith section 3.1, principle 1: the cue directly decides the
answer, and its edit points to another option), feasibly and without changing the overall visual structure
(principle 2), with no common-sense error (principle 3). For "Is there a X?" and "How many Xs are there?" the
cue is the X's presence in the picture. Inpainting it away paints new pixels where it stood, and issue 29's
audit rejected most such removals (blotches of copied content, smears, structure cut across). A crop takes it
out of the picture instead: the made image is a rectangle of the photo, its pixels untouched, that stops short
of the X; nothing is painted, so nothing can smear. The frame changes (the made image is smaller than the photo,
at the same scale: no pixel is resampled), which a person sees as another shot of the same scene; the
kept share of the photo (at least MIN_KEPT_SHARE, by area) keeps its structure.

A crop is planned only where its answer can be trusted (`crop_out`, each rule from the audit):
- the question's kind has exactly one annotated instance in the photo (count 1 -> 0, existence yes -> no);
- the kind is usually alone (coco_questions.usually_alone over the shipped COCO table, builders/coco_kinds.py: a
  kind that usually comes in groups has unannotated twins that stay in frame: a blurred second bicycle down the
  street of COCO 74, a chair-back in the dark corner of a restaurant in 397);
- the kind is none of CROP_REFUSED: surfaces things stand on (a table is annotated only where it shows between
  the things on it, and picnic tables stand in rows: COCO 127), cutlery (laid in sets, small: 194, 196),
  fitted kitchen appliances (among look-alike fronts: a second microwave in 294), potted plants (among
  unannotated greenery: a box of brush reads as another planter in 49), animals (a cast shadow repeats
  the animal's shape and stays in frame: the dog's shadow on the wall of 490), bowls (dishes stack on shelves
  and counters, unannotated: the stacks over the colander of 486; a vessel washbasin is annotated both bowl and
  sink in 590) and things mounted on a post, stand or arm that stays in frame (a street clock's post in 64, a
  mantel clock's stand in 78);
- no kind a person may call by the asked name is annotated in the photo (LOOKALIKES: hot dogs in their buns
  beside "no sandwich" in 321, a pickup annotated truck behind "no car" in 64);
- the object is nameable (targets.nameable_reason), not partly hidden (targets.partly_hidden_reason), and
  holds no reflection below it (reflections.mirror_score);
- the photo is not framed (`framed`: a frame, mat or backdrop along all four edges would be cut on one side
  only, and the crop would show);
- some side of the photo can be cut off so that the kept rectangle clears the object's mask by CROP_MARGIN of
  the image's size and keeps at least MIN_KEPT_SHARE of the photo: of the four (keep what lies left, right,
  above or below the object), the largest, first in that order on a tie;
- whatever the object carries (an annotated object lying mostly in its box: a rider, a knife on a pizza) leaves
  the frame with it, no part of it kept (`cut_refusal`): a surface's load never floats at the new edge;
- nothing a person holds or uses (edit_refusals.held_by: a quarter of its mask in a person's box) is cropped
  away from them: what stays with the person gives it away (a birthday cake's "1" candle and the frosting on the
  baby's face in 428; the skater of 634 cut at the knees above his board, another board under a second skater).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mmfaith.builders.coco_kinds import COCO_KINDS
from mmfaith.builders.coco_questions import usually_alone
from mmfaith.builders.mask_box import mask_extent
from mmfaith.builders.reflections import MIRROR_LIMIT
from mmfaith.builders.scene_view import SceneView
from mmfaith.builders.edit_refusals import ANIMALS, held_by
from mmfaith.builders.targets import SUPPORT_INSIDE, partly_hidden_reason

MIN_KEPT_SHARE = 0.5
"""The least share of the photo (by area) a crop keeps."""
CROP_MARGIN = 0.02
"""The least gap between the object's mask and the new edge, as a share of the image's width (or height)."""
FRAME_STRIP = 0.01
"""The edge strip `framed` reads, as a share of the image's shorter side (at least 2 pixels)."""
FRAME_LIGHT, FRAME_DARK = 200.0, 50.0
"""Median 8-bit luma of an edge strip at or above which it is light, at or below which it is dark."""
CROP_REFUSED: dict[str, str] = {
    **{kind: "a surface is annotated only where it shows between the things on it, and stands among others"
       for kind in ("dining table", "bed", "couch", "bench")},
    **{kind: "cutlery is laid in sets, its twins small and unannotated" for kind in ("fork", "knife", "spoon")},
    **{kind: "a fitted kitchen appliance stands among look-alike fronts"
       for kind in ("microwave", "oven", "refrigerator", "sink", "toaster")},
    "potted plant": "a potted plant stands among unannotated greenery",
    **{kind: "an animal's cast shadow repeats its shape and would stay in frame" for kind in ANIMALS},
    "bowl": "dishes stack on shelves and counters, their twins unannotated",
    **{kind: "it is mounted on a post, stand or arm that would stay in frame"
       for kind in ("clock", "traffic light", "stop sign", "parking meter")},
}
"""Kinds never cropped away (module docstring), with why."""
LOOKALIKES: dict[str, frozenset[str]] = {"sandwich": frozenset({"hot dog"}), "hot dog": frozenset({"sandwich"}),
                                         "cake": frozenset({"donut"}), "donut": frozenset({"cake"}),
                                         "car": frozenset({"truck"}), "truck": frozenset({"car"})}
"""Kinds a person may call by the asked kind's name: a hot dog in its bun is a sandwich to many (COCO 321), a
pickup is a car to many (64)."""


@dataclass(frozen=True)
class Crop:
    """The kept rectangle of the photo, in pixels: left, top, width, height; `share` its area over the photo's."""

    x: int
    y: int
    width: int
    height: int
    share: float

    def apply(self, rgb: np.ndarray) -> np.ndarray:
        """The kept rectangle of `rgb`, its pixels untouched (a contiguous copy)."""
        return np.ascontiguousarray(rgb[self.y:self.y + self.height, self.x:self.x + self.width])

    def as_json(self) -> list[int]:
        """[x, y, w, h], as `build.plan.crop` records it."""
        return [self.x, self.y, self.width, self.height]


def framed(rgb: np.ndarray) -> bool:
    """True when all four edge strips of the photo (FRAME_STRIP of its shorter side) are light, or all four dark,
    by their median luma (a ragged frame's dark flecks do not move it): a frame, a mat or a backdrop (COCO 309's
    print border)."""
    gray = rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    strip = max(2, round(FRAME_STRIP * min(gray.shape)))
    medians = [float(np.median(side)) for side in (gray[:strip], gray[-strip:], gray[:, :strip], gray[:, -strip:])]
    return all(m >= FRAME_LIGHT for m in medians) or all(m <= FRAME_DARK for m in medians)


def best_crop(mask: np.ndarray) -> Crop | None:
    """The largest of the four one-side crops that clear `mask` by CROP_MARGIN (module docstring), or None when
    none keeps MIN_KEPT_SHARE of the image."""
    extent = mask_extent(mask)
    assert extent is not None, "a cropped-out object has pixels"
    top, bottom, left, right = extent
    height, width = mask.shape
    gap_x, gap_y = int(np.ceil(CROP_MARGIN * width)), int(np.ceil(CROP_MARGIN * height))
    keep_left, keep_right = left - gap_x, right + 1 + gap_x
    keep_top, keep_bottom = top - gap_y, bottom + 1 + gap_y
    crops = [(0, 0, keep_left, height), (keep_right, 0, width - keep_right, height),
             (0, 0, width, keep_top), (0, keep_bottom, width, height - keep_bottom)]
    best = max(crops, key=lambda c: max(c[2], 0) * max(c[3], 0))
    share = max(best[2], 0) * max(best[3], 0) / float(width * height)
    if share < MIN_KEPT_SHARE:
        return None
    return Crop(*best, share=round(share, 4))


def crop_out(view: SceneView, ann_id: int) -> Crop | str:
    """The crop that leaves the object out of frame (`best_crop`), or why it may not be cropped out of the photo
    (module docstring)."""
    category = view.instances[ann_id].category
    if sum(1 for inst in view.instances.values() if inst.category == category) != 1:
        return f"another {category} is annotated in the photo"
    if not usually_alone(COCO_KINDS, category):
        return f"a {category} is usually one of a group in a photo (builders/coco_kinds.py)"
    if category in CROP_REFUSED:
        return CROP_REFUSED[category]
    lookalike = sorted({inst.category for inst in view.instances.values()} & LOOKALIKES.get(category, frozenset()))
    if lookalike:
        return f"a {lookalike[0]} is annotated in the photo, and a person may call it a {category}"
    why = view.unnameable(ann_id) or partly_hidden_reason(ann_id, view.masks, view.boxes)
    if why is not None:
        return why
    if view.mirror(ann_id) >= MIRROR_LIMIT:
        return f"its reflection would stay in frame (mirror score {view.mirror(ann_id):.2f} >= {MIRROR_LIMIT})"
    if framed(view.rgb):
        return "the photo is framed: a crop would cut its frame on one side"
    crop = best_crop(view.masks[ann_id])
    if crop is None:
        return f"no crop that leaves it out of frame keeps {MIN_KEPT_SHARE:.0%} of the photo"
    holder = held_by(view, ann_id)
    held = None if holder is None else f"person {holder} holds or uses it and would stay in frame"
    return cut_refusal(view, ann_id, crop) or held or crop


def cut_refusal(view: SceneView, ann_id: int, crop: Crop) -> str | None:
    """Why the crop would leave part of what the object carries in frame, or None: every annotated object lying
    SUPPORT_INSIDE in the object's box (a rider, a knife on a pizza, food in a bowl: targets.movable_reason's
    "supports") leaves the frame with it, whole, or the made image would show it floating where its support was."""
    kept = np.zeros(view.rgb.shape[:2], dtype=bool)
    kept[crop.y:crop.y + crop.height, crop.x:crop.x + crop.width] = True
    x, y, w, h = view.instances[ann_id].bbox
    box = (slice(int(y), int(np.ceil(y + h))), slice(int(x), int(np.ceil(x + w))))
    for other_id, mask in view.masks.items():
        area = view.area(other_id)
        if other_id != ann_id and area and float(mask[box].sum()) >= SUPPORT_INSIDE * area and (mask & kept).any():
            return (f"it carries annotation {other_id} ({view.instances[other_id].category}), which the crop would "
                    "cut and leave partly in frame")
    return None

