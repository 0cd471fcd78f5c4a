"""The row format of an MCoT release: one parquet row per item record, and back.

Contract: `record_to_row(record, image_bytes)` and `row_to_record(row)` are inverse on every record
valid against schemas/mcot_item.schema.json. The image is an `Image()` feature with the PNG bytes
inside the parquet; question, options, answer, category and targets are typed columns (what a
plain `datasets.load_dataset` user reads); `source`, `verification` and `build` are canonical JSON
strings (free-form provenance that differs per source).
"""
from __future__ import annotations

import json
from typing import Any

from mmfaith.jsonl import canonical_json

JSON_COLUMNS = ("source", "verification", "build")


def features() -> Any:
    """The `datasets.Features` of a release row (imported lazily: `datasets` is heavy)."""
    from datasets import Features, Image, List, Value

    string, int64, float64 = Value("string"), Value("int64"), Value("float64")
    return Features({
        "id": string, "image": Image(), "question": string, "options": List({"label": string, "text": string}),
        "answer": string, "category": string, "image_sha256": string, "width": int64, "height": int64,
        "targets": List({"bbox": List(float64), "label": string, "id": string}),
        "source": string, "verification": string, "build": string,
    })


def record_to_row(record: dict[str, Any], image: bytes) -> dict[str, Any]:
    """The release row of one (schema-checked) record and its PNG bytes."""
    return {
        "id": record["id"], "image": {"bytes": image, "path": record["image"]}, "question": record["question"],
        "options": [dict(option) for option in record["options"]], "answer": record["answer"],
        "category": record["category"], "image_sha256": record["image_sha256"], "width": record["width"],
        "height": record["height"],
        "targets": [{"bbox": list(t["bbox"]), "label": t["label"], "id": t.get("id")} for t in record["targets"]],
        **{name: canonical_json(record[name]) for name in JSON_COLUMNS},
    }


def row_to_record(row: dict[str, Any]) -> dict[str, Any]:
    """The record of a release row read with undecoded images ({"bytes", "path"} dicts)."""
    targets = []
    for target in row["targets"]:
        kept = {"bbox": [float(v) for v in target["bbox"]], "label": target["label"]}
        if target.get("id") is not None:
            kept["id"] = target["id"]
        targets.append(kept)
    return {
        "id": row["id"], "image": row["image"]["path"], "question": row["question"],
        "options": [{"label": o["label"], "text": o["text"]} for o in row["options"]], "answer": row["answer"],
        "category": row["category"], "image_sha256": row["image_sha256"], "width": row["width"],
        "height": row["height"], "targets": targets, **{name: json.loads(row[name]) for name in JSON_COLUMNS},
    }
