"""preview.png of a CRM build: per item, the original with its evidence regions outlined, then every masked
variant (specific, then random, in each style) with its mask boxes outlined; under them the question, the
options and the gold answer, and the variants' names in the order shown.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from mmfaith.builders.preview_sheet import cell, first_records, outline, thumbnail, write_sheet

THUMB_WIDTH = 200
CELLS_PER_ROW = 1
TEXT_LINES = 4
EVIDENCE_COLOR = (40, 170, 60)
MODE_COLORS = {"specific": (220, 20, 60), "random": (30, 110, 255)}
KEY = ("Each item: the original (left), then its masked variants. Outlines:",
       {"evidence region (original)": EVIDENCE_COLOR, "specific mask (hides the evidence)": MODE_COLORS["specific"],
        "random mask (same sizes, elsewhere)": MODE_COLORS["random"]})


def _lines(record: dict[str, Any]) -> list[str]:
    options = {o["label"]: o["text"] for o in record.get("options") or []}
    gold = f"{record['answer']} ({options[record['answer']]})" if record["answer"] in options else record["answer"]
    return [f"{record['id']}  {record.get('question_type') or ''}",
            f"Q: {record['question']}",
            "   ".join(f"{label}. {text}" for label, text in options.items()) + f"   gold: {gold}",
            "shown: original | " + " | ".join(f"{v['mode']}-{v['style']}" for v in record["variants"])]


def _cell(build_dir: Path, record: dict[str, Any]) -> Image.Image:
    original, scale = thumbnail(build_dir / record["image_original"], THUMB_WIDTH)
    draw = ImageDraw.Draw(original)
    for region in record["regions"]:
        outline(draw, region["bbox"], scale, EVIDENCE_COLOR)
    thumbs = [original]
    for variant in record["variants"]:
        thumb, scale = thumbnail(build_dir / variant["image"], THUMB_WIDTH)
        draw = ImageDraw.Draw(thumb)
        for box in variant.get("mask_boxes") or []:
            outline(draw, box, scale, MODE_COLORS.get(variant["mode"], (0, 0, 0)))
        thumbs.append(thumb)
    return cell(thumbs, _lines(record), TEXT_LINES, 40 * len(thumbs))


def write_preview(build_dir: Path, max_items: int) -> Path:
    """Write build_dir/preview.png from the first `max_items` records; returns its path."""
    cells = [_cell(build_dir, record) for record in first_records(build_dir, max_items)]
    return write_sheet(build_dir, cells, CELLS_PER_ROW, "no items in this build", KEY)
