"""preview.png: a contact sheet of the first pairs of a VFaith build.

Each cell shows the original image (left) and the edited one (right) with the edited cue outlined
(where it went, for a moved cue),
then the question, the options, and both gold answers (original and edited), so a reader checks at
a glance that the edit makes the planned option correct.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from mmfaith.jsonl import read_jsonl, write_atomic

THUMB_WIDTH = 300
CELLS_PER_ROW = 2
LINE_HEIGHT = 12
TEXT_LINES = 5
PADDING = 6
CUE_COLOR = (255, 140, 0)


def _lines(record: dict[str, Any]) -> list[str]:
    options = {o["label"]: o["text"] for o in record["options"]}
    return [
        f"{record['id']}  {record['category']} / {record['build'].get('template') or 'cue-driven'}",
        f"Q: {record['question']}",
        "   ".join(f"{label}. {text}" for label, text in options.items()),
        f"original: {record['answer_original']} ({options.get(record['answer_original'], record['answer_original'])})"
        f"   edited: {record['answer_edited']} ({options.get(record['answer_edited'], record['answer_edited'])})",
        f"edit: {record['edit']['instruction']}",
    ]


def _cell(build_dir: Path, record: dict[str, Any]) -> Image.Image:
    cue = next((c for c in record["visual_cues"] if c["id"] == record["edit"]["cue_id"]), None)
    halves = []
    for key in ("image_original", "image_edited"):
        with Image.open(build_dir / record[key]) as image:
            scale = THUMB_WIDTH / image.width
            thumb = image.convert("RGB").resize((THUMB_WIDTH, round(image.height * scale)), Image.Resampling.BILINEAR)
        if cue is not None and cue["bbox"] is not None:
            x, y, w, h = (v * scale for v in cue["bbox"])
            offset = (record["build"].get("plan") or {}).get("offset")
            if key == "image_edited" and offset:  # a moved cue is outlined where it went
                x, y = x + offset[0] * scale, y + offset[1] * scale
            ImageDraw.Draw(thumb).rectangle([x, y, x + w, y + h], outline=CUE_COLOR, width=2)
        halves.append(thumb)
    height = max(h.height for h in halves)
    cell = Image.new("RGB", (2 * THUMB_WIDTH + PADDING, height + TEXT_LINES * LINE_HEIGHT + PADDING), "white")
    cell.paste(halves[0], (0, 0))
    cell.paste(halves[1], (THUMB_WIDTH + PADDING, 0))
    draw = ImageDraw.Draw(cell)
    font = ImageFont.load_default()
    for row, text in enumerate(_lines(record)[:TEXT_LINES]):
        draw.text((2, height + 2 + row * LINE_HEIGHT), text[:100], fill=(0, 0, 0), font=font)
    return cell


def write_preview(build_dir: Path, max_pairs: int) -> Path:
    """Write build_dir/preview.png from the first `max_pairs` records (original left, edited right, the edited
    cue outlined on both); returns its path."""
    records = []
    path = build_dir / "records.jsonl"
    if path.exists():
        for _, record in read_jsonl(path):
            records.append(record)
            if len(records) >= max_pairs:
                break
    cells = [_cell(build_dir, record) for record in records]
    cell_w = 2 * THUMB_WIDTH + PADDING
    rows = [cells[i:i + CELLS_PER_ROW] for i in range(0, len(cells), CELLS_PER_ROW)] or [[]]
    heights = [max((c.height for c in row), default=2 * LINE_HEIGHT) for row in rows]
    sheet = Image.new("RGB", (CELLS_PER_ROW * (cell_w + PADDING) + PADDING, sum(heights) + PADDING * (len(rows) + 1)),
                      (235, 235, 235))
    y = PADDING
    for row, row_height in zip(rows, heights):
        for column, cell in enumerate(row):
            sheet.paste(cell, (PADDING + column * (cell_w + PADDING), y))
        y += row_height + PADDING
    if not cells:
        ImageDraw.Draw(sheet).text((PADDING, PADDING), "no pairs in this build", fill=(0, 0, 0))
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG", compress_level=1)
    out = build_dir / "preview.png"
    write_atomic(out, buffer.getvalue())
    return out
