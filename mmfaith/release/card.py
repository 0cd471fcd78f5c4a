"""The dataset card (README.md) of an SPD-Faith release: cards/spd_faith.md filled from the release's facts.

Contract: `render_card(facts)` is a pure function of `facts` (same facts, same bytes). The YAML
front matter is written with `yaml.safe_dump` and holds the Hub metadata: `license: other` (with
`license_name` and `license_link`), `task_categories`, `size_categories`, `language`,
`pretty_name`, `tags` and `configs` (one per config, split `test`, its parquet files; `single`
is the default).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from importlib.resources import files
from string import Template
from typing import Any

import yaml

from mmfaith import __version__
from mmfaith.licenses import license_id

CONFIG_WHAT = {"single": "one difference; `difficulty` easy / medium / hard",
               "multi": "2 to 5 differences", "control": "no difference (the image twice)"}
SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


@dataclass(frozen=True)
class CardFacts:
    """What the card states; all of it also lies in the manifest or the rows."""

    name: str
    version: str
    include: str
    allow_noderivs: bool
    rows: dict[str, int]
    excluded: dict[str, int]
    records: list[dict[str, Any]]
    build: dict[str, Any]
    verification: dict[str, Any]
    changelog: dict[str, Any] | None
    data_files: dict[str, str]


def front_matter(facts: CardFacts) -> dict[str, Any]:
    """The Hub metadata of the card."""
    total = sum(facts.rows.values())
    size = next((label for limit, label in SIZE_CATEGORIES if total < limit), "n>1M")
    configs = []
    for config in facts.rows:
        entry: dict[str, Any] = {"config_name": config,
                                 "data_files": [{"split": "test", "path": facts.data_files[config]}]}
        if config == "single" or (config == next(iter(facts.rows)) and "single" not in facts.rows):
            entry["default"] = True
        configs.append(entry)
    return {
        "pretty_name": pretty_name(facts.name),
        "license": "other",
        "license_name": "coco-mixed-cc",
        "license_link": "https://cocodataset.org/#termsofuse",
        "language": ["en"],
        "task_categories": ["visual-question-answering", "image-text-to-text"],
        "size_categories": [size],
        "tags": ["multimodal", "faithfulness", "spot-the-difference", "coco", "benchmark", "mmfaith"],
        "configs": configs,
    }


def pretty_name(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def render_card(facts: CardFacts) -> str:
    """README.md of the release."""
    template = Template(files("mmfaith.cards").joinpath("spd_faith.md").read_text(encoding="utf-8"))
    recipe = facts.build.get("recipe") or {}
    first_build = facts.records[0]["build"]
    return template.substitute(
        front_matter=yaml.safe_dump(front_matter(facts), sort_keys=False, allow_unicode=True),
        pretty_name=pretty_name(facts.name), version=facts.version, repo_id=facts.name,
        mmfaith_version=__version__,
        status_note=_status_note(facts), noderivs_note=_noderivs_note(facts),
        sizes_table="".join(f"| `{c}` | {CONFIG_WHAT[c]}{_tiers(facts, c)} | {n} |\n" for c, n in facts.rows.items()),
        source_line=_source_line(facts),
        edit_counts=_edit_counts(facts.records),
        dilation=recipe.get("dilation", "?"), blend_radius=recipe.get("blend_radius", "?"),
        min_delta_e=recipe.get("min_delta_e", "?"),
        inpainter=_inpainter(first_build), planner=_planner(recipe),
        verification_line=_verification_line(facts),
        seed=recipe.get("seed", "?"), records_sha256=facts.build["records_sha256"],
        noderivs_policy=("were edited and are released here because the release was made with "
                         "`--allow-noderivs`; check that you may use them." if facts.allow_noderivs
                         else "are never edited or released."),
        license_table=_license_table(facts.records), attribution_table=_attribution_table(facts.records),
        limitations_extra=("- This release contains pairs not yet verified by annotators (see above).\n"
                           if facts.include == "all" and facts.verification["released_statuses"].get("pending") else ""),
        changelog=_changelog(facts.changelog),
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


def _edit_counts(records: list[dict[str, Any]]) -> str:
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


def _verification_line(facts: CardFacts) -> str:
    v = facts.verification
    build = ", ".join(f"{k} {n}" for k, n in v["build_statuses"].items())
    released = ", ".join(f"{k} {n}" for k, n in v["released_statuses"].items())
    agreement = ("not measured (no pair had two annotators)" if v["agreement"] is None
                 else f"Fleiss' kappa {v['agreement']:.3f} on the verdicts")
    excluded = ", ".join(f"{k} {n}" for k, n in facts.excluded.items()) or "none"
    return (f"statuses in the build: {build}; released: {released}; left out: {excluded}; "
            f"{v['annotators']} annotators, {v['pairs_with_two_or_more_annotators']} pairs seen by two or more; "
            f"inter-annotator agreement: {agreement}.")


def _license_table(records: list[dict[str, Any]]) -> str:
    counts = Counter((license_id(r["source"]["license"]), r["source"]["license"]["url"]) for r in records)
    return "".join(f"| [{name}]({url}) | {n} |\n" for (name, url), n in sorted(counts.items()))


def _attribution_table(records: list[dict[str, Any]]) -> str:
    images = {(r["source"]["dataset"], r["source"]["image_id"]): r["source"] for r in records}
    return "".join(f"| {source['image_id']} | {license_id(source['license'])} | {source['attribution']} |\n"
                   for _, source in sorted(images.items()))


def _changelog(changes: dict[str, Any] | None) -> str:
    if changes is None:
        return "First release (no `--previous` given)."
    lines = [f"Against {changes['previous_name']} v{changes['previous_version']}: "
             f"{len(changes['added'])} pairs added, {len(changes['removed'])} removed, "
             f"{len(changes['changed'])} changed (same id, other record or image)."]
    for kind in ("added", "removed", "changed"):
        ids = changes[kind]
        if ids:
            shown = ", ".join(f"`{i}`" for i in ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
            lines.append(f"- {kind}: {shown}")
    return "\n".join(lines)
