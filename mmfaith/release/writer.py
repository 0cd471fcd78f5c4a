"""`mmfaith release`: a build dir in, a Hugging Face dataset repository layout out, for any family.

The writer knows no family: what is read, what ships, the rows, their features, the card and the row
check come from the family's `ReleaseDeclaration` (release/declaration.py).

Output (RELEASE_DIR): `README.md` (the family's card, with the Hub YAML front matter that declares
the configs), `data/<config>/test-NNNNN-of-NNNNN.parquet` (one split, `test`; images as `datasets`
Image features with the PNG bytes inside the parquet) and `manifest.json` (release/manifest.py: the
family, build provenance, verification summary, changelog against `--previous`, every file's sha256,
one digest per record).

Which records ship: `include="accepted"` only verified ones, `include="all"` verified and pending ones;
rejected never; derivatives (edited or masked copies) of NoDerivs images only with `allow_noderivs`.

Bounded memory: each shard is written row group by row group (`ROW_GROUP_ROWS` rows), each row's images
read from the build as its group is written, so peak memory does not grow with the shard size.
Byte-reproducible: rows sorted by id within a config, fixed shard size, fixed parquet writer settings,
no time anywhere, no local path anywhere: the same build and arguments give identical files (with the
same pyarrow version, which the parquet footer names).
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
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_file
from mmfaith.outdir import staged_folder
from mmfaith.release.declaration import CardFacts, Record, ReleaseDeclaration, Unit
from mmfaith.release.manifest import MANIFEST, changelog, file_entry, manifest_bytes, previous_manifest, row_digest

SPLIT = "test"
SHARD_ROWS = 500
"""Rows per parquet shard (about 0.5-1 MB per row at COCO sizes, so shards stay under ~500 MB)."""
ROW_GROUP_ROWS = 100
"""Rows per parquet row group: what `datasets` uses for image data, so the viewer can page it; also the
most rows the writer holds at once."""
PARQUET_SETTINGS = {"compression": "zstd", "compression_level": 3, "use_dictionary": False,
                    "write_statistics": False, "version": "2.6", "data_page_version": "1.0", "store_schema": True}
"""The fixed parquet writer settings of every shard (part of byte-reproducibility)."""
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
    """What a release wrote: rows per config, count left out per reason, and how many of the family's
    records (`noun`, plural: "pairs", "questions") it holds."""

    out: Path
    rows: dict[str, int]
    excluded: dict[str, int]
    records: int
    noun: str


def write_release(declaration: ReleaseDeclaration, request: ReleaseRequest,
                  previous: dict[str, Any] | None = None) -> ReleaseSummary:
    """Write the release of `request.build` into `request.out` (which must be empty or absent); the changelog is
    against `previous` (a manifest already read) when given, else against `request.previous`.

    The inputs are all checked first (request, build.json, every record and image, `--previous`); the
    files are then written to a hidden sibling folder and moved into place at the end, so a failed
    release leaves no half-written RELEASE_DIR behind.
    """
    check_request(request)
    build_info = read_build_json(request.build, declaration.family)
    records = declaration.read_build(request.build)
    kept, excluded = declaration.select(records, request.include, request.allow_noderivs, request.build)
    if previous is None and request.previous:
        previous = previous_manifest(request.previous, declaration.family)
    with staged_folder(request.out, "release") as staging:
        shards = write_shards(staging, declaration, request.build, declaration.units(kept), request.shard_rows)
        rows: dict[str, int] = {}
        for entry in shards.values():
            rows[entry["config"]] = rows.get(entry["config"], 0) + entry["rows"]
        digests = {record["id"]: row_digest(record) for record in kept}
        counted = [r for r in kept if declaration.counted(r)]
        verification = verification_summary([r for r in records if declaration.counted(r)], counted)
        facts = CardFacts(name=request.name, version=request.version, include=request.include,
                          allow_noderivs=request.allow_noderivs, rows=rows, excluded=excluded, records=kept,
                          build=build_provenance(request.build, build_info), verification=verification,
                          changelog=changelog(previous, digests),
                          data_files={config: f"data/{config}/{SPLIT}-*.parquet" for config in rows})
        (staging / "README.md").write_bytes(declaration.card(facts).encode("utf-8"))
        manifest = {
            "format": declaration.format, "family": declaration.family, "name": request.name,
            "version": request.version, "tag": f"v{request.version}", "mmfaith_version": __version__,
            "include": request.include, "allow_noderivs": request.allow_noderivs, "split": SPLIT,
            "configs": rows, "excluded": excluded, "build": facts.build, "verification": verification,
            "changelog": facts.changelog, "files": {**shards, "README.md": file_entry(staging / "README.md")},
            "rows": digests,
        }
        (staging / MANIFEST).write_bytes(manifest_bytes(manifest))
    return ReleaseSummary(out=request.out, rows=rows, excluded=excluded, records=len(counted), noun=declaration.noun)


def write_shards(out: Path, declaration: ReleaseDeclaration, build: Path, units: dict[str, list[Unit]],
                 shard_rows: int) -> dict[str, dict[str, Any]]:
    """Each config's units sorted by record id, in parquet shards of `shard_rows` rows (at least one shard per
    config), written row group by row group; returns the shards' manifest entries."""
    import pyarrow as pa

    previous_pool = pa.default_memory_pool()
    pa.set_memory_pool(_returning_pool())
    try:
        return _write_configs(out, declaration, build, units, shard_rows)
    finally:
        pa.set_memory_pool(previous_pool)


def _returning_pool() -> Any:
    """The arrow memory pool the shards are written with: mimalloc where pyarrow has it (its
    `release_unused` hands a written row group's pages back to the system), else the system allocator.

    The writer calls `release_unused` after each column is combined and each row group written. Measured by
    benchmarks/release_memory.py (2,000 rows, two COCO-size images a row): between row groups the process falls
    back to what it held before the first group (about 210 MB; jemalloc with no decay kept about 190 MB more),
    and the peak is about 420 MB against 530 MB.
    """
    import pyarrow as pa

    try:
        return pa.mimalloc_memory_pool()
    except NotImplementedError:
        return pa.system_memory_pool()


def _write_configs(out: Path, declaration: ReleaseDeclaration, build: Path, units: dict[str, list[Unit]],
                   shard_rows: int) -> dict[str, dict[str, Any]]:
    """write_shards' loop: each config's shards into `out`, the pool's unused pages handed back after each row
    group is written; their manifest entries."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    entries: dict[str, dict[str, Any]] = {}
    for config, config_units in units.items():
        features = declaration.features(config)
        chosen = sorted(config_units, key=lambda unit: unit[0]["id"])
        count = max(1, -(-len(chosen) // shard_rows))
        (out / "data" / config).mkdir(parents=True, exist_ok=True)
        for index in range(count):
            part = chosen[index * shard_rows:(index + 1) * shard_rows]
            name = f"data/{config}/{SPLIT}-{index:05d}-of-{count:05d}.parquet"
            with pq.ParquetWriter(out / name, features.arrow_schema, **PARQUET_SETTINGS) as writer:
                for start in range(0, max(len(part), 1), ROW_GROUP_ROWS):
                    writer.write_table(_row_group(declaration, features, build, config,
                                                  part[start:start + ROW_GROUP_ROWS]),
                                       row_group_size=ROW_GROUP_ROWS)
                    pa.default_memory_pool().release_unused()
            entries[name] = {**file_entry(out / name), "rows": len(part), "config": config, "split": SPLIT}
    return entries


def _row_group(declaration: ReleaseDeclaration, features: Any, build: Path, config: str, units: list[Unit]) -> Any:
    """One row group as a single-chunk arrow table (the bytes one `from_pylist` of its rows gives): each row is
    made and converted alone, so at most one row's images are held as Python objects at a time, and the columns
    are combined one by one, so at most one column is held twice."""
    import pyarrow as pa

    schema = features.arrow_schema
    table = pa.Table.from_batches([pa.RecordBatch.from_pylist(
        [features.encode_example(declaration.to_row(build, config, unit))], schema=schema) for unit in units],
        schema=schema)
    for index in range(table.num_columns):  # one column at a time: its chunks are freed as it is combined
        table = table.set_column(index, schema.field(index), table.column(index).combine_chunks())
        pa.default_memory_pool().release_unused()
    return table


def select_records(records: list[Record], include: str, allow_noderivs: bool, build: Path, *,
                   noun: str, derivative: Callable[[Record], bool]) -> tuple[list[Record], dict[str, int]]:
    """(records that ship, count left out per reason), for every family's release. Rejected never ship;
    pending only with include="all"; a record whose image is a `derivative` (an edited or masked copy) of a
    NoDerivs image only with allow_noderivs.

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
    """A one-line MmfaithError naming the flag when the request cannot be released."""
    if not VERSION.match(request.version):
        raise MmfaithError(f"--version {request.version!r}: use X.Y.Z (semantic version, e.g. 1.0.0); it becomes tag vX.Y.Z.")
    if not NAME.match(request.name):
        raise MmfaithError(f"--name {request.name!r}: use NAME or ORG/NAME with letters, digits, '.', '_' or '-' "
                           "(the Hub repo the card's examples load).")
    if request.include not in ("accepted", "all"):
        raise MmfaithError(f"--include {request.include!r}: use accepted or all.")
    if request.shard_rows < 1:
        raise MmfaithError(f"--shard-rows must be 1 or more, not {request.shard_rows}.")
    if request.out.exists() and (not request.out.is_dir() or any(request.out.iterdir())):
        raise MmfaithError(f"--out {request.out}: exists and is not an empty folder; a release is written to a new folder.")


def read_build_json(build: Path, family: str) -> dict[str, Any]:
    """build.json of a complete build dir of `family`; a one-line MmfaithError naming the fix otherwise."""
    path = build / "build.json"
    if not path.is_file():
        raise MmfaithError(f"{build}: not a {family} build dir (no build.json); pass the --out of "
                           f"`mmfaith build {family}`.")
    info = json.loads(path.read_text(encoding="utf-8"))
    if info.get("status") != "complete":
        raise MmfaithError(f"{path}: status {info.get('status')!r}; finish the build (re-run its command) before releasing.")
    return info


def verification_summary(all_records: list[Record], kept: list[Record]) -> dict[str, Any]:
    """Status counts in the build and in the release, annotators, and agreement where recorded
    (Fleiss' kappa of the verdicts over the build's records with two or more votes, as `annotate status`)."""
    from mmfaith.annotation.status import verdict_agreement

    annotators = sorted({a for r in kept for a in r["verification"].get("annotators", [])})
    multiple = [r for r in kept if len(r["verification"].get("annotators", [])) >= 2]
    fleiss, _ = verdict_agreement(all_records)
    return {
        "build_statuses": dict(sorted(Counter(r["verification"]["status"] for r in all_records).items())),
        "released_statuses": dict(sorted(Counter(r["verification"]["status"] for r in kept).items())),
        "annotators": len(annotators),
        "records_with_two_or_more_annotators": len(multiple),
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
