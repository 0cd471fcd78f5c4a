"""The row formats of a VFaith release: config `pairs` (one row per pair record) and `perception`, and back.

Contract: `pair_to_row` / `row_to_pair` and `perception_to_row` / `row_to_perception` are inverse on
every record valid against schemas/vfaith_pair.schema.json and vfaith_perception.schema.json. Images
are `Image()` features with the PNG bytes inside the parquet and the record's relative path beside
them; the question, options, answers, category and cues are typed columns; `edit`, `source`,
`verification` and `build` (free-form provenance) are canonical JSON strings. `license`,
`license_url` and `attribution` are derived columns for convenience, ignored on the way back.
"""
from __future__ import annotations

import json
from typing import Any

from mmfaith.jsonl import canonical_json
from mmfaith.licenses import license_id

JSON_COLUMNS = ("edit", "source", "verification", "build")


def pair_features() -> Any:
    """The `datasets.Features` of a `pairs` row."""
    from datasets import Features, Image, List, Value

    string = Value("string")
    return Features({
        "id": string, "category": string, "question": string, "question_type": string,
        "options": List({"label": string, "text": string}), "answer_original": string, "answer_edited": string,
        "image_original": Image(), "image_edited": Image(), "image_original_sha256": string,
        "image_edited_sha256": string,
        "visual_cues": List({"id": string, "text": string, "bbox": List(Value("float64"))}),
        "license": string, "license_url": string, "attribution": string,
        **{column: string for column in JSON_COLUMNS},
    })


def perception_features() -> Any:
    """The `datasets.Features` of a `perception` row."""
    from datasets import Features, Image, List, Value

    string = Value("string")
    return Features({
        "id": string, "pair_id": string, "image": Image(), "image_sha256": string, "question": string,
        "options": List({"label": string, "text": string}), "answers": List(string),
        "answers_original": List(string), "cue_before": string, "cue_after": string,
        "license": string, "license_url": string, "attribution": string,
        "source": string, "verification": string, "build": string,
    })


def _licence(record: dict[str, Any]) -> dict[str, Any]:
    source = record["source"]
    return {"license": license_id(source["license"]), "license_url": source["license"]["url"],
            "attribution": source["attribution"]}


def pair_to_row(record: dict[str, Any], original: bytes, edited: bytes) -> dict[str, Any]:
    """The release row of one pair record (already schema-checked) and its two PNG files' bytes."""
    row = {key: record[key] for key in ("id", "category", "question", "question_type", "options", "answer_original",
                                         "answer_edited", "image_original_sha256", "image_edited_sha256",
                                         "visual_cues")}
    row.update(image_original={"bytes": original, "path": record["image_original"]},
               image_edited={"bytes": edited, "path": record["image_edited"]}, **_licence(record),
               **{column: canonical_json(record[column]) for column in JSON_COLUMNS})
    return row


def row_to_pair(row: dict[str, Any]) -> dict[str, Any]:
    """The pair record of a release row read with undecoded images ({"bytes", "path"} dicts)."""
    record = {key: row[key] for key in ("id", "category", "question", "question_type", "answer_original",
                                         "answer_edited", "image_original_sha256", "image_edited_sha256")}
    record.update(options=[dict(option) for option in row["options"]],
                  visual_cues=[{"id": c["id"], "text": c["text"], "bbox": None if c["bbox"] is None else list(c["bbox"])}
                               for c in row["visual_cues"]],
                  image_original=row["image_original"]["path"], image_edited=row["image_edited"]["path"],
                  **{column: json.loads(row[column]) for column in JSON_COLUMNS})
    return record


def perception_to_row(record: dict[str, Any], image: bytes) -> dict[str, Any]:
    """The release row of one perception item and its (edited) image's bytes."""
    row = {key: record[key] for key in ("id", "pair_id", "image_sha256", "question", "options", "answers",
                                         "answers_original", "cue_before", "cue_after")}
    row.update(image={"bytes": image, "path": record["image"]}, **_licence(record),
               source=canonical_json(record["source"]), build=canonical_json(record["build"]),
               verification=canonical_json(record.get("verification", {"status": "pending"})))
    return row


def row_to_perception(row: dict[str, Any]) -> dict[str, Any]:
    """The perception item of a release row read with undecoded images."""
    record = {key: row[key] for key in ("id", "pair_id", "image_sha256", "question", "cue_before", "cue_after")}
    record.update(options=[dict(option) for option in row["options"]], answers=list(row["answers"]),
                  answers_original=list(row["answers_original"]), image=row["image"]["path"],
                  source=json.loads(row["source"]), build=json.loads(row["build"]),
                  verification=json.loads(row["verification"]))
    return record
