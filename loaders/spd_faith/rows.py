"""The row format of an SPD-Faith release: one parquet row per pair record, and back.

Contract: `record_to_row(record, image_a_bytes, image_b_bytes)` and `row_to_record(row)` are
inverse on every record valid against schemas/spd_faith_pair.schema.json (the record read back is
equal to the one written, field for field). Rows follow `FEATURES` (the `datasets` features kept in
the parquet schema metadata): images are `Image()` features with the PNG bytes inside the parquet
and the record's relative path beside them; the gold (`differences`) and the source are typed
columns; `verification` and `build` (free-form provenance) are canonical JSON strings. Three
columns are derived for convenience and ignored on the way back: `license` (a short id such as
CC-BY-NC-2.0), `license_url` and `attribution`.
"""
from __future__ import annotations

import json
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.jsonl import canonical_json
from mmfaith.licenses import license_id

SOURCE_KEYS = ("dataset", "split", "image_id", "file_name", "license", "flickr_url", "coco_url", "attribution",
               "official")
"""`official` (records imported from the official SPD-Faith-Bench) is stored as canonical JSON, null otherwise."""
DIFFERENCE_KEYS = ("type", "category", "category_id", "source_ann_id", "color_before", "color_after",
                   "bbox_before", "bbox_after", "area_ratio", "description")


def features() -> Any:
    """The `datasets.Features` of a release row (imported lazily: `datasets` is heavy)."""
    from datasets import Features, Image, List, Value

    string, int64, float64 = Value("string"), Value("int64"), Value("float64")
    difference = {"type": string, "category": string, "category_id": int64, "source_ann_id": int64,
                  "color_before": string, "color_after": string, "bbox_before": List(float64),
                  "bbox_after": List(float64), "area_ratio": float64, "description": string}
    source = {"dataset": string, "split": string, "image_id": int64, "file_name": string,
              "license": {"id": int64, "name": string, "url": string},
              "flickr_url": string, "coco_url": string, "attribution": string, "official": string}
    return Features({
        "id": string, "image_a": Image(), "image_b": Image(), "subset": string, "difficulty": string,
        "num_differences": int64, "differences": List(difference), "instance_count": int64, "caption": string,
        "image_a_sha256": string, "image_b_sha256": string, "license": string, "license_url": string,
        "attribution": string, "source": source, "verification": string, "build": string,
    })


def record_to_row(record: dict[str, Any], image_a: bytes, image_b: bytes) -> dict[str, Any]:
    """The release row of one pair record (already schema-checked) and its two PNG files' bytes.

    Raises MmfaithError naming the record and field when the record carries a source field the
    release format has no column for (extend `features()` and this function together).
    """
    extra = sorted(set(record["source"]) - set(SOURCE_KEYS))
    if extra:
        raise MmfaithError(f"record {record['id']}: source field(s) {', '.join(extra)} have no release column; "
                           "add them to loaders/spd_faith/rows.py features() before releasing.")
    source = record["source"]
    return {
        "id": record["id"],
        "image_a": {"bytes": image_a, "path": record["image_a"]},
        "image_b": {"bytes": image_b, "path": record["image_b"]},
        "subset": record["subset"],
        "difficulty": record["difficulty"],
        "num_differences": record["num_differences"],
        "differences": [{key: difference.get(key) for key in DIFFERENCE_KEYS} for difference in record["differences"]],
        "instance_count": record["instance_count"],
        "caption": record["caption"],
        "image_a_sha256": record["image_a_sha256"],
        "image_b_sha256": record["image_b_sha256"],
        "license": license_id(source["license"]),
        "license_url": source["license"]["url"],
        "attribution": source["attribution"],
        "source": {**{key: source[key] for key in SOURCE_KEYS if key != "official"},
                   "official": canonical_json(source["official"]) if "official" in source else None},
        "verification": canonical_json(record["verification"]),
        "build": canonical_json(record["build"]),
    }


def row_to_record(row: dict[str, Any]) -> dict[str, Any]:
    """The pair record of a release row read with undecoded images ({"bytes", "path"} dicts)."""
    differences = []
    for difference in row["differences"]:
        item = dict(difference)
        if item.get("source_ann_id") is None:
            item.pop("source_ann_id", None)
        differences.append(item)
    return {
        "id": row["id"],
        "image_a": row["image_a"]["path"],
        "image_b": row["image_b"]["path"],
        "image_a_sha256": row["image_a_sha256"],
        "image_b_sha256": row["image_b_sha256"],
        "subset": row["subset"],
        "difficulty": row["difficulty"],
        "num_differences": row["num_differences"],
        "differences": differences,
        "instance_count": row["instance_count"],
        "caption": row["caption"],
        "source": _source(row["source"]),
        "verification": json.loads(row["verification"]),
        "build": json.loads(row["build"]),
    }


def _source(source: dict[str, Any]) -> dict[str, Any]:
    """A row's source column back as the record's source (`official` parsed, dropped when null)."""
    record = dict(source, license=dict(source["license"]))
    official = record.pop("official", None)
    if official is not None:
        record["official"] = json.loads(official)
    return record
