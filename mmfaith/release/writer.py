"""`mmfaith release`: an SPD-Faith build dir in, a Hugging Face dataset repository layout out.

Output (RELEASE_DIR): `README.md` (the dataset card, cards/spd_faith.md filled in, with the Hub
YAML front matter that declares the configs), `data/<config>/test-NNNNN-of-NNNNN.parquet` (one
split, `test`; configs `single`, `multi`, `control` when they have rows; images as `datasets`
Image features with the PNG bytes inside the parquet) and `manifest.json` (mmfaith/release/manifest.py).

Which pairs ship: `include="accepted"` only verified pairs, `include="all"` verified and pending
ones; rejected pairs never; edited pairs of NoDerivs images only with `allow_noderivs`.

Byte-reproducible: rows sorted by id within a config, fixed shard size, fixed parquet writer
settings, no time anywhere, no local path anywhere: the same build and arguments give identical
files (with the same pyarrow version, which the parquet footer names).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith import __version__
from mmfaith.builders.coco_source import NO_DERIVS_MARK
from mmfaith.release.card import CardFacts, render_card
from mmfaith.release.manifest import (FORMAT, MANIFEST, changelog, file_entry, manifest_bytes,
                                               previous_manifest, row_digest)
from mmfaith.errors import MmfaithError
from mmfaith.outdir import staged_folder
from mmfaith.images import sha256_file
from mmfaith.jsonl import read_jsonl
from mmfaith.loaders.spd_faith.rows import features, record_to_row
from mmfaith.schema import schema_errors

CONFIGS = ("single", "multi", "control")
SPLIT = "test"
SHARD_ROWS = 500
"""Rows per parquet shard (about 0.5-1 MB per row at COCO sizes, so shards stay under ~500 MB)."""
ROW_GROUP_ROWS = 100
"""Rows per parquet row group: what `datasets` uses for image data, so the viewer can page it."""
VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
"""NAME or ORG/NAME: the Hub repo the card's loading examples name."""


@dataclass(frozen=True)
class ReleaseRequest:
    """Everything `mmfaith release` takes."""

    build: Path
    out: Path
    name: str
    version: str
    include: str = "accepted"
    allow_noderivs: bool = False
    previous: str | None = None
    shard_rows: int = SHARD_ROWS


@dataclass(frozen=True)
class ReleaseSummary:
    out: Path
    rows: dict[str, int]
    excluded: dict[str, int]


def release_spd_faith(request: ReleaseRequest) -> ReleaseSummary:
    """Write the release of `request.build` into `request.out` (which must be empty or absent).

    The files are written to a hidden sibling folder first and moved into place at the end, so a
    failed release leaves no half-written RELEASE_DIR behind.
    """
    check_request(request)
    build_info = read_build_json(request.build)
    records = _read_records(request.build)
    kept, excluded = select_records(records, request.include, request.allow_noderivs, request.build,
                                    derivative=lambda record: record["subset"] != "control")
    previous = previous_manifest(request.previous) if request.previous else None
    with staged_folder(request.out, "release") as staging:  # after the inputs are checked
        rows = _write_release(request, staging, build_info, records, kept, excluded, previous)
    return ReleaseSummary(out=request.out, rows=rows, excluded=excluded)


def _write_release(request: ReleaseRequest, out: Path, build_info: dict[str, Any], records: list[dict[str, Any]],
                   kept: list[dict[str, Any]], excluded: dict[str, int],
                   previous: dict[str, Any] | None) -> dict[str, int]:
    """Shards, card and manifest into `out`; returns the rows per config."""
    shards = _write_shards(request, out, kept)
    digests = {record["id"]: row_digest(record) for record in kept}
    changes = changelog(previous, digests)
    rows = {config: sum(s["rows"] for s in shards.values() if s["config"] == config) for config in CONFIGS}
    rows = {config: count for config, count in rows.items() if count}
    verification = verification_summary(records, kept)
    provenance = build_provenance(request.build, build_info)
    facts = CardFacts(name=request.name, version=request.version, include=request.include,
                      allow_noderivs=request.allow_noderivs, rows=rows, excluded=excluded, records=kept,
                      build=provenance, verification=verification, changelog=changes,
                      data_files={config: f"data/{config}/{SPLIT}-*.parquet" for config in rows})
    (out / "README.md").write_bytes(render_card(facts).encode("utf-8"))
    files = dict(shards)
    files["README.md"] = file_entry(out / "README.md")
    manifest = {
        "format": FORMAT, "family": "spd-faith", "name": request.name, "version": request.version, "tag": f"v{request.version}",
        "mmfaith_version": __version__, "include": request.include, "allow_noderivs": request.allow_noderivs,
        "split": SPLIT, "configs": rows, "excluded": excluded, "build": provenance,
        "verification": verification, "changelog": changes, "files": files, "rows": digests,
    }
    (out / MANIFEST).write_bytes(manifest_bytes(manifest))
    return rows


def select_records(records: list[dict[str, Any]], include: str, allow_noderivs: bool, build: Path, *,
                   noun: str = "pair", derivative: Callable[[dict[str, Any]], bool] = lambda record: True
                   ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(records that ship, count left out per reason), for every family's release. Rejected never ship;
    pending only with include="all"; a record whose image is a `derivative` (an edited or masked copy;
    SPD-Faith's control pairs and MCoT's items are not) of a NoDerivs image only with allow_noderivs.

    Raises MmfaithError when nothing would ship, naming why (an unverified build needs `--include all`).
    """
    statuses = Counter(record["verification"]["status"] for record in records)
    if include == "accepted" and not statuses["accepted"]:
        raise MmfaithError(
            f"{build}: no {noun} is verified (verification.status: {dict(sorted(statuses.items()))}); "
            "verify the build first, or release it unverified with --include all (the card then says so).")
    excluded: Counter[str] = Counter()
    kept = []
    for record in records:
        status = record["verification"]["status"]
        if status == "rejected" or (status == "pending" and include == "accepted"):
            excluded[status] += 1
        elif derivative(record) and NO_DERIVS_MARK in record["source"]["license"]["name"] and not allow_noderivs:
            excluded["noderivs"] += 1
        else:
            kept.append(record)
    if not kept:
        raise MmfaithError(f"{build}: no {noun} is left to release ({dict(sorted(excluded.items()))} left out).")
    return kept, dict(sorted(excluded.items()))


def check_request(request: ReleaseRequest) -> None:
    if not VERSION.match(request.version):
        raise MmfaithError(f"--version {request.version!r}: use X.Y.Z (semantic version, e.g. 1.0.0); it becomes tag vX.Y.Z.")
    if not NAME.match(request.name):
        raise MmfaithError(f"--name {request.name!r}: use NAME or ORG/NAME with letters, digits, '.', '_' or '-' "
                           "(the Hub repo the card's examples load).")
    if request.include not in ("accepted", "all"):
        raise MmfaithError(f"--include {request.include!r}: use accepted or all.")
    if request.shard_rows < 1:
        raise MmfaithError(f"shard_rows must be 1 or more, not {request.shard_rows}.")
    if request.out.exists() and (not request.out.is_dir() or any(request.out.iterdir())):
        raise MmfaithError(f"--out {request.out}: exists and is not an empty folder; a release is written to a new folder.")


def read_build_json(build: Path) -> dict[str, Any]:
    path = build / "build.json"
    if not path.is_file():
        raise MmfaithError(f"{build}: not an SPD-Faith build dir (no build.json); pass the --out of `mmfaith build spd-faith`.")
    info = json.loads(path.read_text(encoding="utf-8"))
    if info.get("status") != "complete":
        raise MmfaithError(f"{path}: status {info.get('status')!r}; finish the build (re-run its command) before releasing.")
    return info


def _read_records(build: Path) -> list[dict[str, Any]]:
    """Every record of the build, schema-checked, with both image files present and matching their hashes."""
    path = build / "records.jsonl"
    if not path.is_file():
        raise MmfaithError(f"{build}: no records.jsonl; pass the --out of `mmfaith build spd-faith`.")
    records = []
    for number, record in read_jsonl(path):
        errors = schema_errors("spd_faith_pair", record)
        if errors:
            raise MmfaithError(f"{path}:{number}: not an SPD-Faith record: {'; '.join(errors[:3])}")
        for side in ("image_a", "image_b"):
            image = build / record[side]
            if not image.is_file():
                raise MmfaithError(f"{path}:{number}: {side} {image} is missing; restore the build's images.")
            if sha256_file(image) != record[f"{side}_sha256"]:
                raise MmfaithError(f"{path}:{number}: {side} {image} does not match {side}_sha256; the image was changed.")
        records.append(record)
    return records


def _write_shards(request: ReleaseRequest, out: Path, records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Write each config's rows (sorted by id) in shards of `shard_rows`; return their manifest entries."""
    by_config = {config: [r for r in records if r["subset"] == config] for config in CONFIGS}
    return write_shards(out, by_config, features(), request.shard_rows,
                        lambda record: record_to_row(record, (request.build / record["image_a"]).read_bytes(),
                                                     (request.build / record["image_b"]).read_bytes()))


def write_shards(out: Path, by_config: dict[str, list[dict[str, Any]]], row_features: Any, shard_rows: int,
                 to_row: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every family's shards: each config's records sorted by id, `to_row` each, in parquet shards of
    `shard_rows` rows with fixed writer settings (byte-reproducible); returns their manifest entries."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = row_features.arrow_schema
    entries: dict[str, dict[str, Any]] = {}
    for config, records in by_config.items():
        chosen = sorted(records, key=lambda r: r["id"])
        if not chosen:
            continue
        count = -(-len(chosen) // shard_rows)
        (out / "data" / config).mkdir(parents=True, exist_ok=True)
        for index in range(count):
            part = chosen[index * shard_rows:(index + 1) * shard_rows]
            rows = [row_features.encode_example(to_row(record)) for record in part]
            table = pa.Table.from_pylist(rows, schema=schema)
            name = f"data/{config}/{SPLIT}-{index:05d}-of-{count:05d}.parquet"
            pq.write_table(table, out / name, row_group_size=ROW_GROUP_ROWS, compression="zstd",
                           compression_level=3, use_dictionary=False, write_statistics=False,
                           version="2.6", data_page_version="1.0", store_schema=True)
            entries[name] = {**file_entry(out / name), "rows": len(part), "config": config, "split": SPLIT}
    return entries


def verification_summary(all_records: list[dict[str, Any]], kept: list[dict[str, Any]]) -> dict[str, Any]:
    """Status counts in the build and in the release, annotators, and agreement where recorded
    (Fleiss' kappa of the verdicts over the build's pairs with two or more votes, as `annotate status`)."""
    from mmfaith.annotation.status import verdict_agreement

    annotators = sorted({a for r in kept for a in r["verification"].get("annotators", [])})
    multiple = [r for r in kept if len(r["verification"].get("annotators", [])) >= 2]
    fleiss, _ = verdict_agreement(all_records)
    return {
        "build_statuses": dict(sorted(Counter(r["verification"]["status"] for r in all_records).items())),
        "released_statuses": dict(sorted(Counter(r["verification"]["status"] for r in kept).items())),
        "annotators": len(annotators),
        "pairs_with_two_or_more_annotators": len(multiple),
        "agreement": None if fleiss is None else round(fleiss, 6),
    }


def build_provenance(build: Path, info: dict[str, Any]) -> dict[str, Any]:
    """What identifies the build: content hashes and its recipe; no times and no local paths."""
    return {
        "records_sha256": sha256_file(build / "records.jsonl"),
        "build_json_sha256": sha256_file(build / "build.json"),
        "mmfaith_version": info.get("mmfaith_version"),
        "recipe": info.get("recipe"),
        "requested": info.get("requested"),
        "counts": info.get("counts"),
        "environment": info.get("environment"),
        "source": {key: info.get("source", {}).get(key) for key in ("dataset", "split")},
    }
