"""Where a bool mask's pixels lie, so mask work runs on the object's box instead of the whole image.

Used by the edits, the gates and the planners' geometry: each computes on `grown_box(mask, reach)`,
the mask's box grown by the farthest any pixel of the result depends on, so the numbers are the
same bits as over the whole image, at the cost of the object's size.
"""
from __future__ import annotations

import numpy as np

Box = tuple[slice, slice]


def mask_extent(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) rows and columns holding the mask's pixels, inclusive; None when empty."""
    rows = np.flatnonzero(mask.any(axis=1))
    if rows.size == 0:
        return None
    columns = np.flatnonzero(mask[rows[0]:rows[-1] + 1].any(axis=0))
    return int(rows[0]), int(rows[-1]), int(columns[0]), int(columns[-1])


def grown_box(mask: np.ndarray, reach: int) -> Box | None:
    """The mask's box grown by `reach` pixels on every side (clipped to the image); None when empty."""
    extent = mask_extent(mask)
    if extent is None:
        return None
    top, bottom, left, right = extent
    height, width = mask.shape[:2]
    return (slice(max(0, top - reach), min(height, bottom + reach + 1)),
            slice(max(0, left - reach), min(width, right + reach + 1)))
