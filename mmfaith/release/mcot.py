"""`mmfaith release` of an MCoT build dir: one config per source, the Hub layout plain `datasets` loads.

Output: `README.md` (cards/mcot.md filled in, YAML front matter declaring the configs),
`data/<source>/test-NNNNN-of-NNNNN.parquet` (configs `coco`, `vstar`, `hrbench-4k`, `hrbench-8k`
where they have rows; loaders/mcot/rows.py: the image as an `Image()` feature with the PNG bytes
inside) and `manifest.json` (format `mmfaith-mcot-release/1`, checked by `mmfaith verify`).
Which items ship: `include="accepted"` only verified ones, `include="all"` verified and pending;
rejected never. The images are the sources' own, unedited (re-encoded losslessly as PNG).
Byte-reproducible like every release (shared `write_shards`, no time, no local path).
"""
from __future__ import annotations

from collections import Counter
from importlib.resources import files
from string import Template
from typing import Any

import yaml

from mmfaith import __version__
from mmfaith.errors import MmfaithError
from mmfaith.gold_balance import GoldItem, gold_summary, gold_table
from mmfaith.loaders.mcot.dataset import check_item
from mmfaith.loaders.mcot.rows import features, record_to_row, row_to_record
from mmfaith.images import sha256_bytes, sha256_file
from mmfaith.schema import schema_errors
from mmfaith.jsonl import read_jsonl
from mmfaith.outdir import staged_folder
from mmfaith.release.manifest import (MANIFEST, VerifyReport, changelog, file_entry, manifest_bytes, previous_manifest,
                                      row_digest, verify_release)
from mmfaith.release.writer import (SPLIT, ReleaseRequest, ReleaseSummary, build_provenance, check_request,
                                    read_build_json, select_records, verification_summary, write_shards)

FORMAT = "mmfaith-mcot-release/1"
CONFIGS = ("coco", "vstar", "hrbench-4k", "hrbench-8k")
CONFIG_WHAT = {"coco": "small-target colour and left/right questions from COCO annotations",
               "vstar": "V* Bench", "hrbench-4k": "HR-Bench 4K", "hrbench-8k": "HR-Bench 8K"}


def release_mcot(request: ReleaseRequest) -> ReleaseSummary:
    """Write the release of `request.build` into `request.out` (empty or absent), whole or not at all."""
    check_request(request)
    build_info = read_build_json(request.build)
    records = _read_records(request.build)
    # MCoT items show their source image unedited: no NoDerivs rule applies
    kept, excluded = select_records(records, request.include, request.allow_noderivs, request.build, noun="item",
                                    derivative=lambda record: False)
    previous = previous_manifest(request.previous) if request.previous else None
    with staged_folder(request.out, "release") as staging:  # after the inputs are checked
        shards = write_shards(staging, {c: [r for r in kept if r["source"]["dataset"] == c] for c in CONFIGS},
                              features(), request.shard_rows,
                              lambda r: record_to_row(r, (request.build / r["image"]).read_bytes()))
        rows = {c: sum(s["rows"] for s in shards.values() if s["config"] == c) for c in CONFIGS}
        rows = {c: n for c, n in rows.items() if n}
        digests = {r["id"]: row_digest(r) for r in kept}
        provenance = build_provenance(request.build, build_info)
        verification = verification_summary(records, kept)
        (staging / "README.md").write_bytes(_card(request, rows, kept, verification).encode("utf-8"))
        manifest = {"format": FORMAT, "family": "mcot", "name": request.name, "version": request.version,
                    "tag": f"v{request.version}", "mmfaith_version": __version__, "include": request.include,
                    "split": SPLIT, "configs": rows, "excluded": excluded, "build": provenance,
                    "verification": verification, "changelog": changelog(previous, digests),
                    "files": {**shards, "README.md": file_entry(staging / "README.md")}, "rows": digests}
        (staging / MANIFEST).write_bytes(manifest_bytes(manifest))
    return ReleaseSummary(out=request.out, rows=rows, excluded=excluded)


def _read_records(build: Any) -> list[dict[str, Any]]:
    """Every record of the build, schema-checked, each image present and matching its hash."""
    path = build / "records.jsonl"
    if not path.is_file():
        raise MmfaithError(f"{build}: no records.jsonl; pass the --out of `mmfaith build mcot`.")
    records, seen = [], set()
    for number, record in read_jsonl(path):
        check_item(record, f"{path}:{number}", seen)
        image = build / record["image"]
        if not image.is_file() or sha256_file(image) != record["image_sha256"]:
            raise MmfaithError(f"{path}:{number}: image {image} is missing or does not match image_sha256.")
        records.append(record)
    return records


def _card(request: ReleaseRequest, rows: dict[str, int], kept: list[dict[str, Any]],
          verification: dict[str, Any]) -> str:
    """README.md: cards/mcot.md with the Hub front matter (one config per source, the first the default)."""
    configs = [{"config_name": c, "data_files": [{"split": SPLIT, "path": f"data/{c}/{SPLIT}-*.parquet"}],
                **({"default": True} if number == 0 else {})} for number, c in enumerate(rows)]
    front = {"pretty_name": request.name.rsplit("/", 1)[-1], "license": "other", "language": ["en"],
             "task_categories": ["visual-question-answering"], "tags": ["multimodal", "faithfulness", "mmfaith",
                                                                        "thinking-with-images"],
             "configs": configs}
    categories = Counter((r["source"]["dataset"], r["category"]) for r in kept)
    template = Template(files("mmfaith.cards").joinpath("mcot.md").read_text(encoding="utf-8"))
    return template.substitute(
        front_matter=yaml.safe_dump(front, sort_keys=False, allow_unicode=True),
        pretty_name=front["pretty_name"], version=request.version, repo_id=request.name,
        mmfaith_version=__version__,
        sizes_table="".join(f"| `{c}` | {CONFIG_WHAT[c]} | {n} |\n" for c, n in rows.items()),
        categories_table="".join(f"| `{c}` | {cat} | {n} |\n" for (c, cat), n in sorted(categories.items())),
        status_line=("Every item was accepted by annotators." if request.include == "accepted" else
                     "Released with `--include all`: " + ", ".join(
                         f"{n} {status}" for status, n in verification["released_statuses"].items())
                     + " (pending: not yet checked by an annotator; rejected items are never released)."),
        default_config=next(iter(rows)),
        gold_table=gold_table(gold_summary([GoldItem.of_record(r["category"], r["options"], r["answer"])
                                            for r in kept])))


def verify_mcot_release(folder: Any) -> VerifyReport:
    """`mmfaith verify` of an MCoT release: every hash of the manifest (release.manifest.verify_release) and every
    row: a valid MCoT record in the config of its source, its image hashing to image_sha256, its digest the
    manifest's."""
    return verify_release(folder, FORMAT, _check_row)


def _check_row(where: str, entry: dict[str, Any], row: dict[str, Any], digests: dict[str, str]) -> list[str]:
    try:
        record = row_to_record(row)
    except (KeyError, TypeError, ValueError) as exc:
        return [f"{where}: cannot be read as a record ({exc!r})."]
    problems = [f"{where}: not a valid MCoT record: {'; '.join(errors[:3])}"
                for errors in [schema_errors("mcot_item", record)] if errors]
    if record["source"].get("dataset") != entry["config"]:
        problems.append(f"{where}: source {record['source'].get('dataset')!r} in config {entry['config']!r}.")
    if sha256_bytes((row["image"] or {}).get("bytes") or b"") != record["image_sha256"]:
        problems.append(f"{where}: image bytes do not hash to image_sha256.")
    if digests.get(record["id"]) != row_digest(record):
        problems.append(f"{where}: record digest differs from the manifest's rows entry.")
    return problems
