"""What one person said about one task, read from a Label Studio annotation.

A Vote is family-neutral: a verdict (accept|reject), reasons for a reject, optional notes, and
edits of fields of the record, keyed by a dotted path into the record
("differences.0.description", "caption"; JSON values such as a corrected box "regions.0.bbox" too). Families turn an annotation's result into a Vote (or
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
    edits: dict[str, Any] = field(default_factory=dict)
    time: str | None = None
