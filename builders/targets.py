"""Which annotated objects make sensible edit targets (shared by every question generator).

A careful annotator rejects an edit that leaves the scene impossible or that describes an object
wrongly. These rules say, from COCO annotations alone, which objects may be removed or moved and
which may be recolored; docs/spd_faith_build.md states them with their thresholds.

Removal and moves (`movable_reason` gives the reason an object may not be taken away):
- crowd annotations are never targets (their masks still count as occupied space);
- a *support*: an object on which or in front of which other annotated objects sit (a cake on a
  table, a person on a bench) may not be taken away. Stand-in from boxes and masks: another
  instance has at least SUPPORT_INSIDE (60%) of its mask inside this object's box, and its box
  is smaller than this object's box;
- a *partly hidden* object may not be taken away (its hidden part would have to be invented).
  Stand-ins: its mask fills less than MIN_BOX_FILL (30%) of its own box, or other instances' masks
  cover more than MAX_BOX_OCCLUSION (25%) of its box;
- a hole larger than the inpainter can fill with texture is refused: the dilated hole may cover at
  most MAX_HOLE_AREA[inpainter] of the image (Telea/NS 5%, PatchMatch 10%, LaMa 15%).
Moves only: objects that are fixed, hung, worn, held or perched where they are (NOT_MOVED:
furniture and appliances, signs, cutlery, clocks, birds, ties, skis...) are never moved: pasted
elsewhere on the same ground line they float (a knife off its rack on a tiled wall).

Nameability (`nameable_reason`, every family's targets: the object asked about, counted, removed,
moved or recolored): a careful annotator must be able to point at the object and name it.
- size: its mask holds at least MIN_NAMEABLE_PIXELS (300) pixels and its extent is at least
  MIN_NAMEABLE_SIDE (16) pixels across both ways (not a sliver: a 15-pixel strip of a table's edge);
- border: an object whose mask runs along the image border for at least MAX_BORDER_CONTACT (20%)
  of its extent's perimeter is cut off there; it is refused when it is also narrow (extent under
  BORDER_MIN_SIDE, 40 pixels: the 25-pixel sliver of a fork at the left edge), and at any size when
  the border makes BORDER_CUT_CONTACT (a third) of that perimeter or more (the rim of a glass, a
  quarter of a clock face in a corner, the end of a bench: more of it lies outside the image);
- distinctness: a small object (under PLAIN_MAX_PIXELS, 3,500 pixels) whose body's median colour lies
  within PLAIN_MAX_DELTA_E (13, CIE76) of its surroundings' and whose inside is no sharper than the
  image (mean |Laplacian| under PLAIN_MAX_DETAIL times the image's) does not stand out: a blurred
  gray "person" beside gray posts, a figure seen through a bus's windshield, a dark bag in a dark pile;
  up to BLUR_MAX_PIXELS (10,000) the same holds for an object within BLUR_MAX_DELTA_E (8) of its
  surroundings and clearly blurrier than the image (under BLUR_MAX_DETAIL, 0.7, times its detail):
  a washed-out patch of a car behind heads, a dark couch corner in a dark room.
  The surroundings are the pixels 3 to 8 pixels outside the mask (colors.surround_colored's ring).

Recoloring (`color_palette`): nothing is recolored in a monochrome photo (colors.is_monochrome);
people are not recolored unless asked (`recolor_people`), see-through shapes never (SEE_THROUGH); every
category has a palette of plausible colors (a car may become red, blue, white, black, gray or
yellow; animals keep natural coat colors; plants, most food, bowls, vases, wine glasses (their masks hold
the food or the flowers), polished cutlery (it mirrors its surroundings) and signs are never recolored nor asked about);
categories not listed (manufactured things: cups, chairs, umbrellas...) may take any basic color.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from mmfaith.builders.colors import SURROUND_REACH, body_pixels, rgb_to_lab, surround_ring
from mmfaith.builders.mask_box import grown_box, mask_extent
from mmfaith.vocabulary import COLOR_NAMES

SUPPORT_INSIDE = 0.6
MIN_BOX_FILL = 0.30
MAX_BOX_OCCLUSION = 0.25
MAX_HOLE_AREA: dict[str, float] = {"telea": 0.05, "ns": 0.05, "patchmatch": 0.10, "lama": 0.15}
PEOPLE = frozenset({"person"})
MIN_NAMEABLE_PIXELS = 300
MIN_NAMEABLE_SIDE = 16
MAX_BORDER_CONTACT = 0.2
BORDER_MIN_SIDE = 40
BORDER_CUT_CONTACT = 1 / 3
BORDER_MARGIN = 2
PLAIN_MAX_PIXELS = 3500
PLAIN_MAX_DELTA_E = 13.0
PLAIN_MAX_DETAIL = 1.2
BLUR_MAX_PIXELS = 10000
BLUR_MAX_DELTA_E = 8.0
BLUR_MAX_DETAIL = 0.7
NOT_MOVED = frozenset({
    "dining table", "bed", "couch", "toilet", "sink", "refrigerator", "oven", "microwave", "toaster", "tv",
    "clock", "traffic light", "stop sign", "fire hydrant", "parking meter", "bench", "knife", "fork", "spoon",
    "bird", "tie", "skis", "snowboard", "baseball glove", "umbrella", "kite", "frisbee", "sports ball"})

SEE_THROUGH = frozenset({"bicycle", "motorcycle", "chair", "bench", "tennis racket", "scissors", "handbag"})
"""Objects whose COCO polygon holds what is seen through them (wheels, spindles, slats, strings, handles): a
recolour of the polygon paints that background (the pavement through a bicycle's wheels turns green), so they are
never recoloured (builders/recolour.py refines the outline but cannot tell a gap from the object's own colour)."""

_VEHICLE = ("red", "blue", "white", "black", "gray", "yellow")
_ANY = COLOR_NAMES
COLOR_PALETTES: dict[str, tuple[str, ...]] = {
    # vehicles: colors cars and their kin are actually sold in
    "car": _VEHICLE, "truck": _VEHICLE + ("green", "orange"), "bus": _VEHICLE + ("green", "orange"),
    "motorcycle": _VEHICLE + ("orange", "green"), "bicycle": _ANY, "airplane": ("white", "gray", "blue", "red"),
    "train": _VEHICLE + ("green", "orange"), "boat": ("white", "blue", "red", "yellow", "black", "gray", "brown"),
    # animals: natural coat colors only
    "dog": ("black", "white", "brown", "gray"), "cat": ("black", "white", "gray", "brown", "orange"),
    "horse": ("black", "white", "brown", "gray"), "cow": ("black", "white", "brown"),
    "sheep": ("white", "black", "brown", "gray"), "bear": ("brown", "black", "white"),
    "elephant": (), "zebra": (), "giraffe": (), "bird": _ANY,
    # plants and food: only colors they really have
    "potted plant": (), "broccoli": (), "carrot": (), "hot dog": (), "pizza": (), "sandwich": (),
    "banana": ("yellow", "green", "brown"), "apple": ("red", "green", "yellow"), "orange": ("orange", "green"),
    "donut": ("brown", "pink", "white"), "cake": ("white", "brown", "pink", "yellow"),
    # containers whose COCO mask holds their contents (a recolor paints the food too; a vase's, the flowers that
    # hang over its rim: issue 29's audit saw the white sprigs over the vase of COCO 30 painted blue or red with
    # it in every rendering), glass, and polished cutlery (it mirrors what is around it: a knife reads blue under
    # the sky, a fork brown over a cake)
    "bowl": (), "vase": (), "wine glass": (), "knife": (), "fork": (), "spoon": (),
    # signs and fixtures whose color carries meaning
    "stop sign": (), "traffic light": (), "clock": (), "fire hydrant": ("red", "yellow", "green", "blue", "white"),
}


@dataclass(frozen=True)
class TargetRules:
    """The target rules of one build: the inpainter's hole limit and whether people may be recolored."""

    inpainter: str = "telea"
    recolor_people: bool = False

    @property
    def max_hole_area(self) -> float:
        """Largest dilated hole (fraction of the image) the build's inpainter may fill."""
        return MAX_HOLE_AREA.get(self.inpainter, min(MAX_HOLE_AREA.values()))

    def may_move(self, category: str) -> bool:
        """False for objects that are fixed, hung, worn, held or perched (NOT_MOVED)."""
        return category not in NOT_MOVED

    def color_palette(self, category: str) -> tuple[str, ...]:
        """The colors an object of this category may plausibly be recolored to (empty: never)."""
        if (category in PEOPLE and not self.recolor_people) or category in SEE_THROUGH:
            return ()
        return COLOR_PALETTES.get(category, _ANY)


def box_mask(bbox: tuple[float, float, float, float], height: int, width: int) -> np.ndarray:
    """The pixels of a COCO xywh box as a bool HxW array (clipped to the image)."""
    x, y, w, h = bbox
    x0, y0 = max(0, int(np.floor(x))), max(0, int(np.floor(y)))
    x1, y1 = min(width, int(np.ceil(x + w))), min(height, int(np.ceil(y + h)))
    box = np.zeros((height, width), dtype=bool)
    box[y0:y1, x0:x1] = True
    return box


def movable_reason(ann_id: int, masks: dict[int, np.ndarray], boxes: dict[int, tuple[float, float, float, float]],
                   crowd: frozenset[int] = frozenset()) -> str | None:
    """Why the object may not be removed or moved (module docstring), or None when it may.

    `masks` and `boxes` hold every annotated instance of the image (crowd ones included, listed
    in `crowd`); the result depends only on them.
    """
    if ann_id in crowd:
        return "crowd annotation"
    box, box_area = _box_of(ann_id, masks, boxes)
    if box_area == 0:
        return "empty box"
    for other_id, other in masks.items():
        _, _, ow, oh = boxes[other_id]
        if other_id != ann_id and ow * oh < box_area:
            other_area = float(other.sum())
            if other_area and float(other[box].sum()) >= SUPPORT_INSIDE * other_area:
                return (f"supports annotation {other_id}: {SUPPORT_INSIDE:.0%} or more of its mask lies inside "
                        "this box")
    return partly_hidden_reason(ann_id, masks, boxes)


def partly_hidden_reason(ann_id: int, masks: dict[int, np.ndarray],
                         boxes: dict[int, tuple[float, float, float, float]]) -> str | None:
    """Why the object is a stand-in for a partly hidden one (module docstring: its mask fills less than MIN_BOX_FILL
    of its box, or other instances cover more than MAX_BOX_OCCLUSION of it), or None."""
    box, box_area = _box_of(ann_id, masks, boxes)
    if box_area == 0:
        return "empty box"
    inside = masks[ann_id][box]
    others = np.zeros_like(inside)
    for other_id, other in masks.items():
        if other_id != ann_id:
            others |= other[box]
    fill = float(inside.sum()) / box_area
    if fill < MIN_BOX_FILL:
        return f"partly hidden: its mask fills {fill:.2f} of its box (< {MIN_BOX_FILL})"
    occluded = float((others & ~inside).sum()) / box_area
    if occluded > MAX_BOX_OCCLUSION:
        return f"partly hidden: other objects cover {occluded:.2f} of its box (> {MAX_BOX_OCCLUSION})"
    return None


def _box_of(ann_id: int, masks: dict[int, np.ndarray],
            boxes: dict[int, tuple[float, float, float, float]]) -> tuple[tuple[slice, slice], float]:
    """The object's box as pixel slices (every count is taken inside it: the same integers as with a whole-image box
    mask) and its area in pixels."""
    height, width = masks[ann_id].shape
    x, y, w, h = boxes[ann_id]
    box = (slice(max(0, int(np.floor(y))), min(height, int(np.ceil(y + h)))),
           slice(max(0, int(np.floor(x))), min(width, int(np.ceil(x + w)))))
    return box, float(masks[ann_id][box].size)


def image_detail(rgb: np.ndarray) -> float:
    """The image's mean |Laplacian| of gray levels (the sharpness an object's inside is compared with)."""
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    return float(np.abs(cv2.Laplacian(gray, cv2.CV_32F)).mean())


def nameable_reason(rgb: np.ndarray, mask: np.ndarray, detail: float | None = None) -> str | None:
    """Why a careful annotator could not point at the masked object and name it (module docstring
    "Nameability"), or None when they could. `detail` is `image_detail(rgb)`, computed when not given
    (pass it when asking about many objects of one image)."""
    extent = mask_extent(mask)
    pixels = int(mask.sum())
    if extent is None or pixels < MIN_NAMEABLE_PIXELS:
        return f"{pixels} pixels: too small to name (< {MIN_NAMEABLE_PIXELS})"
    top, bottom, left, right = extent
    height, width = mask.shape
    side = min(bottom - top + 1, right - left + 1)
    if side < MIN_NAMEABLE_SIDE:
        return f"a sliver {side} pixels across (< {MIN_NAMEABLE_SIDE})"
    m = BORDER_MARGIN
    contact = (int(mask[:m].any(axis=0).sum()) + int(mask[height - m:].any(axis=0).sum())
               + int(mask[:, :m].any(axis=1).sum()) + int(mask[:, width - m:].any(axis=1).sum()))
    perimeter = 2 * ((bottom - top + 1) + (right - left + 1))
    if contact >= BORDER_CUT_CONTACT * perimeter:
        return f"cut off by the image border ({contact / perimeter:.0%} of its outline, >= a third)"
    if contact >= MAX_BORDER_CONTACT * perimeter and side < BORDER_MIN_SIDE:
        return (f"cut off by the image border ({contact / perimeter:.0%} of its outline) and {side} pixels across "
                f"(< {BORDER_MIN_SIDE})")
    if pixels < BLUR_MAX_PIXELS:
        box = grown_box(mask, SURROUND_REACH)
        assert box is not None
        ring = surround_ring(mask[box])
        crop = np.ascontiguousarray(rgb[box])
        body = body_pixels(mask)[box]
        if ring.any():
            delta_e = float(np.linalg.norm(np.median(rgb_to_lab(crop[body]), axis=0)
                                           - np.median(rgb_to_lab(crop[ring]), axis=0)))
            gray = cv2.cvtColor(crop, cv2.COLOR_RGB2GRAY)
            inner = float(np.abs(cv2.Laplacian(gray, cv2.CV_32F))[body].mean())
            whole = image_detail(rgb) if detail is None else detail
            small = pixels < PLAIN_MAX_PIXELS
            if (delta_e < PLAIN_MAX_DELTA_E and inner < PLAIN_MAX_DETAIL * whole) if small else (
                    delta_e < BLUR_MAX_DELTA_E and inner < BLUR_MAX_DETAIL * whole):
                return (f"does not stand out: {delta_e:.1f} delta E from its surroundings, inside detail {inner:.1f} "
                        f"against the image's {whole:.1f}")
    return None
