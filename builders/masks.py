"""Masking regions of an image: one operation for CRM's masked variants and SPD-Faith's perturbation.

Contract
--------
A mask is a list of `MaskRegion`s: a pixel rectangle `[x0, y0, x1)` x `[y0, y1)` and optionally a
bool `shape` of that rectangle's size (an instance's segment); without a shape the whole rectangle
is masked. `apply_mask(rgb, regions, style, seed)` returns a new image in which exactly the masked
pixels changed (pixels outside the union of the regions are never touched) and the masked pixels
are filled by the style:

- `black`: (0, 0, 0); `gray`: (128, 128, 128).
- `mean`: the whole original image's mean colour, each channel rounded half to even
  (`np.rint`), the same for every region of the image.
- `noise`: uniform random bytes. For each region in order, one draw
  `rng.integers(0, 256, size=(y1 - y0, x1 - x0, 3), dtype=uint8)` from `np.random.default_rng(seed)`,
  written where the region masks; the same seed gives the same pixels.
- `blur`: the region's rectangle, cut from the original image, smoothed by three passes of a box
  filter (`cv2.blur`, reflected border inside the rectangle, so nothing from outside enters) of
  odd widths `kx = odd(w / 2)`, `ky = odd(h / 2)` (w, h the rectangle's sides, at least 3 px).
  The rule that makes it strong enough that the content cannot be recognised: the three passes
  approximate a Gaussian of sigma about a quarter of each side, so any pattern whose period is at most
  half the rectangle's side keeps at most about 1 % of its contrast (a box of width k passes a
  period-p pattern at |sinc(k/p)|, at most 0.22 for p <= k, cubed 0.0104); what is left is the
  region's average colour and a smooth ramp over it (where the two halves of the region differ),
  never a shape. Tested: black-and-white stripes of any period up to half the side come out within
  3 levels (of 255) of a cubic ramp along the stripes' axis. Overlapping regions: each is
  blurred from the original and written in order (a later region wins where two overlap).

Placement: `pixel_box(bbox, width, height)` turns a float COCO box into the smallest pixel
rectangle that holds it (floor of the start, ceil of the end, clipped to the image), so a box mask
covers every pixel the region touches. `random_boxes` places boxes of given sizes (seeded) inside
the image, none overlapping the evidence grown by a margin nor another placed box, and gives up
with a reason after a bounded number of draws. `blocks` picks a seeded share of a grid of blocks
(SPD-Faith's image perturbation).

Gates: `mask_union` gives the pixels a mask may change; `check_outside_unchanged` and
`check_covers` are the two gates a masked variant passes before it is written.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from mmfaith.builders.gates import outside_changes

MASK_STYLES = ("black", "gray", "mean", "blur", "noise")
FILL_COLORS = {"black": (0, 0, 0), "gray": (128, 128, 128)}
BLUR_PASSES = 3
DEFAULT_MARGIN = 8
DEFAULT_MAX_TRIES = 2000


@dataclass(frozen=True)
class MaskRegion:
    """A pixel rectangle (x0, y0, x1, y1), end-exclusive, and optionally the bool shape masked inside it."""

    x0: int
    y0: int
    x1: int
    y1: int
    shape: np.ndarray | None = None

    @property
    def width(self) -> int:
        return self.x1 - self.x0

    @property
    def height(self) -> int:
        return self.y1 - self.y0

    def xywh(self) -> list[int]:
        """The rectangle as a COCO box [x, y, w, h] (what records store as `mask_boxes`)."""
        return [self.x0, self.y0, self.width, self.height]

    def moved_to(self, x0: int, y0: int) -> MaskRegion:
        """The same rectangle (and shape) with its corner at (x0, y0)."""
        return MaskRegion(x0, y0, x0 + self.width, y0 + self.height, self.shape)

    def pixels(self, height: int, width: int) -> np.ndarray:
        """The bool HxW mask of this region in an image of that size."""
        out = np.zeros((height, width), dtype=bool)
        out[self.y0:self.y1, self.x0:self.x1] = True if self.shape is None else self.shape
        return out


def pixel_box(bbox: Sequence[float], width: int, height: int) -> MaskRegion:
    """The smallest pixel rectangle holding the float box [x, y, w, h], clipped to the image.

    ValueError when nothing of the box lies inside the image.
    """
    x, y, w, h = (float(v) for v in bbox)
    x0, y0 = max(0, math.floor(x)), max(0, math.floor(y))
    x1, y1 = min(width, math.ceil(x + w)), min(height, math.ceil(y + h))
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"box {list(bbox)} lies outside the {width}x{height} image")
    return MaskRegion(x0, y0, x1, y1)


def segment_region(segment: np.ndarray) -> MaskRegion:
    """The region of a bool HxW instance mask: its pixel bounding rectangle with the mask cut to it."""
    ys, xs = np.nonzero(segment)
    if len(xs) == 0:
        raise ValueError("the segment has no pixels")
    x0, y0, x1, y1 = int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1
    return MaskRegion(x0, y0, x1, y1, segment[y0:y1, x0:x1].copy())


def mask_union(regions: Sequence[MaskRegion], height: int, width: int) -> np.ndarray:
    """The bool HxW union of the regions: the only pixels a mask may change."""
    out = np.zeros((height, width), dtype=bool)
    for region in regions:
        window = out[region.y0:region.y1, region.x0:region.x1]
        window |= True if region.shape is None else region.shape
    return out


def mean_color(rgb: np.ndarray) -> tuple[int, int, int]:
    """The image's mean colour, each channel rounded half to even."""
    pixels = rgb.reshape(-1, 3)
    mean = pixels.sum(axis=0, dtype=np.uint64) / len(pixels)  # an integer sum: exact, and 3x faster than mean()
    return tuple(int(v) for v in np.rint(mean))  # type: ignore[return-value]


def _odd(value: float) -> int:
    return max(3, int(value) // 2 * 2 + 1)


def blurred(crop: np.ndarray) -> np.ndarray:
    """A rectangle's pixels under the `blur` style (module docstring: three box passes of half its sides)."""
    height, width = crop.shape[:2]
    kernel = (_odd(width / 2), _odd(height / 2))
    out = crop
    for _ in range(BLUR_PASSES):
        out = cv2.blur(out, kernel, borderType=cv2.BORDER_REFLECT)
    return out


def apply_mask(rgb: np.ndarray, regions: Sequence[MaskRegion], style: str, seed: int = 0) -> np.ndarray:
    """A copy of the HxWx3 uint8 image with the regions filled in `style` (module docstring)."""
    if style not in MASK_STYLES:
        raise ValueError(f"unknown mask style {style!r}; choose from {', '.join(MASK_STYLES)}")
    out = rgb.copy()
    fill = FILL_COLORS.get(style) or (mean_color(rgb) if style == "mean" else None)
    rng = np.random.default_rng(seed) if style == "noise" else None
    for region in regions:
        window = out[region.y0:region.y1, region.x0:region.x1]
        if fill is not None:
            values: np.ndarray | tuple[int, int, int] = np.array(fill, dtype=np.uint8)
        elif rng is not None:
            values = rng.integers(0, 256, size=(region.height, region.width, 3), dtype=np.uint8)
        else:
            values = blurred(rgb[region.y0:region.y1, region.x0:region.x1])
        if region.shape is None:
            window[...] = values
        elif isinstance(values, np.ndarray) and values.ndim == 3:
            window[region.shape] = values[region.shape]
        else:
            window[region.shape] = values
    return out


def _grown(region: MaskRegion, margin: int) -> tuple[int, int, int, int]:
    return region.x0 - margin, region.y0 - margin, region.x1 + margin, region.y1 + margin


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@dataclass(frozen=True)
class Placement:
    """The outcome of `random_boxes`: the placed regions (in the order of the sizes), or why none."""

    regions: tuple[MaskRegion, ...] | None
    reason: str | None = None
    tries: int = 0


def random_boxes(evidence: Sequence[MaskRegion], width: int, height: int, rng: np.random.Generator,
                 margin: int = DEFAULT_MARGIN, max_tries: int = DEFAULT_MAX_TRIES) -> Placement:
    """Place one region of each evidence region's size (and shape) elsewhere in the image.

    Each placed rectangle lies inside the image, overlaps no evidence rectangle grown by `margin`
    pixels, and no other placed rectangle. Larger regions are placed first (they are the hard
    ones); each draw is a uniform corner position from `rng`; after `max_tries` draws in all the
    placement fails with a reason naming the region that found no place.
    """
    blocked = [_grown(region, margin) for region in evidence]
    placed: dict[int, MaskRegion] = {}
    tries = 0
    order = sorted(range(len(evidence)), key=lambda i: (-evidence[i].width * evidence[i].height, i))
    for index in order:
        region = evidence[index]
        if region.width > width or region.height > height:
            return Placement(None, f"a {region.width}x{region.height} box does not fit in the image", tries)
        while True:
            if tries >= max_tries:
                return Placement(None, f"no place for a {region.width}x{region.height} box outside the evidence "
                                       f"(margin {margin} px) and the other boxes after {max_tries} tries", tries)
            tries += 1
            x0 = int(rng.integers(0, width - region.width + 1))
            y0 = int(rng.integers(0, height - region.height + 1))
            candidate = region.moved_to(x0, y0)
            box = _grown(candidate, 0)
            if any(_overlaps(box, other) for other in blocked):
                continue
            if any(_overlaps(box, _grown(other, 0)) for other in placed.values()):
                continue
            placed[index] = candidate
            break
    return Placement(tuple(placed[i] for i in range(len(evidence))), None, tries)


def blocks(width: int, height: int, ratio: float, rng: np.random.Generator, grid: int = 8) -> list[MaskRegion]:
    """A seeded `round(ratio * grid**2)` of the grid x grid blocks tiling the image, in row-major order.

    Block edges are at `round(i * width / grid)` (and the same for rows), so the blocks tile the
    image exactly and the masked share is the chosen share of the pixels up to one pixel per edge.
    """
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"a block ratio is in [0, 1], not {ratio}")
    count = round(ratio * grid * grid)
    chosen = sorted(int(i) for i in rng.permutation(grid * grid)[:count])
    xs = [round(i * width / grid) for i in range(grid + 1)]
    ys = [round(i * height / grid) for i in range(grid + 1)]
    return [MaskRegion(xs[i % grid], ys[i // grid], xs[i % grid + 1], ys[i // grid + 1]) for i in chosen
            if xs[i % grid + 1] > xs[i % grid] and ys[i // grid + 1] > ys[i // grid]]


def check_outside_unchanged(original: np.ndarray, masked: np.ndarray, regions: Sequence[MaskRegion]) -> str | None:
    """Gate: None when no pixel outside the regions differs, else the reason."""
    changed, largest = outside_changes(original, masked, mask_union(regions, *original.shape[:2]))
    return None if changed == 0 else f"{changed} pixels outside the mask changed (by up to {largest})"


def check_covers(mask: Sequence[MaskRegion], evidence: Sequence[MaskRegion], height: int, width: int) -> str | None:
    """Gate: None when the mask's union holds every pixel of every evidence region, else the reason."""
    union = mask_union(mask, height, width)
    for number, region in enumerate(evidence):
        missed = int((region.pixels(height, width) & ~union).sum())
        if missed:
            return f"evidence region {number} has {missed} pixels the mask leaves visible"
    return None


def check_apart(placed: Sequence[MaskRegion], evidence: Sequence[MaskRegion], margin: int) -> str | None:
    """Gate for random masks: None when no placed rectangle touches the evidence grown by `margin`
    or another placed rectangle, else the reason."""
    for number, region in enumerate(placed):
        box = _grown(region, 0)
        if any(_overlaps(box, _grown(other, margin)) for other in evidence):
            return f"random box {number} {region.xywh()} comes within {margin} px of the evidence"
        if any(_overlaps(box, _grown(other, 0)) for other in placed[number + 1:]):
            return f"random box {number} {region.xywh()} overlaps another random box"
    return None


@dataclass(frozen=True)
class BlockPerturbation:
    """SPD-Faith's image perturbation (its section 4.4: random blocks masked at 25/50/75/100 %): a seeded
    `round(ratio * grid**2)` of a grid x grid tiling (`blocks`) filled in `style`, the same blocks for
    every image that shares a `key` (both images of a pair)."""

    ratio: float
    seed: int = 0
    grid: int = 8
    style: str = "black"

    @property
    def transform(self) -> str:
        """How a perturbed image was made, as recorded with it (meta.images[].transform)."""
        return f"mask blocks ratio {self.ratio:g} grid {self.grid} style {self.style} seed {self.seed}"

    def provenance(self) -> dict[str, object]:
        return {"kind": "blocks", "ratio": self.ratio, "seed": self.seed, "grid": self.grid, "style": self.style}

    def apply(self, rgb: np.ndarray, key: str) -> np.ndarray:
        """The image with this perturbation's blocks for `key` masked."""
        digest = hashlib.sha256(f"{self.seed}:{key}:blocks".encode("utf-8")).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "big"))
        height, width = rgb.shape[:2]
        return apply_mask(rgb, blocks(width, height, self.ratio, rng, self.grid), self.style, self.seed)
