"""`annotate status`: verification counts of a build and agreement between its annotators.

Reads only BUILD_DIR/records.jsonl (what the last pull wrote): `verification.status` for the
counts, `verification.votes` for agreement on the verdict (accept|reject).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from mmfaith.annotation.agreement import cohen_kappa, fleiss_kappa
from mmfaith.errors import MmfaithError
from mmfaith.jsonl import read_jsonl

RECORDS = "records.jsonl"


def read_records(build_dir: Path) -> list[dict[str, Any]]:
    """The build's records in file order (MmfaithError when BUILD_DIR/records.jsonl is missing)."""
    path = build_dir / RECORDS
    if not path.is_file():
        raise MmfaithError(f"{path}: not found; give the folder `mmfaith build` wrote as BUILD_DIR.")
    return [record for _, record in read_jsonl(path)]


@dataclass
class StatusReport:
    """counts: accepted/rejected/pending. overlapping: records with votes from two or more annotators.
    fleiss: Fleiss' kappa over those records. cohen: {"a|b": (kappa, shared records)} for each pair
    of annotators who voted on the same records. disagreements: record ids whose votes differ."""

    counts: dict[str, int]
    overlapping: int
    fleiss: float | None
    cohen: dict[str, tuple[float | None, int]] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)


def _verdicts(record: dict[str, Any]) -> dict[str, str]:
    """Annotator -> verdict of one record (one vote per annotator: the last one counted)."""
    return {v["annotator"]: v["verdict"] for v in record["verification"].get("votes", [])}


def verdict_agreement(records: list[dict[str, Any]]) -> tuple[float | None, int]:
    """(Fleiss' kappa of the verdicts over records with two or more votes, how many such records)."""
    overlapping = [votes for votes in (_verdicts(r) for r in records) if len(votes) >= 2]
    return fleiss_kappa([list(votes.values()) for votes in overlapping]), len(overlapping)


def build_status(build_dir: Path) -> StatusReport:
    """Counts and agreement for a build dir."""
    records = read_records(build_dir)
    counts = {"accepted": 0, "rejected": 0, "pending": 0}
    for record in records:
        counts[record["verification"]["status"]] += 1
    verdicts = [(r["id"], _verdicts(r)) for r in records]
    overlapping = [(rid, v) for rid, v in verdicts if len(v) >= 2]
    pairs: dict[str, list[tuple[str, str]]] = {}
    for _, v in overlapping:
        for a, b in combinations(sorted(v), 2):
            pairs.setdefault(f"{a}|{b}", []).append((v[a], v[b]))
    fleiss, overlapping_count = verdict_agreement(records)
    return StatusReport(
        counts=counts, overlapping=overlapping_count, fleiss=fleiss,
        cohen={k: (cohen_kappa(p), len(p)) for k, p in sorted(pairs.items())},
        disagreements=[rid for rid, v in overlapping if len(set(v.values())) > 1])
