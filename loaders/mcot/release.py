"""MCoT's release format (its `ReleaseDeclaration`; the shared writer is mmfaith/release/writer.py).

One config per source (`coco`, `vstar`, `hrbench-4k`, `hrbench-8k`, those with rows), one row per
question (loaders/mcot/rows.py: the image as an `Image()` feature). The images are the sources' own,
unedited (re-encoded losslessly as PNG), so no NoDerivs rule applies. The card is cards/mcot.md.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from mmfaith import __version__
from mmfaith.gold_balance import GoldItem, gold_summary, gold_table
from mmfaith.images import sha256_bytes
from mmfaith.loaders.mcot.dataset import check_item
from mmfaith.loaders.mcot.rows import features, record_to_row, row_to_record
from mmfaith.release.card import audit_line, changelog_text, fill, hub_configs, pretty_name, verification_line
from mmfaith.release.declaration import CardFacts, Record, ReleaseDeclaration, Unit, checked_records
from mmfaith.schema import schema_errors

CONFIGS = ("coco", "vstar", "hrbench-4k", "hrbench-8k")
CONFIG_WHAT = {"coco": "small-target colour and left/right questions from COCO annotations",
               "vstar": "V* Bench", "hrbench-4k": "HR-Bench 4K", "hrbench-8k": "HR-Bench 8K"}


def read_build(build: Path) -> list[Record]:
    """Every record of the build, schema-checked, each image present and matching its hash."""
    return checked_records(build, "mcot", "records.jsonl", check_item, lambda r: [(r["image"], r["image_sha256"])])


def select(records: list[Record], include: str, allow_noderivs: bool, build: Path) -> tuple[list[Record], dict[str, int]]:
    """The shared rule; an MCoT item shows its source image unedited (never a derivative)."""
    from mmfaith.release.writer import select_records

    return select_records(records, include, allow_noderivs, build, noun="question", derivative=lambda record: False)


def units(records: list[Record]) -> dict[str, list[Unit]]:
    """One row per question, in the config of its source (configs without questions left out)."""
    by_config = {c: [(r, None) for r in records if r["source"]["dataset"] == c] for c in CONFIGS}
    return {config: chosen for config, chosen in by_config.items() if chosen}


def to_row(build: Path, config: str, unit: Unit) -> dict[str, Any]:
    return record_to_row(unit[0], (build / unit[0]["image"]).read_bytes())


def check_row(where: str, config: str, row: dict[str, Any]) -> tuple[Record | None, list[str]]:
    """A row read back: a valid MCoT record in the config of its source, its image hashing to image_sha256."""
    try:
        record = row_to_record(row)
    except (KeyError, TypeError, ValueError) as exc:
        return None, [f"{where}: cannot be read as a record ({exc!r})."]
    problems = [f"{where}: not a valid MCoT record: {'; '.join(errors[:3])}"
                for errors in [schema_errors("mcot_item", record)] if errors]
    if record["source"].get("dataset") != config:
        problems.append(f"{where}: source {record['source'].get('dataset')!r} in config {config!r}.")
    if sha256_bytes((row["image"] or {}).get("bytes") or b"") != record["image_sha256"]:
        problems.append(f"{where}: image bytes do not hash to image_sha256.")
    return record, problems


def card(facts: CardFacts) -> str:
    """README.md: cards/mcot.md with the Hub front matter (one config per source, the first the default)."""
    front = {"pretty_name": pretty_name(facts.name), "license": "other", "license_name": "per-source-licenses",
             "license_link": f"https://huggingface.co/datasets/{facts.name}#licenses", "language": ["en"],
             "task_categories": ["visual-question-answering"], "tags": ["multimodal", "faithfulness", "mmfaith",
                                                                        "thinking-with-images"],
             "configs": hub_configs(facts)}
    categories = Counter((r["source"]["dataset"], r["category"]) for r in facts.records)
    return fill(
        "mcot.md", front,
        pretty_name=front["pretty_name"], version=facts.version, repo_id=facts.name,
        mmfaith_version=__version__,
        sizes_table="".join(f"| `{c}` | {CONFIG_WHAT[c]} | {n} |\n" for c, n in facts.rows.items()),
        categories_table="".join(f"| `{c}` | {cat} | {n} |\n" for (c, cat), n in sorted(categories.items())),
        status_line=("Every item was accepted by annotators." if facts.include == "accepted" else
                     "Released with `--include all`: " + ", ".join(
                         f"{n} {status}" for status, n in facts.verification["released_statuses"].items())
                     + " (pending: not yet checked by an annotator; rejected items are never released)."),
        default_config=next(iter(facts.rows)),
        gold_table=gold_table(gold_summary([GoldItem.of_record(r["category"], r["options"], r["answer"])
                                            for r in facts.records])),
        verification_line=verification_line(facts, "questions") + " " + audit_line("mcot"),
        changelog=changelog_text(facts.changelog, "questions"))


def declaration() -> ReleaseDeclaration:
    """MCoT's release format (module docstring)."""
    return ReleaseDeclaration(family="mcot", noun="questions", read_build=read_build, select=select, units=units,
                              features=lambda config: features(), to_row=to_row, check_row=check_row, card=card)
