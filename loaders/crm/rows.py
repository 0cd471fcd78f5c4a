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
from mmfaith.release.manifest import VerifyReport, open_release, row_digest, verify_release
from mmfaith.schema import schema_errors

RELEASE_FORMAT = "mmfaith-crm-release/1"


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


def check_release_row(where: str, entry: dict[str, Any], row: dict[str, Any], digests: dict[str, str]) -> list[str]:
    """Problems of one CRM release row (for `mmfaith verify`): its record readable and valid, its variant
    the shard's config, both images hashing to the record's sha256s, its digest the manifest's."""
    try:
        record = json.loads(row["record"])
        variant = next(v for v in record["variants"] if f"{v['mode']}-{v['style']}" == f"{row['mode']}-{row['style']}")
    except (KeyError, TypeError, ValueError, StopIteration) as exc:
        return [f"{where}: cannot be read as a CRM record and variant ({exc!r})."]
    problems = []
    errors = schema_errors("crm_item", record)
    if errors:
        problems.append(f"{where}: not a valid CRM record: {'; '.join(errors[:3])}")
    if f"{row['mode']}-{row['style']}" != entry["config"]:
        problems.append(f"{where}: variant {row['mode']}-{row['style']} in config {entry['config']!r}.")
    for column, digest in (("image", variant["sha256"]), ("image_original", record["image_original_sha256"])):
        if sha256_bytes((row[column] or {}).get("bytes") or b"") != digest:
            problems.append(f"{where}: {column} bytes do not hash to the record's sha256.")
    if digests.get(record["id"]) != row_digest(record):
        problems.append(f"{where}: record digest differs from the manifest's rows entry.")
    return problems


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


def open_crm_release(folder: Path, cache_dir: Path | None = None, verify: bool = True,
                     fields: Fields | None = None) -> Any:
    """A CRM release folder as a CrmDataset: images written once to the cache (by sha256), items whose
    every variant was released; with `fields`, each record keeps only those (mmfaith/records.py)."""
    import pyarrow.parquet as pq

    from mmfaith.cache import cache_dir as default_cache_dir
    from mmfaith.evaluators.image_payload import ImageRef
    from mmfaith.images import sha256_file
    from mmfaith.loaders.crm.dataset import CrmDataset, CrmItem, check_crm_record, variant_name

    manifest = open_release(folder, RELEASE_FORMAT, verify)
    if manifest["format"] != RELEASE_FORMAT:
        raise MmfaithError(f"{folder / 'manifest.json'}: format {manifest['format']!r} is not {RELEASE_FORMAT!r}.")
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


def verify_crm_release(folder: Path) -> VerifyReport:
    """`mmfaith verify` of a CRM release: every hash of the manifest (release.manifest.verify_release) and every
    row of every variant config checked by `check_release_row`."""
    return verify_release(folder, RELEASE_FORMAT, check_release_row)
