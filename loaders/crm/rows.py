"""The row format of a CRM release: one parquet row per (item, variant), and back.

Contract: a release has one config per variant "{mode}-{style}" (split `test`); a row holds the
masked image (`image`) and the original (`image_original`) as `datasets` Image features with the
PNG bytes inside the parquet, the question, options and answer, the evidence `regions`, the
variant's `mask_boxes`, and `record`: the item's whole record as canonical JSON, from which
`rows_to_records` rebuilds every item exactly (the rows of all configs of one id give one record).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes
from mmfaith.jsonl import canonical_json, write_atomic
from mmfaith.records import Fields, Shared, keep_fields


def features() -> Any:
    """The `datasets.Features` of a release row (imported lazily: `datasets` is heavy)."""
    from datasets import Features, Image, List, Value

    string = Value("string")
    return Features({
        "id": string, "question": string, "question_type": string,
        "options": List({"label": string, "text": string}), "answer": string,
        "image": Image(), "image_original": Image(), "mode": string, "style": string, "mask_shape": string,
        "mask_boxes": List(List(Value("int64"))),
        "regions": List({"id": string, "bbox": List(Value("float64")), "label": string}),
        "license": string, "attribution": string, "record": string,
    })


def record_to_row(record: dict[str, Any], variant: dict[str, Any], masked: bytes, original: bytes) -> dict[str, Any]:
    """The release row of one variant of a (schema-checked) record, with its two PNG files' bytes."""
    return {
        "id": record["id"], "question": record["question"], "question_type": record["question_type"],
        "options": record["options"], "answer": record["answer"],
        "image": {"bytes": masked, "path": variant["image"]},
        "image_original": {"bytes": original, "path": record["image_original"]},
        "mode": variant["mode"], "style": variant["style"], "mask_shape": variant["mask_shape"],
        "mask_boxes": variant["mask_boxes"], "regions": record["regions"],
        "license": record["source"]["license"]["name"], "attribution": record["source"]["attribution"],
        "record": canonical_json(record),
    }


def rows_to_records(rows: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, bytes]]]:
    """(record, {path in the record: image bytes}) per id, in first-seen order; checks every image's hash."""
    found: dict[str, tuple[dict[str, Any], dict[str, bytes]]] = {}
    for row in rows:
        record, images = found.setdefault(row["id"], (json.loads(row["record"]), {}))
        images[row["image_original"]["path"]] = row["image_original"]["bytes"]
        images[row["image"]["path"]] = row["image"]["bytes"]
    for record, images in found.values():
        wanted = {record["image_original"]: record["image_original_sha256"]}
        wanted |= {v["image"]: v["sha256"] for v in record["variants"]}
        for path, data in images.items():
            if sha256_bytes(data) != wanted.get(path):
                raise MmfaithError(f"item {record['id']}: image {path} does not hash to its record's sha256; the "
                                   "release is damaged (run `mmfaith verify` on it).")
    return list(found.values())


def open_crm_release(folder: Path, manifest: dict[str, Any], cache_dir: Path | None = None,
                     fields: Fields | None = None) -> Any:
    """A CRM release folder as a CrmDataset: images written once to the cache (by sha256), items whose
    every variant was released; with `fields`, each record keeps only those (mmfaith/records.py)."""
    import pyarrow.parquet as pq

    from mmfaith.cache import cache_dir as default_cache_dir
    from mmfaith.images import ImageRef
    from mmfaith.images import sha256_file
    from mmfaith.loaders.crm.dataset import CrmDataset, CrmItem, check_crm_record, variant_name

    rows = (row for name in sorted(n for n, e in manifest["files"].items() if "config" in e)
            for row in pq.read_table(folder / name).to_pylist())
    images_dir = (cache_dir or default_cache_dir()) / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    items, seen, shared = [], set(), Shared()
    for record, images in rows_to_records(rows):
        check_crm_record(record, f"{folder} item {record['id']}", seen)
        paths = {}
        for path, data in images.items():
            cached = images_dir / f"{sha256_bytes(data)}.png"
            if not cached.is_file():
                write_atomic(cached, data)
            paths[path] = cached
        refs = {variant_name(v): ImageRef(v["sha256"], paths[v["image"]]) for v in record["variants"]
                if v["image"] in paths}
        original = ImageRef(record["image_original_sha256"], paths[record["image_original"]])
        items.append(CrmItem(keep_fields(record, fields, shared), original, refs))
    return CrmDataset(items, f"release:{manifest['name']}",
                      f"{manifest['tag']}+{sha256_file(folder / 'manifest.json')[:16]}")
