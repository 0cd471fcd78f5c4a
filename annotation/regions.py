"""Boxes as Label Studio rectangle regions: the pre-filled results a task is imported with.

Label Studio draws a pre-filled region itself, over the image the task already shows, so a family
that wants its boxes outlined for people needs no helper image (no decode, draw or encode at push).
A `readonly` region is shown and cannot be moved, resized or deleted (the labeling UI's result field
`readonly`, Label Studio 1.23); an editable one is a box people may correct (CRM's evidence).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image


def rectangle(region_id: str, control: str, image: str, bbox: Sequence[float], size: tuple[int, int], label: str,
              readonly: bool = False) -> dict[str, Any]:
    """One `rectanglelabels` result: `bbox` [x, y, w, h] in pixels of an image of `size` (width, height),
    as the percentages Label Studio stores, on the Image tag `image`, from the RectangleLabels `control`,
    labelled `label` (a Label of that control). `readonly` adds the field that locks the region."""
    width, height = size
    region = {"id": region_id, "from_name": control, "to_name": image, "type": "rectanglelabels",
              "original_width": width, "original_height": height, "image_rotation": 0,
              "value": {"x": bbox[0] / width * 100, "y": bbox[1] / height * 100, "width": bbox[2] / width * 100,
                        "height": bbox[3] / height * 100, "rotation": 0, "rectanglelabels": [label]}}
    return {**region, "readonly": True} if readonly else region


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) of an image file, read from its header (the pixels are not decoded)."""
    with Image.open(path) as image:
        return image.size
