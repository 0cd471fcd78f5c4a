"""Zoom-in boxes: the model's coordinates -> pixels of the original image, clamped; and the crop itself.

Contract (docs/mcot.md#coordinates)
-----------------------------------
A tool call names `bbox_2d` = [x1, y1, x2, y2] in one of three conventions (`--coords`), always of
the image it targets (the original, or an earlier crop: `target_image`, 1 = the original):
- `pixels`: pixels of that image as sent (crops are sent at their own size, never rescaled);
- `normalized`: 0-1000 on both axes (Qwen2-VL's grounding convention);
- `resized`: pixels of the image after Qwen2.5-VL's `smart_resize` (the grid DeepEyes and
  Pixel-Reasoner see and answer in), with the processor's min/max pixel bounds.
`map_box` turns it into pixels of the target image, then adds the target crop's offset, so a crop
of a crop is a box of the original image; it clamps to the target's extent and rounds outwards
(x1, y1 floor; x2, y2 ceil). Corners given in the wrong order are taken in order (`inverted`
says so, and the loop records it with the call). A box that is not four finite numbers, has zero
width or height as given, or is empty after clamping, is a `BoxError` (the loop records it and
tells the model).
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

COORDS = ("pixels", "normalized", "resized")
NORMALIZED_SCALE = 1000.0
RESIZE_FACTOR = 28
RESIZE_MIN_PIXELS = 56 * 56
RESIZE_MAX_PIXELS = 28 * 28 * 16384
"""Qwen2.5-VL image processor defaults (min_pixels 3136, max_pixels 12845056)."""


class BoxError(ValueError):
    """A tool call's box that cannot be used; the message is what the model is told."""


@dataclass(frozen=True)
class Region:
    """A box of the original image in integer pixels, [x1, x2) x [y1, y2)."""

    x1: int
    y1: int
    x2: int
    y2: int

    @property
    def width(self) -> int:
        return self.x2 - self.x1

    @property
    def height(self) -> int:
        return self.y2 - self.y1

    @property
    def area(self) -> int:
        return self.width * self.height

    def as_list(self) -> list[int]:
        return [self.x1, self.y1, self.x2, self.y2]


def smart_resize(height: int, width: int, factor: int = RESIZE_FACTOR, min_pixels: int = RESIZE_MIN_PIXELS,
                 max_pixels: int = RESIZE_MAX_PIXELS) -> tuple[int, int]:
    """(height, width) of the image as Qwen2.5-VL's processor resizes it (qwen_vl_utils.smart_resize):
    both multiples of `factor`, the area within [min_pixels, max_pixels], the aspect ratio kept."""
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def grid_size(width: int, height: int, coords: str) -> tuple[float, float]:
    """(width, height) of the coordinate frame the model uses for an image of this size."""
    if coords == "pixels":
        return float(width), float(height)
    if coords == "normalized":
        return NORMALIZED_SCALE, NORMALIZED_SCALE
    if coords == "resized":
        resized_h, resized_w = smart_resize(height, width)
        return float(resized_w), float(resized_h)
    raise ValueError(f"unknown coordinate convention {coords!r}; use one of {', '.join(COORDS)}")


def map_box(box: object, target: Region, coords: str) -> Region:
    """The box a tool call gives, in `coords` of the target image (an original-image `Region`), as a
    clamped region of the original image (module docstring)."""
    if not (isinstance(box, Sequence) and not isinstance(box, str) and len(box) == 4
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in box)):
        raise BoxError(f"bbox_2d must be four numbers [x1, y1, x2, y2], got {box!r}")
    grid_w, grid_h = grid_size(target.width, target.height, coords)
    sx, sy = target.width / grid_w, target.height / grid_h
    x1, y1, x2, y2 = (float(v) for v in box)
    if x1 == x2 or y1 == y2:
        raise BoxError(f"bbox_2d {list(box)} has zero width or height; give [x1, y1, x2, y2] with x1 < x2 and y1 < y2")
    x1, x2 = sorted((x1 * sx, x2 * sx))
    y1, y2 = sorted((y1 * sy, y2 * sy))
    left = min(max(math.floor(x1), 0), target.width)
    top = min(max(math.floor(y1), 0), target.height)
    right = min(max(math.ceil(x2), 0), target.width)
    bottom = min(max(math.ceil(y2), 0), target.height)
    if right <= left or bottom <= top:
        raise BoxError(f"bbox_2d {list(box)} is empty once clamped to the image "
                       f"({target.width}x{target.height} pixels as {coords} coordinates)")
    return Region(target.x1 + left, target.y1 + top, target.x1 + right, target.y1 + bottom)


def inverted(box: Sequence[float]) -> bool:
    """Whether a box's corners are given in the wrong order (x2 < x1 or y2 < y1)."""
    return box[2] < box[0] or box[3] < box[1]


def box_in(region: Region, frame: Region, coords: str) -> list[float]:
    """The inverse of `map_box`: an original-image region in `coords` of the frame image (for
    reference models that must name a box the way a model would)."""
    grid_w, grid_h = grid_size(frame.width, frame.height, coords)
    sx, sy = grid_w / frame.width, grid_h / frame.height
    return [round((region.x1 - frame.x1) * sx, 2), round((region.y1 - frame.y1) * sy, 2),
            round((region.x2 - frame.x1) * sx, 2), round((region.y2 - frame.y1) * sy, 2)]


def crop(rgb: np.ndarray, region: Region) -> np.ndarray:
    """The region's pixels of the original image, exactly (a contiguous copy)."""
    return np.ascontiguousarray(rgb[region.y1:region.y2, region.x1:region.x2])


def noise_like(region: Region, seed: int, key: str) -> np.ndarray:
    """Uniform noise of the region's size, seeded by (seed, key): the visual intervention's crop (4.1)."""
    digest = int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big")
    return np.random.default_rng(digest).integers(0, 256, size=(region.height, region.width, 3), dtype=np.uint8)


def intersection_area(a: Region, b: Region) -> int:
    """Pixels two boxes share (`union_area([a], within=b)`, in constant time)."""
    width = min(a.x2, b.x2) - max(a.x1, b.x1)
    height = min(a.y2, b.y2) - max(a.y1, b.y1)
    return width * height if width > 0 and height > 0 else 0


def union_area(regions: Sequence[Region], within: Region | None = None) -> int:
    """Pixels covered by the union of the regions (clipped to `within` when given), exactly."""
    clipped = []
    for r in regions:
        if within is not None:
            r = Region(max(r.x1, within.x1), max(r.y1, within.y1), min(r.x2, within.x2), min(r.y2, within.y2))
        if r.width > 0 and r.height > 0:
            clipped.append(r)
    if len(clipped) <= 1:
        return clipped[0].area if clipped else 0
    xs = sorted({v for r in clipped for v in (r.x1, r.x2)})
    total = 0
    for left, right in zip(xs, xs[1:]):
        spans = sorted((r.y1, r.y2) for r in clipped if r.x1 <= left and r.x2 >= right)
        covered, end = 0, None
        for top, bottom in spans:
            if end is None or top > end:
                covered += bottom - top
                end = bottom
            elif bottom > end:
                covered += bottom - end
                end = bottom
        total += covered * (right - left)
    return total
