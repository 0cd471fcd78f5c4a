"""preview.png: a contact sheet of the first pairs of a VFaith build.

Each cell shows the original image (left) and the edited one (right) with the edited cue outlined
(where it went, for a moved cue; on the photo only, for a cue cropped out of frame),
then the question, the options, and both gold answers (original and edited), so a reader checks at
a glance that the edit makes the planned option correct.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from mmfaith.builders.preview_sheet import cell, first_records, outline, thumbnail, write_sheet
from mmfaith.builders.vfaith.presentation import source_photo

THUMB_WIDTH = 300
CELLS_PER_ROW = 2
TEXT_LINES = 5
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
        thumb, scale = thumbnail(build_dir / record[key], THUMB_WIDTH)
        cropped_out = record["edit"].get("operation") == "crop" and key != source_photo(record)
        if cue is not None and cue["bbox"] is not None and not cropped_out:  # a cropped-out cue is off the frame
            x, y, w, h = cue["bbox"]
            outline(ImageDraw.Draw(thumb), [x, y, w, h], scale, CUE_COLOR)
        halves.append(thumb)
    return cell(halves, _lines(record), TEXT_LINES, 100)


def write_preview(build_dir: Path, max_pairs: int) -> Path:
    """Write build_dir/preview.png from the first `max_pairs` records (original left, edited right, the edited
    cue outlined on both); returns its path."""
    cells = [_cell(build_dir, record) for record in first_records(build_dir, max_pairs)]
    return write_sheet(build_dir, cells, CELLS_PER_ROW, "no pairs in this build")
