"""`mmfaith release` of a VFaith build dir: a Hugging Face dataset repository layout.

Output (RELEASE_DIR): `README.md` (cards/vfaith.md filled in, with the Hub YAML front matter that
declares the configs `pairs` and `perception`), `data/<config>/test-NNNNN-of-NNNNN.parquet` (one
split, `test`; images as `datasets` Image features with the PNG bytes inside) and `manifest.json`
(format `mmfaith-vfaith-release/1`: files with sha256, rows' digests, build provenance, verification).

Which rows ship: `include="accepted"` only verified pairs, `include="all"` verified and pending
ones; rejected pairs never (writer.select_records' rule); edited images of NoDerivs sources only
with `allow_noderivs`. A perception item ships only when its pair does (and is not itself
rejected). Byte-reproducible: rows sorted by id, fixed shard size and parquet settings, no time
and no local path anywhere.
"""
from __future__ import annotations

from collections import Counter
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any

import yaml

from mmfaith import __version__
from mmfaith.builders.vfaith.presentation import gold_items
from mmfaith.errors import MmfaithError
from mmfaith.gold_balance import DEFAULT_MARGIN, gold_summary, gold_table
from mmfaith.images import sha256_bytes, sha256_file
from mmfaith.schema import schema_errors
from mmfaith.jsonl import read_jsonl
from mmfaith.licenses import license_id
from mmfaith.loaders.vfaith.dataset import check
from mmfaith.loaders.vfaith.rows import (pair_features, pair_to_row, perception_features, perception_to_row, row_to_pair,
                                         row_to_perception)
from mmfaith.outdir import staged_folder
from mmfaith.release.manifest import (MANIFEST, VerifyReport, changelog, file_entry, manifest_bytes, previous_manifest,
                                      row_digest, verify_release)
from mmfaith.release.writer import (ROW_GROUP_ROWS, SPLIT, ReleaseRequest, ReleaseSummary, build_provenance,
                                    check_request, read_build_json, select_records, verification_summary)

FORMAT = "mmfaith-vfaith-release/1"
CONFIGS = ("pairs", "perception")


def _read(build: Path, name: str, kind: str) -> list[dict[str, Any]]:
    path = build / name
    if not path.is_file():
        raise MmfaithError(f"{build}: no {name}; pass the --out of `mmfaith build vfaith`.")
    seen: set[str] = set()
    records = []
    for number, record in read_jsonl(path):
        check(kind, record, f"{path}:{number}", seen)
        records.append(record)
    return records


def _image_bytes(build: Path, relative: str, sha256: str, where: str) -> bytes:
    path = build / relative
    if not path.is_file() or sha256_file(path) != sha256:
        raise MmfaithError(f"{where}: {path} is missing or does not match its sha256; restore the build's images.")
    return path.read_bytes()


def select(pairs: list[dict[str, Any]], perception: list[dict[str, Any]], include: str, allow_noderivs: bool,
           build: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    """(pairs that ship, perception items that ship, count left out per reason); MmfaithError when no pair ships."""
    kept, excluded = select_records(pairs, include, allow_noderivs, build)
    shipped = {record["id"] for record in kept}
    items = [item for item in perception if item["pair_id"] in shipped
             and (item.get("verification") or {}).get("status") != "rejected"]
    excluded = {**excluded, "perception_of_unreleased_pairs": len(perception) - len(items)}
    return kept, items, dict(sorted((k, v) for k, v in excluded.items() if v))


def release_vfaith(request: ReleaseRequest) -> ReleaseSummary:
    """Write the release of `request.build` into `request.out` (empty or absent); staged, then moved into place."""
    check_request(request)
    info = read_build_json(request.build)
    pairs = _read(request.build, "records.jsonl", "vfaith_pair")
    perception = _read(request.build, "perception.jsonl", "vfaith_perception") \
        if (request.build / "perception.jsonl").is_file() else []
    kept, items, excluded = select(pairs, perception, request.include, request.allow_noderivs, request.build)
    previous = previous_manifest(request.previous) if request.previous else None
    with staged_folder(request.out, "release") as staging:  # after the inputs are checked
        shards = {**_write_config(request, staging, "pairs", kept), **_write_config(request, staging, "perception", items)}
        rows = {"pairs": len(kept), "perception": len(items)}
        digests = {record["id"]: row_digest(record) for record in [*kept, *items]}
        provenance = build_provenance(request.build, info)
        verification = verification_summary(pairs, kept)
        card = _card(request, rows, kept, excluded, provenance, verification, info)
        (staging / "README.md").write_bytes(card.encode("utf-8"))
        manifest = {
            "format": FORMAT, "family": "vfaith", "name": request.name, "version": request.version,
            "tag": f"v{request.version}", "mmfaith_version": __version__, "include": request.include,
            "allow_noderivs": request.allow_noderivs, "split": SPLIT, "configs": rows, "excluded": excluded,
            "build": provenance, "verification": verification, "changelog": changelog(previous, digests),
            "files": {**shards, "README.md": file_entry(staging / "README.md")}, "rows": digests,
        }
        (staging / MANIFEST).write_bytes(manifest_bytes(manifest))
    return ReleaseSummary(out=request.out, rows=rows, excluded=excluded)


def _write_config(request: ReleaseRequest, out: Path, config: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """One config's rows (sorted by id) in shards of `shard_rows`; their manifest entries."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    features = pair_features() if config == "pairs" else perception_features()
    chosen = sorted(records, key=lambda record: record["id"])
    count = max(1, -(-len(chosen) // request.shard_rows))
    (out / "data" / config).mkdir(parents=True, exist_ok=True)
    entries = {}
    for index in range(count):
        part = chosen[index * request.shard_rows:(index + 1) * request.shard_rows]
        if config == "pairs":
            rows = [pair_to_row(r, _image_bytes(request.build, r["image_original"], r["image_original_sha256"], r["id"]),
                                _image_bytes(request.build, r["image_edited"], r["image_edited_sha256"], r["id"]))
                    for r in part]
        else:
            rows = [perception_to_row(r, _image_bytes(request.build, r["image"], r["image_sha256"], r["id"]))
                    for r in part]
        table = pa.Table.from_pylist([features.encode_example(row) for row in rows], schema=features.arrow_schema)
        name = f"data/{config}/{SPLIT}-{index:05d}-of-{count:05d}.parquet"
        pq.write_table(table, out / name, row_group_size=ROW_GROUP_ROWS, compression="zstd", compression_level=3,
                       use_dictionary=False, write_statistics=False, version="2.6", data_page_version="1.0",
                       store_schema=True)
        entries[name] = {**file_entry(out / name), "rows": len(part), "config": config, "split": SPLIT}
    return entries


def _counts(values: list[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(Counter(values).items())) or "none"


def _card(request: ReleaseRequest, rows: dict[str, int], kept: list[dict[str, Any]], excluded: dict[str, int],
          provenance: dict[str, Any], verification: dict[str, Any], info: dict[str, Any]) -> str:
    """README.md: cards/vfaith.md filled in (a pure function of its arguments)."""
    front = {"pretty_name": request.name.split("/")[-1], "license": "other", "license_name": "coco-mixed-cc",
             "license_link": "https://cocodataset.org/#termsofuse", "language": ["en"],
             "task_categories": ["visual-question-answering"], "tags": ["mmfaith", "vfaith", "faithfulness"],
             "configs": [{"config_name": config, "data_files": [{"split": SPLIT, "path": f"data/{config}/{SPLIT}-*.parquet"}],
                          **({"default": True} if config == "pairs" else {})} for config in CONFIGS]}
    statuses = verification["released_statuses"]
    recipe = info.get("recipe") or {}
    template = Template(files("mmfaith.cards").joinpath("vfaith.md").read_text(encoding="utf-8"))
    return template.substitute(
        front_matter=yaml.safe_dump(front, sort_keys=False, allow_unicode=True), pretty_name=front["pretty_name"],
        version=request.version, mmfaith_version=__version__, name=request.name,
        status_note="" if request.include == "accepted" else
        f"\n**Unverified rows included** (`--include all`): released statuses {statuses}.\n",
        noderivs_note="" if not request.allow_noderivs else
        "\n**Includes edited copies of NoDerivs images** (`--allow-noderivs`): you may not redistribute them.\n",
        pairs_rows=rows["pairs"], perception_rows=rows["perception"],
        category_counts=_counts([record["category"] for record in kept]),
        source_line=f"{provenance['source'].get('dataset')} ({provenance['source'].get('split')}), COCO instance "
                    "annotations read with `pycocotools`.",
        editors=_counts([f"{r['edit']['editor']['name']}"
                         + (f" ({r['edit']['editor']['model']})" if r['edit']['editor']['model'] else "") for r in kept]),
        min_delta_e=recipe.get("min_delta_e"),
        letters_original=_counts([r["answer_original"] for r in kept]),
        letters_edited=_counts([r["answer_edited"] for r in kept]),
        reversed=f"{sum(r['build'].get('source_photo') == 'image_edited' for r in kept)} of "
                 f"{sum(r['build'].get('template') in ('count', 'existence') for r in kept)}",
        gold_margin=f"{recipe.get('gold_margin', DEFAULT_MARGIN):.2f}",
        gold_table=gold_table(gold_summary(gold_items(kept))),
        verification_line=f"statuses in the build {verification['build_statuses']}, released {statuses}, "
                          f"{verification['annotators']} annotators, agreement {verification['agreement']}; left out: "
                          f"{excluded or 'nothing'}.",
        seed=recipe.get("seed"), records_sha256=provenance["records_sha256"],
        licenses=_counts([license_id(r["source"]["license"]) for r in kept]))


def verify_vfaith_release(folder: Path) -> VerifyReport:
    """`mmfaith verify` of a VFaith release: every hash of the manifest (release.manifest.verify_release) and
    every row of both configs: a valid record of its kind, its images hashing to its sha256 fields, its
    digest the manifest's."""
    return verify_release(folder, FORMAT, _check_row)


IMAGE_COLUMNS = {"pairs": (("image_original", "image_original_sha256"), ("image_edited", "image_edited_sha256")),
                 "perception": (("image", "image_sha256"),)}


def _check_row(where: str, entry: dict[str, Any], row: dict[str, Any], digests: dict[str, str]) -> list[str]:
    config = entry["config"]
    if config not in CONFIGS:
        return [f"{where}: config {config!r} is not one of {', '.join(CONFIGS)}."]
    try:
        record = row_to_pair(row) if config == "pairs" else row_to_perception(row)
    except (KeyError, TypeError, ValueError) as exc:
        return [f"{where}: cannot be read as a record ({exc!r})."]
    problems = [f"{where}: not a valid VFaith record: {'; '.join(errors[:3])}"
                for errors in [schema_errors("vfaith_pair" if config == "pairs" else "vfaith_perception", record)]
                if errors]
    for column, digest in IMAGE_COLUMNS[config]:
        if sha256_bytes((row[column] or {}).get("bytes") or b"") != record[digest]:
            problems.append(f"{where}: {column} bytes do not hash to {digest}.")
    if digests.get(record["id"]) != row_digest(record):
        problems.append(f"{where}: record digest differs from the manifest's rows entry.")
    return problems
