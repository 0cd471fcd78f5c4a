"""preview.png of an MCoT build: per question, the image with its target boxes outlined and named (the
regions a zoom-in should find), and under it the question, the options and the gold answer.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from mmfaith.builders.preview_sheet import cell, first_records, outline, thumbnail, write_sheet

THUMB_WIDTH = 320
CELLS_PER_ROW = 3
TEXT_LINES = 4
CHARS = 58
TARGET_COLORS = ((255, 140, 0), (0, 190, 220))  # the first target (the subject), then the others
KEY = ("Each question: its image, the target boxes a zoom-in should find outlined and named. Outlines:",
       {"first target (the subject)": TARGET_COLORS[0], "other targets (e.g. a relation's reference)": TARGET_COLORS[1]})


def _lines(record: dict[str, Any]) -> list[str]:
    options = {o["label"]: o["text"] for o in record["options"]}
    gold = f"{record['answer']} ({options[record['answer']]})" if record["answer"] in options else record["answer"]
    question = textwrap.wrap(f"Q: {record['question']}", CHARS)
    return [f"{record['id']}  {record['category']}", *question[:TEXT_LINES - 2],
            "   ".join(f"{label}. {text}" for label, text in options.items()) + f"   gold: {gold}"]


def _cell(build_dir: Path, record: dict[str, Any]) -> Image.Image:
    thumb, scale = thumbnail(build_dir / record["image"], THUMB_WIDTH)
    draw = ImageDraw.Draw(thumb)
    font = ImageFont.load_default()
    for index, target in enumerate(record["targets"]):
        if target.get("bbox") is None:
            continue
        color = TARGET_COLORS[min(index, 1)]
        outline(draw, target["bbox"], scale, color)
        x, y = target["bbox"][0] * scale, target["bbox"][1] * scale
        draw.text((x, max(0.0, y - 11)), str(target.get("label") or ""), fill=color, font=font)
    return cell([thumb], _lines(record), TEXT_LINES, CHARS)


def write_preview(build_dir: Path, max_items: int) -> Path:
    """Write build_dir/preview.png from the first `max_items` records; returns its path."""
    cells = [_cell(build_dir, record) for record in first_records(build_dir, max_items)]
    return write_sheet(build_dir, cells, CELLS_PER_ROW, "no questions in this build", KEY)
