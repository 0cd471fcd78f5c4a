"""What one person said about one task, read from a Label Studio annotation.

A Vote is family-neutral: a verdict (accept|reject), reasons for a reject, optional notes, and
edits of fields of the record, keyed by a dotted path into the record
("differences.0.description", "caption"; JSON values such as a corrected box "regions.0.bbox" too). Families turn an annotation's result into a Vote (or
raise Misfit); the merge applies Votes to records without knowing the family.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("accept", "reject")
# How several people's votes on one task decide its status (`merge.decide`).
POLICIES = ("any-reject", "majority")


class Misfit(ValueError):
    """An annotation whose result does not fit the labeling config; the message says what is wrong."""


@dataclass(frozen=True)
class Vote:
    """One annotation's verdict on one record. `time` is the annotation's ISO-8601 update time."""

    annotation_id: int
    annotator: str
    verdict: str
    reasons: tuple[str, ...] = ()
    notes: str | None = None
    edits: dict[str, Any] = field(default_factory=dict)
    time: str | None = None


def text_of(item: dict[str, Any], name: str) -> str:
    """The single text of a textarea result, stripped; Misfit unless it is exactly one string."""
    text = item.get("value", {}).get("text")
    if not isinstance(text, list) or len(text) != 1 or not isinstance(text[0], str):
        raise Misfit(f"{name}: expected one text, found {text!r}")
    return text[0].strip()


def choices_of(item: dict[str, Any], name: str, allowed: tuple[str, ...]) -> list[str]:
    """The choices of a choices result; Misfit for a value outside `allowed`."""
    chosen = item.get("value", {}).get("choices")
    if not isinstance(chosen, list) or not chosen or any(c not in allowed for c in chosen):
        raise Misfit(f"{name}: expected choices among {list(allowed)}, found {chosen!r}")
    return chosen


def controls_of(result: list[dict[str, Any]], kind_of: Callable[[str], str | None]) -> dict[str, dict[str, Any]]:
    """An annotation's result items by control name; Misfit for an item without a name, an unknown
    control (`kind_of` None), a type other than `kind_of(name)`, or a control given twice."""
    seen: dict[str, dict[str, Any]] = {}
    for item in result:
        name = item.get("from_name") if isinstance(item, dict) else None
        if not isinstance(name, str):
            raise Misfit(f"a result item without a control name: {item!r}")
        kind = kind_of(name)
        if kind is None:
            raise Misfit(f"unknown control {name!r}")
        if item.get("type") != kind:
            raise Misfit(f"{name}: expected type {kind}, found {item.get('type')!r}")
        if name in seen:
            raise Misfit(f"{name}: given twice")
        seen[name] = item
    return seen


def verdict_of(seen: dict[str, dict[str, Any]], reasons_allowed: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """(verdict, sorted reasons) of the `verdict` and `reasons` controls; Misfit for no verdict, a reject
    without a reason or an accept with reasons."""
    if "verdict" not in seen:
        raise Misfit("no verdict (accept or reject)")
    verdict = choices_of(seen["verdict"], "verdict", VERDICTS)
    if len(verdict) != 1:
        raise Misfit(f"verdict: expected one of {list(VERDICTS)}, found {verdict!r}")
    reasons = tuple(sorted(choices_of(seen["reasons"], "reasons", reasons_allowed))) if "reasons" in seen else ()
    if verdict[0] == "reject" and not reasons:
        raise Misfit("reject without a reason")
    if verdict[0] == "accept" and reasons:
        raise Misfit(f"accept with reject reasons {list(reasons)}")
    return verdict[0], reasons
