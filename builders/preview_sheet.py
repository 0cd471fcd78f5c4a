"""preview.png, one look for every family: a contact sheet a person checks a build by at a glance.

A cell is a row of thumbnails (the family draws its boxes on them) over a few lines of text; cells fill
the sheet's rows, under an optional key strip that says what the outline colours mean. The family's
preview module chooses the images, boxes and words; everything about laying them out is here.

- `first_records(build_dir, n)`: the first n records of records.jsonl (none when it is missing).
- `thumbnail(path, width)`: the image scaled to `width`, and the scale (boxes in source pixels times it).
- `outline(draw, bbox, scale, color, dashed=False)`: an [x, y, w, h] box in source pixels, outlined.
- `cell(thumbs, lines, text_lines, chars)`: thumbnails side by side over `text_lines` lines of text.
- `key_strip(width, title, entries)`: a title line and a swatch per (label, colour).
- `write_sheet(build_dir, cells, per_row, empty, key)`: build_dir/preview.png (PNG written atomically).
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from mmfaith.jsonl import read_jsonl, write_atomic

LINE_HEIGHT = 12
PADDING = 6
BACKGROUND = (235, 235, 235)
KEY_HEIGHT = 2 * LINE_HEIGHT + PADDING
Color = tuple[int, int, int]


def first_records(build_dir: Path, n: int) -> list[dict[str, Any]]:
    """The first `n` records of build_dir/records.jsonl, in file order ([] when there is none)."""
    path = build_dir / "records.jsonl"
    records: list[dict[str, Any]] = []
    if path.exists() and n > 0:
        for _, record in read_jsonl(path):
            records.append(record)
            if len(records) >= n:
                break
    return records


def thumbnail(path: Path, width: int) -> tuple[Image.Image, float]:
    """The image at `path` as RGB, scaled to `width` pixels wide; and the scale."""
    with Image.open(path) as image:
        scale = width / image.width
        return image.convert("RGB").resize((width, max(1, round(image.height * scale))), Image.Resampling.BILINEAR), scale


def outline(draw: ImageDraw.ImageDraw, bbox: list[float], scale: float, color: Color, dashed: bool = False) -> None:
    """Outline an [x, y, w, h] box given in source pixels on a thumbnail of that `scale`."""
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


def cell(thumbs: list[Image.Image], lines: list[str], text_lines: int, chars: int) -> Image.Image:
    """The thumbnails side by side (PADDING apart) over the first `text_lines` lines, each cut at `chars`."""
    width = sum(t.width for t in thumbs) + PADDING * (len(thumbs) - 1)
    height = max(t.height for t in thumbs)
    out = Image.new("RGB", (width, height + text_lines * LINE_HEIGHT + PADDING), "white")
    x = 0
    for thumb in thumbs:
        out.paste(thumb, (x, 0))
        x += thumb.width + PADDING
    draw = ImageDraw.Draw(out)
    font = ImageFont.load_default()
    for row, text in enumerate(lines[:text_lines]):
        draw.text((2, height + 2 + row * LINE_HEIGHT), text[:chars], fill=(0, 0, 0), font=font)
    return out


def key_strip(width: int, title: str, entries: dict[str, Color]) -> Image.Image:
    """The strip above the cells: `title`, then a swatch in each colour with its label."""
    strip = Image.new("RGB", (width, KEY_HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(strip)
    font = ImageFont.load_default()
    draw.text((PADDING, 2), title, fill=(0, 0, 0), font=font)
    x, y = PADDING, 2 + LINE_HEIGHT + 2
    for label, color in entries.items():
        draw.rectangle([x, y, x + 18, y + 9], outline=color, width=2)
        draw.text((x + 24, y - 1), label, fill=(0, 0, 0), font=font)
        x += 24 + int(draw.textlength(label, font=font)) + 3 * PADDING
    return strip


def write_sheet(build_dir: Path, cells: list[Image.Image], per_row: int, empty: str,
                key: tuple[str, dict[str, Color]] | None = None) -> Path:
    """Lay the cells out `per_row` to a row (under the key strip when `key` gives its title and entries; the
    `empty` text when there is no cell) and write build_dir/preview.png; returns its path."""
    cell_width = max((c.width for c in cells), default=300)
    rows = [cells[i:i + per_row] for i in range(0, len(cells), per_row)] or [[]]
    heights = [max((c.height for c in row), default=2 * LINE_HEIGHT) for row in rows]
    width = per_row * (cell_width + PADDING) + PADDING
    top = KEY_HEIGHT if key is not None else 0
    sheet = Image.new("RGB", (width, top + sum(heights) + PADDING * (len(rows) + 1)), BACKGROUND)
    if key is not None:
        sheet.paste(key_strip(width, *key), (0, 0))
    y = top + PADDING
    for row, row_height in zip(rows, heights):
        for column, image in enumerate(row):
            sheet.paste(image, (PADDING + column * (cell_width + PADDING), y))
        y += row_height + PADDING
    if not cells:
        ImageDraw.Draw(sheet).text((PADDING, top + PADDING), empty, fill=(0, 0, 0))
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG", compress_level=1)  # a picture for people: speed over size
    path = build_dir / "preview.png"
    write_atomic(path, buffer.getvalue())
    return path
