"""Typed views of SPD-Faith rows: a pair with its two PIL images and its differences as dataclasses.

Two row formats are read: mmfaith's release rows (loaders/spd_faith/rows.py; also what
`load_spd_faith` makes from a build dir) and rows of the official GitHub JSONL layout with the
canvas decoded (`qid`, one `image` canvas, original on top or left, `modifications[{type,
category}]`, `question`), adapted by `official_pair_view`. `spd_pairs(dataset)` picks the adapter
from the columns. The official release itself (the Hub's image1 / image2 / differences, or the
JSONL with its canvas files) is imported into a build dir with
`mmfaith build spd-faith --from-official`, which keeps its tiers, boxes and captions.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from PIL import Image

from mmfaith.errors import MmfaithError
from mmfaith.loaders.spd_faith.difference_types import TYPE_SYNONYMS

OFFICIAL_COLUMNS = {"qid", "image", "modifications"}

@dataclass(frozen=True)
class Difference:
    """One edit. The official release gives only `type` and `category`; the rest are None there."""

    type: str
    category: str
    category_id: int | None = None
    color_before: str | None = None
    color_after: str | None = None
    bbox_before: tuple[float, float, float, float] | None = None
    bbox_after: tuple[float, float, float, float] | None = None
    area_ratio: float | None = None
    description: str | None = None


@dataclass(frozen=True)
class PairView:
    """One pair: `image_a` the original, `image_b` the edited image (RGB PIL images)."""

    id: str
    subset: str
    difficulty: str | None
    image_a: Image.Image
    image_b: Image.Image
    differences: list[Difference]
    license: str | None = None
    question: str | None = None

    @property
    def num_differences(self) -> int:
        return len(self.differences)


def _bbox(value: list[float] | None) -> tuple[float, float, float, float] | None:
    return None if value is None else (float(value[0]), float(value[1]), float(value[2]), float(value[3]))


def pair_view(row: dict[str, Any]) -> PairView:
    """The view of an mmfaith release row whose images are decoded (PIL), as `datasets` returns them."""
    differences = [Difference(type=d["type"], category=d["category"], category_id=d["category_id"],
                              color_before=d["color_before"], color_after=d["color_after"],
                              bbox_before=_bbox(d["bbox_before"]), bbox_after=_bbox(d["bbox_after"]),
                              area_ratio=d["area_ratio"], description=d["description"]) for d in row["differences"]]
    return PairView(id=row["id"], subset=row["subset"], difficulty=row["difficulty"],
                    image_a=row["image_a"].convert("RGB"), image_b=row["image_b"].convert("RGB"),
                    differences=differences, license=row["license"])


def split_canvas(canvas: Image.Image) -> tuple[Image.Image, Image.Image]:
    """(original, edited) halves of an official canvas, cut where the halves agree best: top/bottom
    (the official layout for landscape sources) or left/right (portrait sources); see
    builders/spd_faith/canvas_cut.py. Raises MmfaithError when no cut makes a pair."""
    import numpy as np

    from mmfaith.builders.spd_faith.canvas_cut import best_cut

    cut = best_cut(np.asarray(canvas.convert("RGB")))
    return Image.fromarray(cut.first), Image.fromarray(cut.second)


def official_pair_view(row: dict[str, Any]) -> PairView:
    """The view of a row of the official GitHub JSONL layout whose `image` is a decoded canvas: the
    canvas cut where its halves agree best (split_canvas), differences with type (normalised to
    color / remove / position) and category only, subset from their count (1 single, 2+ multi, 0
    control), no difficulty.

    The JSONL itself names canvas files, and the Hub release (image1 / image2 / differences) has
    tiers, boxes and descriptions that this view cannot hold: import either with
    `mmfaith build spd-faith --from-official SOURCE --out BUILD_DIR` and load the build dir.
    Raises MmfaithError naming the qid and field when a modification has no type or category, or
    when `image` is a file name rather than a decoded image.
    """
    if not isinstance(row.get("image"), Image.Image):
        raise MmfaithError(f"official SPD-Faith row qid {row.get('qid')}: `image` is {type(row.get('image')).__name__}, "
                           "not a decoded canvas; import the JSONL with `mmfaith build spd-faith --from-official "
                           "FILE.jsonl --out BUILD_DIR` and load BUILD_DIR instead.")
    differences = []
    for index, modification in enumerate(row["modifications"] or []):
        kind, category = modification.get("type"), modification.get("category")
        if not kind or not category:
            raise MmfaithError(f"official SPD-Faith row qid {row['qid']}: modifications[{index}] needs type and "
                               f"category, found {modification!r}.")
        differences.append(Difference(type=TYPE_SYNONYMS.get(str(kind).strip().lower(), str(kind).strip().lower()),
                                      category=str(category).strip().lower()))
    subset = "control" if not differences else "single" if len(differences) == 1 else "multi"
    image_a, image_b = split_canvas(row["image"])
    return PairView(id=str(row["qid"]), subset=subset, difficulty=None, image_a=image_a, image_b=image_b,
                    differences=differences, question=row.get("question"))


def spd_pairs(rows: Iterable[dict[str, Any]]) -> Iterator[PairView]:
    """Typed views of a `datasets.Dataset` (or any iterable of rows) in either format."""
    columns = getattr(rows, "column_names", None)
    official = columns is not None and OFFICIAL_COLUMNS <= set(columns)
    for row in rows:
        if columns is None:
            official = OFFICIAL_COLUMNS <= set(row)
        yield official_pair_view(row) if official else pair_view(row)
