"""`mmfaith release` of a CRM build: one parquet config per mask mode and style, split `test`.

Output (RELEASE_DIR): README.md (cards/crm.md filled in, with the Hub YAML front matter declaring
the configs), data/<mode>-<style>/test-NNNNN-of-NNNNN.parquet (rows: loaders/crm/rows.py) and
manifest.json (format mmfaith-crm-release/1: files with sha256, rows per config, one digest per
item, the build's provenance). Which items ship: verified ones (`include="accepted"`) or also
pending ones (`include="all"`); rejected never; NoDerivs images only with `allow_noderivs`
(masked variants are derivatives). Byte-reproducible: rows sorted by id, fixed shard size and
writer settings, no time and no local path.
"""
from __future__ import annotations

from collections import Counter
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any

import yaml

from mmfaith import __version__
from mmfaith.builders.crm.build import gold_items
from mmfaith.gold_balance import DEFAULT_MARGIN, gold_summary, gold_table
from mmfaith.images import sha256_file
from mmfaith.loaders.crm import open_crm_dataset, variant_name
from mmfaith.loaders.crm.rows import RELEASE_FORMAT, features, record_to_row
from mmfaith.outdir import staged_folder
from mmfaith.release.manifest import MANIFEST, file_entry, manifest_bytes, row_digest
from mmfaith.release.writer import ReleaseRequest, ReleaseSummary, SPLIT, check_request, read_build_json, select_records

ROW_GROUP_ROWS = 100


def release_crm(request: ReleaseRequest) -> ReleaseSummary:
    """Write the release of a CRM build into `request.out` (empty or absent); module docstring."""
    check_request(request)
    info = read_build_json(request.build)
    dataset = open_crm_dataset(request.build)
    kept, excluded = select_records([item.record for item in dataset.items], request.include, request.allow_noderivs,
                                    request.build, noun="item")
    with staged_folder(request.out, "release") as staging:  # after the inputs are checked
        rows = _write(request, staging, info, kept, excluded)
    return ReleaseSummary(out=request.out, rows=rows, excluded=excluded)


def _write(request: ReleaseRequest, out: Path, info: dict[str, Any], kept: list[dict[str, Any]],
           excluded: dict[str, int]) -> dict[str, int]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row_features = features()
    configs = list(dict.fromkeys(variant_name(v) for record in kept for v in record["variants"]))
    entries: dict[str, dict[str, Any]] = {}
    rows_per_config: dict[str, int] = {}
    for config in configs:
        chosen = sorted(((r, v) for r in kept for v in r["variants"] if variant_name(v) == config),
                        key=lambda pair: pair[0]["id"])
        count = -(-len(chosen) // request.shard_rows)
        (out / "data" / config).mkdir(parents=True)
        for index in range(count):
            part = chosen[index * request.shard_rows:(index + 1) * request.shard_rows]
            table = pa.Table.from_pylist([row_features.encode_example(record_to_row(
                r, v, (request.build / v["image"]).read_bytes(), (request.build / r["image_original"]).read_bytes()))
                for r, v in part], schema=row_features.arrow_schema)
            name = f"data/{config}/{SPLIT}-{index:05d}-of-{count:05d}.parquet"
            pq.write_table(table, out / name, row_group_size=ROW_GROUP_ROWS, compression="zstd", compression_level=3,
                           use_dictionary=False, write_statistics=False, version="2.6", data_page_version="1.0",
                           store_schema=True)
            entries[name] = {**file_entry(out / name), "rows": len(part), "config": config, "split": SPLIT}
        rows_per_config[config] = len(chosen)
    provenance = {"records_sha256": sha256_file(request.build / "records.jsonl"),
                  "mmfaith_version": info.get("mmfaith_version"), "recipe": info.get("recipe"),
                  "counts": info.get("counts")}
    (out / "README.md").write_bytes(_card(request, kept, rows_per_config, provenance).encode("utf-8"))
    entries["README.md"] = file_entry(out / "README.md")
    manifest = {"format": RELEASE_FORMAT, "family": "crm", "name": request.name, "version": request.version,
                "tag": f"v{request.version}", "mmfaith_version": __version__, "include": request.include,
                "allow_noderivs": request.allow_noderivs, "split": SPLIT, "configs": rows_per_config,
                "excluded": excluded, "build": provenance, "files": entries,
                "rows": {record["id"]: row_digest(record) for record in kept}}
    (out / MANIFEST).write_bytes(manifest_bytes(manifest))
    return rows_per_config


def _card(request: ReleaseRequest, kept: list[dict[str, Any]], rows: dict[str, int],
          provenance: dict[str, Any]) -> str:
    front = {"pretty_name": request.name.rsplit("/", 1)[-1], "license": "other", "language": ["en"],
             "task_categories": ["visual-question-answering"],
             "tags": ["multimodal", "faithfulness", "chain-of-thought", "masking", "benchmark", "mmfaith"],
             "configs": [{"config_name": c, "data_files": [{"split": SPLIT, "path": f"data/{c}/{SPLIT}-*.parquet"}],
                          **({"default": True} if i == 0 else {})} for i, c in enumerate(rows)]}
    recipe = provenance.get("recipe") or {}
    licenses = Counter(r["source"]["license"]["name"] for r in kept)
    pending = sum(r["verification"]["status"] == "pending" for r in kept)
    template = Template(files("mmfaith.cards").joinpath("crm.md").read_text(encoding="utf-8"))
    return template.substitute(
        front_matter=yaml.safe_dump(front, sort_keys=False, allow_unicode=True),
        pretty_name=front["pretty_name"], version=request.version, mmfaith_version=__version__,
        source=(recipe.get("source") or {}).get("dataset") or (recipe.get("source") or {}).get("kind", "?"),
        status_note=(f"\n**{pending} of {len(kept)} items are not yet verified by annotators.**\n" if pending else ""),
        sizes_table="".join(f"| `{c}` | {n} |\n" for c, n in rows.items()),
        margin=(recipe.get("mask") or {}).get("margin", "?"), seed=recipe.get("seed", "?"),
        noderivs_policy=("are included because the release was made with `--allow-noderivs`; check that you may "
                         "use them." if request.allow_noderivs else "are never released."),
        repo_id=request.name, first_config=next(iter(rows)),
        gold_margin=f"{recipe.get('gold_margin', DEFAULT_MARGIN):.2f}",
        gold_table=gold_table(gold_summary(gold_items(kept))),
        license_table="\n".join(f"- {name}: {count} items" for name, count in sorted(licenses.items())))
