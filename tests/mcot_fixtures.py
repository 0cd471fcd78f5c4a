"""Small copies of V* Bench and HR-Bench in their published Hugging Face layouts (docs/mcot.md names them).

The real data cannot be fetched here; these fixtures follow the layouts field for field:
- V* folder: `test_questions.jsonl` (image, text with "(A) ..." lines and the instruction line,
  label, category, question_id) beside `direct_attributes/` and `relative_position/` JPEGs, each
  with its `<name>.json` annotation (`bbox` [[x, y, w, h]], `target_object`, options gold first).
- V* parquet (the lmms-lab/vstar-bench mirror): the same fields with the image embedded as a
  `datasets` Image struct.
- HR-Bench parquet and TSV: index, question, answer, A-D, category, cycle_category, image (base64
  JPEG; in the TSV a short image value is the index of the row whose image it reuses).
Every image is a textured background with one small coloured square (the target, about 0.5 % of
the image) and, for relative-position questions, a second one.
"""
from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

COLORS = {"red": (220, 30, 30), "blue": (30, 60, 220), "green": (30, 170, 50), "yellow": (235, 220, 40)}


def scene(seed: int, width: int, height: int, squares: list[tuple[int, int, int, str]]) -> bytes:
    """A JPEG: smooth noise with coloured squares (x, y, side, colour)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(90, 160, size=(height // 8 + 1, width // 8 + 1, 3), dtype=np.uint8)
    pixels = np.kron(base, np.ones((8, 8, 1), dtype=np.uint8))[:height, :width].copy()
    for x, y, side, color in squares:
        pixels[y:y + side, x:x + side] = COLORS[color]
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def vstar_rows(count: int = 6) -> list[dict]:
    """V* rows with their images and annotations: alternating direct_attributes and relative_position."""
    rows = []
    names = list(COLORS)
    for number in range(count):
        width, height = 640, 480
        x, y = 60 + 70 * number, 80 + 40 * number
        color = names[number % 4]
        if number % 2 == 0:
            category, folder = "direct_attributes", "direct_attributes"
            options = [color, *[c for c in names if c != color][:3]]
            question = "What is the color of the square?"
            squares = [(x, y, 24, color)]
            targets = [[x, y, 24, 24]]
            objects = ["square"]
        else:
            category, folder = "relative_position", "relative_position"
            other_x = x + 200 if x < 300 else x - 200
            side = "left" if x < other_x else "right"
            options = [side, "right" if side == "left" else "left"]
            question = f"Is the {color} square on the left or right side of the {names[(number + 1) % 4]} square?"
            squares = [(x, y, 24, color), (other_x, y + 30, 24, names[(number + 1) % 4])]
            targets = [[x, y, 24, 24], [other_x, y + 30, 24, 24]]
            objects = [f"{color} square", f"{names[(number + 1) % 4]} square"]
        # the published text lists the options in a shuffled order; the gold is options[0] (the annotation's order)
        shown = options[1:] + options[:1] if number % 3 else options
        letters = "ABCD"
        text = "\n".join([question, *(f"({letters[i]}) {o}" for i, o in enumerate(shown)),
                          "Answer with the option's letter from the given choices directly."])
        rows.append({"image": f"{folder}/sa_{number}.jpg", "text": text, "label": letters[shown.index(options[0])],
                     "category": category, "question_id": number,
                     "_jpeg": scene(number, width, height, squares),
                     "_annotation": {"question": question, "options": options, "target_object": objects,
                                     "bbox": targets}})
    return rows


def write_vstar_folder(folder: Path, count: int = 6) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for row in vstar_rows(count):
        image = folder / row["image"]
        image.parent.mkdir(parents=True, exist_ok=True)
        image.write_bytes(row["_jpeg"])
        image.with_suffix(".json").write_text(json.dumps(row["_annotation"]))
        lines.append(json.dumps({k: v for k, v in row.items() if not k.startswith("_")}))
    (folder / "test_questions.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def write_vstar_parquet(path: Path, count: int = 6, rename: dict[str, str] | None = None) -> Path:
    """The lmms-lab mirror: one parquet, image embedded as {bytes, path}; `rename` renames columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rename = rename or {}
    rows = [{rename.get("text", "text"): r["text"], rename.get("label", "label"): r["label"],
             rename.get("category", "category"): r["category"], rename.get("question_id", "question_id"): str(r["question_id"]),
             rename.get("image", "image"): {"bytes": r["_jpeg"], "path": r["image"].split("/")[-1]}}
            for r in vstar_rows(count)]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def hrbench_rows(count: int = 4) -> list[dict]:
    """HR-Bench rows: single (one target) and cross (two) questions on 1600x1200 images (4K stands in)."""
    rows = []
    names = list(COLORS)
    for number in range(count):
        color = names[number % 4]
        options = [color, *[c for c in names if c != color][:3]]
        squares = [(300 + 150 * number, 400, 40, color)]
        category = "single" if number % 2 == 0 else "cross"
        if category == "cross":
            squares.append((1200, 900 - 100 * number, 40, names[(number + 2) % 4]))
        jpeg = scene(100 + number, 1600, 1200, squares)
        rows.append({"index": number, "question": "What is the color of the square near the middle?",
                     "answer": "ABCD"[number % 4], **{"ABCD"[(number % 4 + i) % 4]: options[i] for i in range(4)},
                     "category": category, "cycle_category": f"c{number // 2}",
                     "image": base64.b64encode(jpeg).decode("ascii")})
    return rows


def write_hrbench(folder: Path, size: str = "4k", count: int = 4, tsv: bool = False) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rows = hrbench_rows(count)
    if tsv:
        rows[-1] = {**rows[-1], "image": str(rows[0]["index"])}  # reuses row 0's image (VLMEvalKit convention)
        header = list(rows[0])
        lines = ["\t".join(header), *("\t".join(str(row[k]) for k in header) for row in rows)]
        path = folder / f"hr_bench_{size}.tsv"
        path.write_text("\n".join(lines) + "\n")
        return path
    path = folder / f"hr_bench_{size}.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path
