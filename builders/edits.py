"""Atomic image edits on an instance mask: recolor, remove, move.

Each edit returns the new image and two regions: `allowed`, the pixels it may change (the quality
gate checks that nothing outside the union of allowed regions changed), and `evidence`, the pixels
where the change must be visible. Regions are bool HxW arrays.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import cv2
import numpy as np

from mmfaith.builders.inpainters import Inpainter
from mmfaith.builders.mask_box import grown_box, mask_extent
from mmfaith.builders.recolour import recolour


@dataclass
class EditOutcome:
    image: np.ndarray
    allowed: np.ndarray
    evidence: np.ndarray
    bbox_after: list[float] | None
    hole: np.ndarray | None = None  # the inpainted pixels left visible (remove, move), for the fill gate


@cache
def _disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """Grow a bool mask by `radius` pixels with an elliptical kernel.

    Only the mask's box grown by `radius` is dilated (nothing outside it can change), so the result
    is the same bits as dilating the whole image, at the cost of the object's size.
    """
    if radius <= 0:
        return mask.copy()
    grown = np.zeros(mask.shape, dtype=bool)
    box = grown_box(mask, radius)
    if box is not None:
        grown[box] = cv2.dilate(mask[box].astype(np.uint8), _disk(radius)).astype(bool)
    return grown


def mask_bbox(mask: np.ndarray) -> list[float]:
    """COCO xywh box of a bool mask (pixel extents)."""
    extent = mask_extent(mask)
    if extent is None:
        raise ValueError("an empty mask has no box")
    y0, y1, x0, x1 = extent
    return [float(x0), float(y0), float(x1 - x0 + 1), float(y1 - y0 + 1)]


def shift(array: np.ndarray, dx: int, dy: int) -> np.ndarray:
    """Translate an image or mask by whole pixels; uncovered pixels become zero."""
    out = np.zeros_like(array)
    height, width = array.shape[:2]
    src_y = slice(max(0, -dy), min(height, height - dy))
    src_x = slice(max(0, -dx), min(width, width - dx))
    dst_y = slice(max(0, dy), min(height, height + dy))
    dst_x = slice(max(0, dx), min(width, width + dx))
    out[dst_y, dst_x] = array[src_y, src_x]
    return out


def edit_color(rgb: np.ndarray, mask: np.ndarray, target: str) -> EditOutcome:
    """Recolour the object (builders/recolour.py): it may change its refined outline and the soft edge around
    it (`allowed`), and must show the change over its own pixels (`evidence`)."""
    painted = recolour(rgb, mask, target)
    return EditOutcome(painted.image, allowed=painted.region, evidence=painted.support, bbox_after=mask_bbox(mask))


def edit_remove(rgb: np.ndarray, mask: np.ndarray, inpainter: Inpainter, dilation: int) -> EditOutcome:
    hole = dilate(mask, dilation)
    return EditOutcome(inpainter.fill(rgb, hole), allowed=hole, evidence=mask, bbox_after=None, hole=hole)


def edit_move(
    rgb: np.ndarray, mask: np.ndarray, offset: tuple[int, int], inpainter: Inpainter, dilation: int, blend_radius: int
) -> EditOutcome:
    """Cut the object, inpaint where it was, paste it `offset` (dx, dy) away with a feathered seam."""
    dx, dy = offset
    hole = dilate(mask, dilation)
    background = inpainter.fill(rgb, hole)
    moved_mask = shift(mask, dx, dy)
    moved_pixels = shift(rgb, dx, dy)
    # Signed distance to the pasted mask's edge sets the blend: 1 inside, 0 beyond blend_radius outside.
    inside = cv2.distanceTransform(moved_mask.astype(np.uint8), cv2.DIST_L2, 3)
    outside = cv2.distanceTransform((~moved_mask).astype(np.uint8), cv2.DIST_L2, 3)
    signed = np.where(moved_mask, inside, -outside)
    alpha = np.clip(0.5 + signed / (2.0 * blend_radius), 0.0, 1.0).astype(np.float32)[..., None]
    seam = dilate(moved_mask, blend_radius)
    alpha = np.where(seam[..., None], alpha, 0.0)
    blended = background.astype(np.float32) * (1.0 - alpha) + moved_pixels.astype(np.float32) * alpha
    image = np.where(seam[..., None], np.clip(np.rint(blended), 0, 255).astype(np.uint8), background)
    return EditOutcome(image, allowed=hole | seam, evidence=mask | moved_mask, bbox_after=mask_bbox(moved_mask),
                       hole=hole & ~seam)


def edit_mirror(rgb: np.ndarray, mask: np.ndarray) -> EditOutcome:
    """Mirror the whole photo left to right: every left/right relation swaps and nothing is painted or filled.
    `mask` is the cue (the objects a question reads); it must show the change over itself and its mirror
    image (`evidence`); every pixel may change (`allowed`)."""
    mirrored = mask[:, ::-1]
    return EditOutcome(np.ascontiguousarray(rgb[:, ::-1]), allowed=np.ones(mask.shape, dtype=bool),
                       evidence=mask | mirrored, bbox_after=mask_bbox(mirrored))
