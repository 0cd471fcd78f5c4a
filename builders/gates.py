"""Automatic quality gates on an edited image.

Visibility: the mean CIE76 color difference (delta E*ab) between the original and the edited image
over the edit's evidence region (the object's mask for a recolor or a removal; old and new mask for
a move) must reach a threshold (default 12; a just-noticeable difference is about 2.3, and 12 is a
change people see at a glance on a natural image).

Isolation: no pixel outside the union of the edits' allowed regions (the mask for a recolor, the mask
grown by the inpainting dilation for a removal, plus the pasted mask grown by the blend radius for
a move) may differ from the original at all.
"""
from __future__ import annotations

import numpy as np

from mmfaith.builders.colors import rgb_to_lab

DEFAULT_MIN_DELTA_E = 12.0


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
