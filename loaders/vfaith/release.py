"""VFaith's release format (its `ReleaseDeclaration`; the shared writer is mmfaith/release/writer.py).

Configs `pairs` (one row per question pair: original and edited image) and `perception` (one row per
perception item: the edited image), both always present (loaders/vfaith/rows.py). A perception item
ships only when its pair does and it is not itself rejected. Edited images are derivatives of their
source. The card is cards/vfaith.md; the verification summary counts the pairs.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from mmfaith import __version__
from mmfaith.builders.vfaith.presentation import gold_items
from mmfaith.gold_balance import DEFAULT_MARGIN, gold_summary, gold_table
from mmfaith.images import sha256_bytes
from mmfaith.loaders.spd_faith.rows import license_id
from mmfaith.loaders.vfaith.dataset import check
from mmfaith.loaders.vfaith.rows import (pair_features, pair_to_row, perception_features, perception_to_row, row_to_pair,
                                         row_to_perception)
from mmfaith.release.card import audit_line, changelog_text, fill, hub_configs, pretty_name
from mmfaith.release.declaration import CardFacts, Record, ReleaseDeclaration, Unit, checked_records
from mmfaith.schema import schema_errors

CONFIGS = ("pairs", "perception")
IMAGE_COLUMNS = {"pairs": (("image_original", "image_original_sha256"), ("image_edited", "image_edited_sha256")),
                 "perception": (("image", "image_sha256"),)}


def is_pair(record: Record) -> bool:
    """A question pair (not a perception item, which names its `pair_id`)."""
    return "pair_id" not in record


def read_build(build: Path) -> list[Record]:
    """The build's pairs, then its perception items (perception.jsonl, when the build has one); schema-checked,
    every image present with its sha256."""
    seen: set[str] = set()
    records = checked_records(build, "vfaith", "records.jsonl", lambda r, where, ids: check("vfaith_pair", r, where, ids),
                              lambda r: [(r[c], r[d]) for c, d in IMAGE_COLUMNS["pairs"]], seen)
    if (build / "perception.jsonl").is_file():
        records += checked_records(build, "vfaith", "perception.jsonl",
                                   lambda r, where, ids: check("vfaith_perception", r, where, ids),
                                   lambda r: [(r[c], r[d]) for c, d in IMAGE_COLUMNS["perception"]], seen)
    return records


def select(records: list[Record], include: str, allow_noderivs: bool, build: Path) -> tuple[list[Record], dict[str, int]]:
    """The shared rule for pairs; a perception item ships when its pair does and it is not rejected."""
    from mmfaith.release.writer import select_records

    pairs = [record for record in records if is_pair(record)]
    perception = [record for record in records if not is_pair(record)]
    kept, excluded = select_records(pairs, include, allow_noderivs, build, noun="pair", derivative=lambda r: True)
    shipped = {record["id"] for record in kept}
    items = [item for item in perception if item["pair_id"] in shipped
             and (item.get("verification") or {}).get("status") != "rejected"]
    excluded = {**excluded, "perception_of_unreleased_pairs": len(perception) - len(items)}
    return [*kept, *items], dict(sorted((k, v) for k, v in excluded.items() if v))


def units(records: list[Record]) -> dict[str, list[Unit]]:
    """Both configs, always (an empty perception config is an empty shard)."""
    return {"pairs": [(r, None) for r in records if is_pair(r)],
            "perception": [(r, None) for r in records if not is_pair(r)]}


def features(config: str) -> Any:
    return pair_features() if config == "pairs" else perception_features()


def to_row(build: Path, config: str, unit: Unit) -> dict[str, Any]:
    record = unit[0]
    if config == "pairs":
        return pair_to_row(record, (build / record["image_original"]).read_bytes(),
                           (build / record["image_edited"]).read_bytes())
    return perception_to_row(record, (build / record["image"]).read_bytes())


def check_row(where: str, config: str, row: dict[str, Any]) -> tuple[Record | None, list[str]]:
    """A row read back: a valid record of its config's kind, its images hashing to its sha256 fields."""
    if config not in CONFIGS:
        return None, [f"{where}: config {config!r} is not one of {', '.join(CONFIGS)}."]
    try:
        record = row_to_pair(row) if config == "pairs" else row_to_perception(row)
    except (KeyError, TypeError, ValueError) as exc:
        return None, [f"{where}: cannot be read as a record ({exc!r})."]
    problems = [f"{where}: not a valid VFaith record: {'; '.join(errors[:3])}"
                for errors in [schema_errors("vfaith_pair" if config == "pairs" else "vfaith_perception", record)]
                if errors]
    for column, digest in IMAGE_COLUMNS[config]:
        if sha256_bytes((row[column] or {}).get("bytes") or b"") != record[digest]:
            problems.append(f"{where}: {column} bytes do not hash to {digest}.")
    return record, problems


def _counts(values: list[str]) -> str:
    return ", ".join(f"{key} {n}" for key, n in sorted(Counter(values).items())) or "none"


def card(facts: CardFacts) -> str:
    """README.md: cards/vfaith.md filled in (a pure function of the facts)."""
    front = {"pretty_name": pretty_name(facts.name), "license": "other", "license_name": "coco-mixed-cc",
             "license_link": "https://cocodataset.org/#termsofuse", "language": ["en"],
             "task_categories": ["visual-question-answering"], "tags": ["mmfaith", "vfaith", "faithfulness"],
             "configs": hub_configs(facts, "pairs")}
    kept = [record for record in facts.records if is_pair(record)]
    verification = facts.verification
    statuses = verification["released_statuses"]
    recipe = facts.build.get("recipe") or {}
    return fill(
        "vfaith.md", front, pretty_name=front["pretty_name"],
        version=facts.version, mmfaith_version=__version__, name=facts.name,
        status_note="" if facts.include == "accepted" else
        f"\n**Unverified rows included** (`--include all`): released statuses {statuses}.\n",
        noderivs_note="" if not facts.allow_noderivs else
        "\n**Includes edited copies of NoDerivs images** (`--allow-noderivs`): you may not redistribute them.\n",
        pairs_rows=facts.rows["pairs"], perception_rows=facts.rows["perception"],
        category_counts=_counts([record["category"] for record in kept]),
        source_line=f"{facts.build['source'].get('dataset')} ({facts.build['source'].get('split')}), COCO instance "
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
                          f"{facts.excluded or 'nothing'}. " + audit_line("vfaith"),
        seed=recipe.get("seed"), records_sha256=facts.build["records_sha256"],
        licenses=_counts([license_id(r["source"]["license"]) for r in kept]),
        changelog=changelog_text(facts.changelog, "records"))


def declaration() -> ReleaseDeclaration:
    """VFaith's release format (module docstring)."""
    return ReleaseDeclaration(family="vfaith", noun="pairs", read_build=read_build, select=select, units=units,
                              features=features, to_row=to_row, check_row=check_row, card=card, counted=is_pair)
