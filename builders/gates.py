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
"""
from __future__ import annotations

import cv2
import numpy as np

from mmfaith.builders.colors import rgb_to_lab
from mmfaith.builders.edits import dilate
from mmfaith.builders.mask_box import grown_box

DEFAULT_MIN_DELTA_E = 12.0
MIN_FILL_TEXTURE = 0.3
FILL_INNER_MARGIN = 3
FILL_RING = 12
FILL_MIN_PIXELS = 150
FILL_FLAT_RING = 6.0


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


def fill_texture_ratio(edited: np.ndarray, hole: np.ndarray) -> float | None:
    """Texture inside a filled hole relative to its surround (module docstring); None: not judged.

    Measured on the hole's box grown by the ring and the Sobel kernel's reach (the same pixels and
    values as on the whole image, at the cost of the hole's size).
    """
    crop = grown_box(hole, FILL_RING + 1)
    if crop is None:
        return None
    hole = hole[crop]
    inner = ~dilate(~hole, FILL_INNER_MARGIN)
    if int(inner.sum()) < FILL_MIN_PIXELS:
        return None
    ring = dilate(hole, FILL_RING) & ~hole
    luma = cv2.cvtColor(np.ascontiguousarray(edited[crop]), cv2.COLOR_RGB2GRAY).astype(np.float32)
    magnitude = np.hypot(cv2.Sobel(luma, cv2.CV_32F, 1, 0, ksize=3), cv2.Sobel(luma, cv2.CV_32F, 0, 1, ksize=3))
    surround = float(magnitude[ring].mean()) if ring.any() else 0.0
    if surround < FILL_FLAT_RING:
        return None
    return round(float(magnitude[inner].mean()) / surround, 3)
