"""What one person said about one task, read from a Label Studio annotation.

A Vote is family-neutral: a verdict (accept|reject), reasons for a reject, optional notes, and
edits of free-text fields of the record, keyed by a dotted path into the record
("differences.0.description", "caption"). Families turn an annotation's result into a Vote (or
raise Misfit); the merge applies Votes to records without knowing the family.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("accept", "reject")


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
    edits: dict[str, str] = field(default_factory=dict)
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
