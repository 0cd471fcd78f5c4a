"""preview.png: a contact sheet of the first pairs of a build, edited regions outlined.

Each cell shows image_a (original) and image_b (edited) side by side; every difference is outlined
in its type's color (color: orange, remove: red, position: blue), before on the left and after on
the right (a removal keeps its old box, dashed, on the right), with the descriptions underneath. A key
above the cells says what the colours mean.
"""
from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from mmfaith.jsonl import read_jsonl, write_atomic

THUMB_WIDTH = 240
CELLS_PER_ROW = 2
TEXT_LINES = 6
LINE_HEIGHT = 12
PADDING = 6
TYPE_COLORS = {"color": (255, 140, 0), "remove": (220, 20, 60), "position": (30, 110, 255)}


def _serial_map(function: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    return [function(item) for item in items]


def _box(draw: ImageDraw.ImageDraw, bbox: list[float], scale: float, color: tuple[int, int, int],
         dashed: bool = False) -> None:
    x, y, w, h = (v * scale for v in bbox)
    if not dashed:
        draw.rectangle([x, y, x + w, y + h], outline=color, width=2)
        return
    for start in range(0, int(w), 8):
        draw.line([x + start, y, min(x + start + 4, x + w), y], fill=color, width=2)
        draw.line([x + start, y + h, min(x + start + 4, x + w), y + h], fill=color, width=2)
    for start in range(0, int(h), 8):
        draw.line([x, y + start, x, min(y + start + 4, y + h)], fill=color, width=2)
        draw.line([x + w, y + start, x + w, min(y + start + 4, y + h)], fill=color, width=2)


def _count(n: int) -> str:
    """"1 difference", "3 differences"."""
    return f"{n} difference" if n == 1 else f"{n} differences"


KEY_HEIGHT = 2 * LINE_HEIGHT + PADDING
KEY_LABELS = {"color": "colour change", "remove": "removal (dashed on the right: where it was)", "position": "move"}


def _key(width: int) -> Image.Image:
    """The strip above the cells: what the outline colours mean and which side is which."""
    strip = Image.new("RGB", (width, KEY_HEIGHT), (235, 235, 235))
    draw = ImageDraw.Draw(strip)
    font = ImageFont.load_default()
    draw.text((PADDING, 2), "Each pair: original (left), edited (right). Outlines:", fill=(0, 0, 0), font=font)
    x, y = PADDING, 2 + LINE_HEIGHT + 2
    for kind, label in KEY_LABELS.items():
        draw.rectangle([x, y, x + 18, y + 9], outline=TYPE_COLORS[kind], width=2)
        draw.text((x + 24, y - 1), label, fill=(0, 0, 0), font=font)
        x += 24 + int(draw.textlength(label, font=font)) + 3 * PADDING
    return strip


def _cell(task: tuple[Path, dict]) -> Image.Image:
    build_dir, record = task
    halves = []
    for key in ("image_a", "image_b"):
        with Image.open(build_dir / record[key]) as image:
            scale = THUMB_WIDTH / image.width
            thumb = image.convert("RGB").resize((THUMB_WIDTH, round(image.height * scale)), Image.Resampling.BILINEAR)
        draw = ImageDraw.Draw(thumb)
        for diff in record["differences"]:
            color = TYPE_COLORS[diff["type"]]
            if key == "image_a":
                _box(draw, diff["bbox_before"], scale, color)
            elif diff["bbox_after"] is None:
                _box(draw, diff["bbox_before"], scale, color, dashed=True)
            else:
                _box(draw, diff["bbox_after"], scale, color)
        halves.append(thumb)
    height = max(h.height for h in halves)
    cell = Image.new("RGB", (2 * THUMB_WIDTH + PADDING, height + TEXT_LINES * LINE_HEIGHT + PADDING), "white")
    cell.paste(halves[0], (0, 0))
    cell.paste(halves[1], (THUMB_WIDTH + PADDING, 0))
    draw = ImageDraw.Draw(cell)
    font = ImageFont.load_default()
    tier = record["difficulty"] or ""
    lines = [f"{record['id']}  {record['subset']} {tier}  ({_count(record['num_differences'])})"]
    lines += [d["description"] for d in record["differences"]] or ["no difference (control pair)"]
    for row, text in enumerate(lines[:TEXT_LINES]):
        draw.text((2, height + 2 + row * LINE_HEIGHT), text[:80], fill=(0, 0, 0), font=font)
    return cell


def write_preview(build_dir: Path, max_pairs: int,
                  map_cells: Callable[[Callable[[Any], Any], list[Any]], list[Any]] = _serial_map) -> Path:
    """Write build_dir/preview.png from the first `max_pairs` records; returns its path.

    `map_cells` draws the cells (a worker pool's map draws them in parallel).
    """
    records_path = build_dir / "records.jsonl"
    records = []
    if records_path.exists():
        for _, record in read_jsonl(records_path):
            records.append(record)
            if len(records) >= max_pairs:
                break
    cells = map_cells(_cell, [(build_dir, record) for record in records])
    cell_w = 2 * THUMB_WIDTH + PADDING
    rows = [cells[i:i + CELLS_PER_ROW] for i in range(0, len(cells), CELLS_PER_ROW)] or [[]]
    row_heights = [max((c.height for c in row), default=LINE_HEIGHT * 2) for row in rows]
    width = CELLS_PER_ROW * (cell_w + PADDING) + PADDING
    sheet = Image.new("RGB", (width, KEY_HEIGHT + sum(row_heights) + PADDING * (len(rows) + 1)), (235, 235, 235))
    sheet.paste(_key(width), (0, 0))
    y = KEY_HEIGHT + PADDING
    for row, row_height in zip(rows, row_heights):
        for column, cell in enumerate(row):
            sheet.paste(cell, (PADDING + column * (cell_w + PADDING), y))
        y += row_height + PADDING
    if not cells:
        ImageDraw.Draw(sheet).text((PADDING, KEY_HEIGHT + PADDING), "no pairs in this build", fill=(0, 0, 0))
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG", compress_level=1)  # a picture for people: speed over size
    path = build_dir / "preview.png"
    write_atomic(path, buffer.getvalue())
    return path
