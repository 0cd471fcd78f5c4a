"""Automatic quality gates on an edited image.

Visibility: the mean CIE76 color difference (delta E*ab) between the original and the edited image
over the edit's evidence region (the object's mask for a recolor or a removal; old and new mask for
a move) must reach a threshold (default 12; a just-noticeable difference is about 2.3, and 12 is a
change people see at a glance on a natural image).

Isolation: no pixel outside the union of the edits' allowed regions (the mask for a recolor, the mask
grown by the inpainting dilation for a removal, plus the pasted mask grown by the blend radius for
a move) may differ from the original at all.

Fill texture (removals and moves): a filled hole must not be a smear in a textured surround. The
measure is the mean Sobel gradient magnitude of the edited image's luma inside the hole (eroded by
FILL_INNER_MARGIN px, so the seam does not count) over the same inside a ring FILL_RING px wide
around the hole. A diffusion fill (Telea) of a large hole scores about 0.1-0.3, a textured fill
(PatchMatch) about 0.4-1.5 (the embedded sample's largest objects). The gate rejects a ratio below
MIN_FILL_TEXTURE (0.3). It does
not judge (ratio None, passes) when the hole's inside has fewer than FILL_MIN_PIXELS pixels (a
smear too small to see) or the ring is flat (mean gradient below FILL_FLAT_RING, where a smooth fill
is right).

Fill surround and fill blotch (removals and moves; issue 29's audit, docs/audit.md): a textured fill
is not yet a natural one. PatchMatch copies whatever lies near the hole, so a hole that cuts across
several surfaces (a dog on pavement beside a bicycle wheel, a bird among branches, a knife on a
magnet strip) comes out as a blotch of copied content: another giraffe's pattern, a wall on the
pavement, skin on the sand. Two measures, on the edited image (the ring's pixels are the photo's):
- `surround`: the share of the ring's pixels within FILL_SURROUND_DELTA_E (CIE76) of the ring's
  median CIELAB colour; the hole must lie on one surface (at least MIN_FILL_SURROUND);
- `blotch`: the mean CIE76 difference, over the hole's inside, between the fill and a diffusion
  (Telea) fill of the same hole, both blurred by FILL_BLOTCH_SIGMA px so that texture cancels and
  only copied shapes and colours remain; at most MAX_FILL_BLOTCH.
Calibrated on the labelled SPD-Faith audit (benchmarks/audit/spd-faith.jsonl): the clean fills (a
planter or a kite on a lawn) read surround 0.83-0.91 and blotch 3.6-4.7; every fill a person
rejected as a blotch, smear or cut structure read surround below 0.8 or blotch above 12. VFaith's
audit (benchmarks/audit/vfaith.jsonl) then found rejects inside that gap: a person removed above the
hips with the legs left standing (surround 0.805, blotch 9.41), a player leaving a person-shaped
streak on a lawn (0.80), a dog removed from a skirting board smeared along it (blotch 9.28); the
limits sit inside the accepted side's margin (0.82, 8). Neither
is judged (None, passes) when the hole's inside has fewer than FILL_MIN_PIXELS pixels.

Ground (moves): a moved object must stand on the same kind of ground as before (a planter moved
along a lawn, not a potted plant pasted into a hedge or a seated man into a doorway). The measure
is the CIE76 distance between the median CIELAB colours, in the original image, of the lower third
of a ring GROUND_RING_INNER..GROUND_RING_OUTER px around the object where it stood and where it is
pasted (the old hole left out); at most MAX_GROUND_DELTA_E. On the labelled audit the accepted move
read 9.5, the moves rejected for their new place 23-56.
"""
from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from mmfaith.builders.colors import rgb_to_lab
from mmfaith.builders.edits import dilate
from mmfaith.builders.inpainters import ClassicalInpainter
from mmfaith.builders.mask_box import grown_box

DEFAULT_MIN_DELTA_E = 12.0
MIN_FILL_TEXTURE = 0.3
FILL_INNER_MARGIN = 3
FILL_RING = 12
FILL_MIN_PIXELS = 150
FILL_FLAT_RING = 6.0
FILL_SURROUND_DELTA_E = 25.0
MIN_FILL_SURROUND = 0.82
FILL_BLOTCH_SIGMA = 3.0
MAX_FILL_BLOTCH = 8.0
GROUND_RING_INNER = 3
GROUND_RING_OUTER = 12
MAX_GROUND_DELTA_E = 15.0
FILL_REACH = FILL_RING + int(4 * FILL_BLOTCH_SIGMA) + 1
"""How far around a hole the fill measures read pixels (ring, Sobel kernel, blur)."""
RECORDED_FILL_GATES = (("fill_texture", "min_fill_texture", "above"), ("fill_surround", "min_fill_surround", "above"),
                       ("fill_blotch", "max_fill_blotch", "below"), ("ground_delta_e", "max_ground_delta_e", "below"))
"""The fill and ground gates as builds record them in `build.gates`: (figure, its limit's field, which side of
the limit passes); the audits read them back in this order."""


def mean_delta_e(original: np.ndarray, edited: np.ndarray, region: np.ndarray) -> float:
    """Mean CIE76 delta E*ab between two RGB images over the pixels of `region`."""
    if not region.any():
        return 0.0
    diff = rgb_to_lab(original[region]) - rgb_to_lab(edited[region])
    return float(np.sqrt((diff.astype(np.float64) ** 2).sum(axis=-1)).mean())


def outside_changes(original: np.ndarray, edited: np.ndarray, allowed: np.ndarray) -> tuple[int, int]:
    """(number of pixels changed outside `allowed`, largest channel difference there)."""
    changed = np.any(original != edited, axis=-1) & ~allowed
    if not changed.any():
        return 0, 0
    largest = int(np.abs(original.astype(np.int16) - edited.astype(np.int16))[changed].max())
    return int(changed.sum()), largest


def _judged_hole(hole: np.ndarray, reach: int) -> tuple[tuple[slice, slice], np.ndarray, np.ndarray] | None:
    """(the hole's box grown by `reach`, the hole and its inside (eroded by FILL_INNER_MARGIN) in that box), or
    None when the inside has fewer than FILL_MIN_PIXELS pixels: too small to judge."""
    crop = grown_box(hole, reach)
    if crop is None:
        return None
    hole = hole[crop]
    inner = ~dilate(~hole, FILL_INNER_MARGIN)
    return None if int(inner.sum()) < FILL_MIN_PIXELS else (crop, hole, inner)


def fill_texture_ratio(edited: np.ndarray, hole: np.ndarray) -> float | None:
    """Texture inside a filled hole relative to its surround (module docstring); None: not judged.

    Measured on the hole's box grown by the ring and the Sobel kernel's reach (the same pixels and
    values as on the whole image, at the cost of the hole's size).
    """
    judged = _judged_hole(hole, FILL_RING + 1)
    if judged is None:
        return None
    crop, hole, inner = judged
    ring = dilate(hole, FILL_RING) & ~hole
    luma = cv2.cvtColor(np.ascontiguousarray(edited[crop]), cv2.COLOR_RGB2GRAY).astype(np.float32)
    magnitude = np.hypot(cv2.Sobel(luma, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(luma, cv2.CV_32F, 0, 1, ksize=3))
    surround = float(magnitude[ring].mean()) if ring.any() else 0.0
    if surround < FILL_FLAT_RING:
        return None
    return round(float(magnitude[inner].mean()) / surround, 3)


@dataclass(frozen=True)
class FillReading:
    """The fill gates' measures of one filled hole (module docstring); None: not judged."""

    texture: float | None
    surround: float | None
    blotch: float | None

    def problems(self, min_texture: float) -> list[str]:
        """Why the fill fails its gates (empty when it passes), one phrase each."""
        found = []
        if self.texture is not None and self.texture < min_texture:
            found.append(f"left a smeared fill: texture ratio {self.texture} < {min_texture}")
        if self.surround is not None and self.surround < MIN_FILL_SURROUND:
            found.append(f"cuts across several surfaces: surround uniformity {self.surround} < {MIN_FILL_SURROUND}")
        if self.blotch is not None and self.blotch > MAX_FILL_BLOTCH:
            found.append(f"left a blotch of copied content: blotch {self.blotch} > {MAX_FILL_BLOTCH}")
        return found


def fill_surround(edited: np.ndarray, hole: np.ndarray) -> float | None:
    """Share of the ring's pixels (FILL_RING px around the hole) within FILL_SURROUND_DELTA_E of their median
    CIELAB colour; None when the hole's inside is too small to judge or there is no ring."""
    judged = _judged_hole(hole, FILL_RING + 1)
    if judged is None:
        return None
    crop, hole, _ = judged
    ring = dilate(hole, FILL_RING) & ~hole
    if not ring.any():
        return None
    lab = rgb_to_lab(np.ascontiguousarray(edited[crop])[ring]).astype(np.float64)
    distance = np.sqrt(((lab - np.median(lab, axis=0)) ** 2).sum(axis=-1))
    return round(float((distance <= FILL_SURROUND_DELTA_E).mean()), 3)


def fill_blotch(edited: np.ndarray, hole: np.ndarray) -> float | None:
    """Mean CIE76 difference over the hole's inside between the fill and a Telea fill of the same hole, both
    blurred by FILL_BLOTCH_SIGMA (module docstring); None when the inside is too small to judge.

    Measured on the hole's box grown by the blur's and Telea's reach (the same values as on the whole image
    up to the blur's border handling, at the cost of the hole's size)."""
    judged = _judged_hole(hole, FILL_REACH)
    if judged is None:
        return None
    crop, hole, inner = judged
    image = np.ascontiguousarray(edited[crop])
    diffused = ClassicalInpainter("telea").fill(image, hole)
    blurred = [np.clip(np.rint(cv2.GaussianBlur(picture.astype(np.float32), (0, 0), FILL_BLOTCH_SIGMA)), 0, 255)
               .astype(np.uint8) for picture in (image, diffused)]
    difference = rgb_to_lab(blurred[0][inner]).astype(np.float64) - rgb_to_lab(blurred[1][inner])
    return round(float(np.sqrt((difference ** 2).sum(axis=-1)).mean()), 2)


def fill_reading(edited: np.ndarray, hole: np.ndarray) -> FillReading:
    """The three fill measures of a filled hole in the edited image."""
    return FillReading(fill_texture_ratio(edited, hole), fill_surround(edited, hole), fill_blotch(edited, hole))


def _ground(mask: np.ndarray, others: np.ndarray) -> np.ndarray:
    """The lower third (by the object's height) of the ring GROUND_RING_INNER..GROUND_RING_OUTER px around `mask`,
    less `others`."""
    ring = dilate(mask, GROUND_RING_OUTER) & ~dilate(mask, GROUND_RING_INNER) & ~others
    rows = np.nonzero(mask.any(axis=1))[0]
    ring[:rows[-1] - (rows[-1] - rows[0]) // 3] = False
    return ring


def ground_delta_e(original: np.ndarray, mask: np.ndarray, moved: np.ndarray, hole: np.ndarray) -> float | None:
    """CIE76 distance between the median colours of the ground under the object where it stood and where it is
    pasted (module docstring; `hole` is left out of the new place's ring); None when either ring is empty."""
    before, after = _ground(mask, np.zeros_like(mask)), _ground(moved, hole)
    if not before.any() or not after.any():
        return None
    medians = [np.median(rgb_to_lab(original[region]).astype(np.float64), axis=0) for region in (before, after)]
    return round(float(np.sqrt(((medians[0] - medians[1]) ** 2).sum())), 2)
