"""What every family's dataset card (README.md of a release) shares: the template, the Hub front matter's
configs and size category, the changelog, the verification line and the audit line (the share of items a
careful annotator rejects, from the package's audit_rates.json, which benchmarks/naturalness_audit.py writes).

Contract: every function is pure (same facts, same text). A family's card (its `ReleaseDeclaration.card`)
fills its template, cards/<name>.md, with `fill`, passing its own values beside these.
"""
from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any

import yaml

from mmfaith.release.declaration import CardFacts

SIZE_CATEGORIES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"))


def fill(template: str, front_matter: dict[str, Any], **values: Any) -> str:
    """cards/`template` with `$front_matter` (written by yaml.safe_dump, in the given key order) and `values`."""
    text = files("mmfaith.cards").joinpath(template).read_text(encoding="utf-8")
    return Template(text).substitute(front_matter=yaml.safe_dump(front_matter, sort_keys=False, allow_unicode=True),
                                     **values)


def pretty_name(name: str) -> str:
    """The card's title: NAME of ORG/NAME."""
    return name.rsplit("/", 1)[-1]


def size_category(total: int) -> str:
    """The Hub's size category of a release of `total` rows."""
    return next((label for limit, label in SIZE_CATEGORIES if total < limit), "n>1M")


def hub_configs(facts: CardFacts, default: str | None = None) -> list[dict[str, Any]]:
    """The front matter's `configs`: one per config with rows, split `test`, its parquet files; `default` (or,
    when it has no rows, the first config) marked as the default."""
    chosen = default if default in facts.rows else next(iter(facts.rows))
    return [{"config_name": config, "data_files": [{"split": "test", "path": facts.data_files[config]}],
             **({"default": True} if config == chosen else {})} for config in facts.rows]


def changelog_text(changes: dict[str, Any] | None, noun: str) -> str:
    """The card's changelog against `--previous` (`noun`: what a row is, plural), or that this is the first."""
    if changes is None:
        return "First release (no `--previous` given)."
    lines = [f"Against {changes['previous_name']} v{changes['previous_version']}: "
             f"{len(changes['added'])} {noun} added, {len(changes['removed'])} removed, "
             f"{len(changes['changed'])} changed (same id, other record or image)."]
    for kind in ("added", "removed", "changed"):
        ids = changes[kind]
        if ids:
            shown = ", ".join(f"`{i}`" for i in ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
            lines.append(f"- {kind}: {shown}")
    return "\n".join(lines)


def verification_line(facts: CardFacts, noun: str) -> str:
    """Statuses in the build and the release, what was left out, annotators and their agreement."""
    v = facts.verification
    build = ", ".join(f"{k} {n}" for k, n in v["build_statuses"].items())
    released = ", ".join(f"{k} {n}" for k, n in v["released_statuses"].items())
    agreement = (f"not measured (no {noun[:-1] if noun.endswith('s') else noun} had two annotators)"
                 if v["agreement"] is None else f"Fleiss' kappa {v['agreement']:.3f} on the verdicts")
    excluded = ", ".join(f"{k} {n}" for k, n in facts.excluded.items()) or "none"
    return (f"statuses in the build: {build}; released: {released}; left out: {excluded}; "
            f"{v['annotators']} annotators, {v['records_with_two_or_more_annotators']} {noun} seen by two or more; "
            f"inter-annotator agreement: {agreement}.")


def audit_line(family: str, rates_file: Path | None = None) -> str:
    """The card's sentence on the naturalness audit of `family` (docs/audit.md): "before human verification, about
    N % of items are rejected by a careful annotator", N from `rates_file` (default: the package's
    mmfaith/data/audit_rates.json) with its date, the builder version and the counts; a sentence saying it was not
    measured when the file has no figure for it."""
    source = rates_file or files("mmfaith.data").joinpath("audit_rates.json")
    rates = json.loads(source.read_text(encoding="utf-8"))
    entry = rates["families"].get(family)
    if entry is None:
        return ("The share of gate-accepted items a careful annotator rejects has not been measured for this family "
                "(mmfaith's naturalness audit).")
    gates = "" if entry["yield"] is None else f"; the gates accepted {100 * entry['yield']:.0f} % of candidates"
    return (f"Before human verification, about {100 * entry['reject_share']:.0f} % of items are rejected by a careful "
            f"annotator (mmfaith's naturalness audit of {entry['date']}, builder version {entry['builder_version']}: "
            f"{entry['rejected']} of {entry['labelled']} labelled gate-accepted items rejected{gates}).")
