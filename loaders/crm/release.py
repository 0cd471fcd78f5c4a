"""CRM's release format (its `ReleaseDeclaration`; the shared writer is mmfaith/release/writer.py).

One config per mask mode and style ("{mode}-{style}", in the order the build's records list their
variants), one row per (question, variant) (loaders/crm/rows.py: the masked image and the original).
Masked variants are derivatives of their source image. The card is cards/crm.md.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from mmfaith import __version__
from mmfaith.builders.crm.build import gold_items
from mmfaith.gold_balance import DEFAULT_MARGIN, gold_summary, gold_table
from mmfaith.images import sha256_bytes
from mmfaith.loaders.crm.dataset import check_crm_record, variant_name
from mmfaith.loaders.crm.rows import features, record_to_row
from mmfaith.release.card import audit_line, changelog_text, fill, hub_configs, pretty_name, verification_line
from mmfaith.release.declaration import CardFacts, Record, ReleaseDeclaration, Unit, checked_records
from mmfaith.schema import schema_errors


def read_build(build: Path) -> list[Record]:
    """Every record of the build, schema-checked, its original and every variant present with its sha256."""
    return checked_records(build, "crm", "records.jsonl", check_crm_record,
                           lambda r: [(r["image_original"], r["image_original_sha256"])]
                           + [(v["image"], v["sha256"]) for v in r["variants"]])


def select(records: list[Record], include: str, allow_noderivs: bool, build: Path) -> tuple[list[Record], dict[str, int]]:
    """The shared rule; masked variants are derivatives of their source image."""
    from mmfaith.release.writer import select_records

    return select_records(records, include, allow_noderivs, build, noun="question", derivative=lambda record: True)


def units(records: list[Record]) -> dict[str, list[Unit]]:
    """One row per (question, variant), in the config of the variant."""
    configs = list(dict.fromkeys(variant_name(v) for record in records for v in record["variants"]))
    return {config: [(r, v) for r in records for v in r["variants"] if variant_name(v) == config]
            for config in configs}


def to_row(build: Path, config: str, unit: Unit) -> dict[str, Any]:
    record, variant = unit
    return record_to_row(record, variant, (build / variant["image"]).read_bytes(),
                         (build / record["image_original"]).read_bytes())


def check_row(where: str, config: str, row: dict[str, Any]) -> tuple[Record | None, list[str]]:
    """A row read back: its record readable and valid, its variant the shard's config, both images hashing to the
    record's sha256s."""
    try:
        record = json.loads(row["record"])
        variant = next(v for v in record["variants"] if f"{v['mode']}-{v['style']}" == f"{row['mode']}-{row['style']}")
    except (KeyError, TypeError, ValueError, StopIteration) as exc:
        return None, [f"{where}: cannot be read as a CRM record and variant ({exc!r})."]
    problems = []
    errors = schema_errors("crm_item", record)
    if errors:
        problems.append(f"{where}: not a valid CRM record: {'; '.join(errors[:3])}")
    if f"{row['mode']}-{row['style']}" != config:
        problems.append(f"{where}: variant {row['mode']}-{row['style']} in config {config!r}.")
    for column, digest in (("image", variant["sha256"]), ("image_original", record["image_original_sha256"])):
        if sha256_bytes((row[column] or {}).get("bytes") or b"") != digest:
            problems.append(f"{where}: {column} bytes do not hash to the record's sha256.")
    return record, problems


def card(facts: CardFacts) -> str:
    """README.md: cards/crm.md with the Hub front matter (one config per variant, the first the default)."""
    front = {"pretty_name": pretty_name(facts.name), "license": "other", "license_name": "per-image-source-licenses",
             "license_link": f"https://huggingface.co/datasets/{facts.name}#licenses", "language": ["en"],
             "task_categories": ["visual-question-answering"],
             "tags": ["multimodal", "faithfulness", "chain-of-thought", "masking", "benchmark", "mmfaith"],
             "configs": hub_configs(facts)}
    recipe = facts.build.get("recipe") or {}
    kept = facts.records
    licenses = Counter(r["source"]["license"]["name"] for r in kept)
    pending = sum(r["verification"]["status"] == "pending" for r in kept)
    return fill(
        "crm.md", front,
        pretty_name=front["pretty_name"], version=facts.version, mmfaith_version=__version__,
        source=(recipe.get("source") or {}).get("dataset") or (recipe.get("source") or {}).get("kind", "?"),
        status_note=(f"\n**{pending} of {len(kept)} items are not yet verified by annotators.**\n" if pending else ""),
        sizes_table="".join(f"| `{c}` | {n} |\n" for c, n in facts.rows.items()),
        margin=(recipe.get("mask") or {}).get("margin", "?"), seed=recipe.get("seed", "?"),
        noderivs_policy=("are included because the release was made with `--allow-noderivs`; check that you may "
                         "use them." if facts.allow_noderivs else "are never released."),
        repo_id=facts.name, first_config=next(iter(facts.rows)),
        gold_margin=f"{recipe.get('gold_margin', DEFAULT_MARGIN):.2f}",
        gold_table=gold_table(gold_summary(gold_items(kept))),
        license_table="\n".join(f"- {name}: {count} items" for name, count in sorted(licenses.items())),
        verification_line=verification_line(facts, "questions") + " " + audit_line("crm"),
        changelog=changelog_text(facts.changelog, "questions"))


def declaration() -> ReleaseDeclaration:
    """CRM's release format (module docstring)."""
    return ReleaseDeclaration(family="crm", noun="questions", read_build=read_build, select=select, units=units,
                              features=lambda config: features(), to_row=to_row, check_row=check_row, card=card)
