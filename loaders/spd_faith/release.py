"""SPD-Faith's release format (its `ReleaseDeclaration`; the shared writer is mmfaith/release/writer.py).

Configs `single`, `multi` and `control` (those with rows), one row per pair (loaders/spd_faith/rows.py:
both images as `Image()` features). The card is cards/spd_faith.md. Edited pairs are derivatives of
their source image; control pairs (the image twice) are not.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from mmfaith import __version__
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes
from mmfaith.loaders.spd_faith.rows import features, license_id, record_to_row, row_to_record
from mmfaith.release.card import (audit_line, changelog_text, fill, hub_configs, pretty_name, size_category,
                                  verification_line)
from mmfaith.release.declaration import CardFacts, Record, ReleaseDeclaration, Unit, checked_records
from mmfaith.schema import schema_errors

CONFIGS = ("single", "multi", "control")
CONFIG_WHAT = {"single": "one difference; `difficulty` easy / medium / hard",
               "multi": "2 to 5 differences", "control": "no difference (the image twice)"}


def _check(record: Record, where: str, seen: set[str]) -> None:
    errors = schema_errors("spd_faith_pair", record)
    if errors:
        raise MmfaithError(f"{where}: not an SPD-Faith record: {'; '.join(errors[:3])}")


def read_build(build: Path) -> list[Record]:
    """Every record of the build, schema-checked, with both image files present and matching their hashes."""
    return checked_records(build, "spd-faith", "records.jsonl", _check,
                           lambda r: [(r["image_a"], r["image_a_sha256"]), (r["image_b"], r["image_b_sha256"])])


def select(records: list[Record], include: str, allow_noderivs: bool, build: Path) -> tuple[list[Record], dict[str, int]]:
    """The shared rule; a control pair shows its image unedited (not a derivative)."""
    from mmfaith.release.writer import select_records

    return select_records(records, include, allow_noderivs, build, noun="pair",
                          derivative=lambda record: record["subset"] != "control")


def units(records: list[Record]) -> dict[str, list[Unit]]:
    """One row per pair, in the config of its subset (configs without pairs left out)."""
    by_config = {config: [(record, None) for record in records if record["subset"] == config] for config in CONFIGS}
    return {config: chosen for config, chosen in by_config.items() if chosen}


def to_row(build: Path, config: str, unit: Unit) -> dict[str, Any]:
    record = unit[0]
    return record_to_row(record, (build / record["image_a"]).read_bytes(), (build / record["image_b"]).read_bytes())


def check_row(where: str, config: str, row: dict[str, Any]) -> tuple[Record | None, list[str]]:
    """A row read back: readable as a record, valid, in its config, both images as the record's sha256s."""
    try:
        record = row_to_record(row)
    except (KeyError, TypeError, ValueError) as exc:
        return None, [f"{where}: cannot be read as a record ({exc!r})."]
    problems = []
    errors = schema_errors("spd_faith_pair", record)
    if errors:
        problems.append(f"{where}: not a valid SPD-Faith record: {'; '.join(errors[:3])}")
    if record["subset"] != config:
        problems.append(f"{where}: subset {record['subset']!r} in config {config!r}.")
    for side in ("image_a", "image_b"):
        if sha256_bytes(row[side]["bytes"] or b"") != record[f"{side}_sha256"]:
            problems.append(f"{where}: {side} bytes do not hash to {side}_sha256.")
    return record, problems


def card(facts: CardFacts) -> str:
    """README.md of the release: cards/spd_faith.md filled in (Hub front matter: `single` the default config)."""
    front = {
        "pretty_name": pretty_name(facts.name), "license": "other", "license_name": "coco-mixed-cc",
        "license_link": "https://cocodataset.org/#termsofuse", "language": ["en"],
        "task_categories": ["visual-question-answering", "image-text-to-text"],
        "size_categories": [size_category(sum(facts.rows.values()))],
        "tags": ["multimodal", "faithfulness", "spot-the-difference", "coco", "benchmark", "mmfaith"],
        "configs": hub_configs(facts, "single"),
    }
    recipe = facts.build.get("recipe") or {}
    return fill(
        "spd_faith.md", front,
        pretty_name=pretty_name(facts.name), version=facts.version, repo_id=facts.name,
        mmfaith_version=__version__,
        status_note=_status_note(facts), noderivs_note=_noderivs_note(facts),
        sizes_table="".join(f"| `{c}` | {CONFIG_WHAT[c]}{_tiers(facts, c)} | {n} |\n" for c, n in facts.rows.items()),
        source_line=_source_line(facts),
        edit_counts=_edit_counts(facts.records),
        dilation=recipe.get("dilation", "?"), blend_radius=recipe.get("blend_radius", "?"),
        min_delta_e=recipe.get("min_delta_e", "?"),
        inpainter=_inpainter(facts.records[0]["build"]), planner=_planner(recipe),
        verification_line=verification_line(facts, "pairs") + " " + audit_line("spd-faith"),
        seed=recipe.get("seed", "?"), records_sha256=facts.build["records_sha256"],
        noderivs_policy=("were edited and are released here because the release was made with "
                         "`--allow-noderivs`; check that you may use them." if facts.allow_noderivs
                         else "are never edited or released."),
        license_table=_license_table(facts.records), attribution_table=_attribution_table(facts.records),
        limitations_extra=("- This release contains pairs not yet verified by annotators (see above).\n"
                           if facts.include == "all" and facts.verification["released_statuses"].get("pending") else ""),
        changelog=changelog_text(facts.changelog, "pairs"),
    )


def _status_note(facts: CardFacts) -> str:
    pending = facts.verification["released_statuses"].get("pending", 0)
    if facts.include == "all" and pending:
        return (f"\n**Unverified pairs**: this release was made with `--include all`: {pending} of its "
                f"{sum(facts.rows.values())} pairs have `verification.status` `pending` (passed the automatic "
                "quality gates, not yet checked by an annotator). Rejected pairs are never released.\n")
    return "\nEvery pair here was accepted by annotators; rejected and unverified pairs are left out.\n"


def _noderivs_note(facts: CardFacts) -> str:
    if not facts.allow_noderivs:
        return ""
    return ("\n**NoDerivs images**: this release was made with `--allow-noderivs` and may contain edited "
            "copies of images whose license forbids derivatives; see *License and attribution*.\n")


def _tiers(facts: CardFacts, config: str) -> str:
    if config != "single":
        return ""
    tiers = Counter(r["difficulty"] for r in facts.records if r["subset"] == "single")
    return " (" + ", ".join(f"{tier} {tiers[tier]}" for tier in ("easy", "medium", "hard")) + ")"


def _source_line(facts: CardFacts) -> str:
    datasets = sorted({(r["source"]["dataset"], r["source"]["split"]) for r in facts.records})
    images = len({(r["source"]["dataset"], r["source"]["image_id"]) for r in facts.records})
    names = ", ".join(f"{d} ({s})" for d, s in datasets)
    return f"{images} COCO images from {names}, with their instance masks;"


def _edit_counts(records: list[Record]) -> str:
    counts = Counter(d["type"] for r in records for d in r["differences"])
    return ", ".join(f"{kind} {counts[kind]}" for kind in ("color", "remove", "position"))


def _inpainter(build: dict[str, Any]) -> str:
    inpainter = build.get("inpainter") or {}
    details = ", ".join(f"{k} {v}" for k, v in sorted(inpainter.items()) if k != "name")
    return f"{inpainter.get('name', 'none')}" + (f" ({details})" if details else "")


def _planner(recipe: dict[str, Any]) -> str:
    planner = recipe.get("planner") or {}
    if planner.get("name") == "llm":
        return f"LLM planner `{planner.get('model', '?')}` (falls back to the rule planner when its plan is infeasible)"
    return "rule planner (seeded)"


def _license_table(records: list[Record]) -> str:
    counts = Counter((license_id(r["source"]["license"]), r["source"]["license"]["url"]) for r in records)
    return "".join(f"| [{name}]({url}) | {n} |\n" for (name, url), n in sorted(counts.items()))


def _attribution_table(records: list[Record]) -> str:
    images = {(r["source"]["dataset"], r["source"]["image_id"]): r["source"] for r in records}
    return "".join(f"| {source['image_id']} | {license_id(source['license'])} | {source['attribution']} |\n"
                   for _, source in sorted(images.items()))


def declaration() -> ReleaseDeclaration:
    """SPD-Faith's release format (module docstring)."""
    return ReleaseDeclaration(family="spd-faith", noun="pairs", read_build=read_build, select=select, units=units,
                              features=lambda config: features(), to_row=to_row, check_row=check_row, card=card)
