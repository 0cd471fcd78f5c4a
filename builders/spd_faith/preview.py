"""preview.png: a contact sheet of the first pairs of a build, edited regions outlined.

Each cell shows image_a (original) and image_b (edited) side by side; every difference is outlined
in its type's color (color: orange, remove: red, position: blue), before on the left and after on
the right (a removal keeps its old box, dashed, on the right), with the descriptions underneath. A key
above the cells says what the colours mean.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from mmfaith.builders.preview_sheet import cell, first_records, outline, thumbnail, write_sheet

THUMB_WIDTH = 240
CELLS_PER_ROW = 2
TEXT_LINES = 6
TYPE_COLORS = {"color": (255, 140, 0), "remove": (220, 20, 60), "position": (30, 110, 255)}
KEY_LABELS = {"color": "colour change", "remove": "removal (dashed on the right: where it was)", "position": "move"}


def _serial_map(function: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    return [function(item) for item in items]


def _count(n: int) -> str:
    """"1 difference", "3 differences"."""
    return f"{n} difference" if n == 1 else f"{n} differences"


def _cell(task: tuple[Path, dict]) -> Image.Image:
    build_dir, record = task
    halves = []
    for key in ("image_a", "image_b"):
        thumb, scale = thumbnail(build_dir / record[key], THUMB_WIDTH)
        draw = ImageDraw.Draw(thumb)
        for diff in record["differences"]:
            color = TYPE_COLORS[diff["type"]]
            if key == "image_a":
                outline(draw, diff["bbox_before"], scale, color)
            elif diff["bbox_after"] is None:
                outline(draw, diff["bbox_before"], scale, color, dashed=True)
            else:
                outline(draw, diff["bbox_after"], scale, color)
        halves.append(thumb)
    tier = record["difficulty"] or ""
    lines = [f"{record['id']}  {record['subset']} {tier}  ({_count(record['num_differences'])})"]
    lines += [d["description"] for d in record["differences"]] or ["no difference (control pair)"]
    return cell(halves, lines, TEXT_LINES, 80)


def write_preview(build_dir: Path, max_pairs: int,
                  map_cells: Callable[[Callable[[Any], Any], list[Any]], list[Any]] = _serial_map) -> Path:
    """Write build_dir/preview.png from the first `max_pairs` records; returns its path.

    `map_cells` draws the cells (a worker pool's map draws them in parallel).
    """
    cells = map_cells(_cell, [(build_dir, record) for record in first_records(build_dir, max_pairs)])
    key = ("Each pair: original (left), edited (right). Outlines:",
           {label: TYPE_COLORS[kind] for kind, label in KEY_LABELS.items()})
    return write_sheet(build_dir, cells, CELLS_PER_ROW, "no pairs in this build", key)
