"""Cutting an official SPD-Faith "merged image" canvas into its original and edited halves.

The official GitHub layout stores each pair as one JPEG canvas with no separator: the original
on top and the edited image below for landscape sources, side by side (original left) for
portrait ones (facts: /work/shared/data/spd_official/README.md; 19 of the repository's 20 example
canvases are stacked). Which one a canvas is is not recorded, so it is found from the pixels:
the two halves of the right cut are the same photograph except for a few local edits, the two
halves of the wrong cut are different parts of two photographs.

Contract of `best_cut(rgb)`:
- candidates are top/bottom (first half = rows [0, h), second = rows [H - h, H), h = H // 2; an odd
  middle row is dropped) and left/right (the same on columns);
- a candidate's `agreement` is the share of pixels whose largest channel difference between the
  halves is at most AGREE_LEVEL (24 of 255: JPEG noise stays under it, an edit does not);
- the cut with the higher agreement wins; the canvas is refused (CutRefused, with the reason)
  when the winner's agreement is below MIN_AGREEMENT (the halves stay far apart: not a pair, or
  a layout this module does not know) or beats the other orientation by less than MIN_MARGIN
  (ambiguous).
Measured on the three real canvases: the right (top/bottom) cut agrees on 0.96, 0.95 and 0.85 of
the pixels, the wrong one on 0.62, 0.16 and 0.16.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mmfaith.errors import MmfaithError

AGREE_LEVEL = 24
MIN_AGREEMENT = 0.70
MIN_MARGIN = 0.10
ORIENTATIONS = ("top/bottom", "left/right")


class CutRefused(MmfaithError):
    """A canvas whose halves do not agree under any cut; the message is the reason."""


@dataclass(frozen=True)
class Cut:
    """The chosen cut: `first` is the original (top or left), `second` the edited half."""

    orientation: str
    at: int
    dropped: int
    agreement: float
    other_agreement: float
    first: np.ndarray
    second: np.ndarray

    def as_json(self) -> dict[str, Any]:
        """What a record's source keeps of the cut (no pixels)."""
        return {"orientation": self.orientation, "at": self.at, "dropped_middle": self.dropped,
                "agreement": round(self.agreement, 4), "other_agreement": round(self.other_agreement, 4)}


def halves(rgb: np.ndarray, orientation: str) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(first, second, size of a half, dropped middle lines) of a canvas cut one way."""
    axis = 0 if orientation == "top/bottom" else 1
    total = rgb.shape[axis]
    half = total // 2
    first = rgb[:half] if axis == 0 else rgb[:, :half]
    second = rgb[total - half:] if axis == 0 else rgb[:, total - half:]
    return first, second, half, total - 2 * half


def agreement(first: np.ndarray, second: np.ndarray) -> float:
    """Share of pixels whose largest channel difference is at most AGREE_LEVEL (0 for empty halves)."""
    if first.size == 0:
        return 0.0
    diff = np.abs(first.astype(np.int16) - second.astype(np.int16)).max(axis=2)
    return float((diff <= AGREE_LEVEL).mean())


def best_cut(rgb: np.ndarray) -> Cut:
    """The cut of an HxWx3 canvas where its halves agree best (module docstring); CutRefused otherwise."""
    scored = []
    for orientation in ORIENTATIONS:
        first, second, at, dropped = halves(rgb, orientation)
        scored.append((agreement(first, second), orientation, first, second, at, dropped))
    scored.sort(key=lambda s: -s[0])
    (best, orientation, first, second, at, dropped), other = scored[0], scored[1][0]
    shown = f"{orientation} agreement {best:.2f}, {scored[1][1]} {other:.2f}"
    if best < MIN_AGREEMENT:
        raise CutRefused(f"the halves stay far apart under every cut ({shown}; a pair needs {MIN_AGREEMENT:.2f}): "
                         "not an original/edited canvas of the official layout")
    if best - other < MIN_MARGIN:
        raise CutRefused(f"ambiguous cut ({shown}; the best must lead by {MIN_MARGIN:.2f})")
    return Cut(orientation, at, dropped, best, other, np.ascontiguousarray(first), np.ascontiguousarray(second))
