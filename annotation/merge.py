"""Verdict policy and the merge of Votes into records (family-neutral).

A record's `verification` after a merge: `status` (accepted|rejected|pending), `annotators`,
`reasons` (the union of the rejecting votes' reasons), `notes`, `task_id`, `time` (the newest
counted annotation's update time), `votes` (one per counted annotation: annotator, verdict,
reasons, annotation id; what `annotate status` computes agreement from) and `history`, to which
every changed field appends {"field", "previous", "value", "time", "task_id"}. Edits of free-text
fields (Vote.edits) apply only to an accepted record and only when all accepting votes that edit
the field agree; otherwise the field is left as it was and the conflict is returned. A merge that
changes nothing returns the record unchanged, so pulling twice writes the same bytes.
"""
from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mmfaith.annotation.votes import POLICIES, Vote
from mmfaith.jsonl import canonical_json


@dataclass
class MergeOutcome:
    """The merged record, whether its annotators disagreed on the verdict, and edit conflicts
    as {field path: {annotator: text}}."""

    record: dict[str, Any]
    disagreement: bool = False
    conflicts: dict[str, dict[str, str]] = field(default_factory=dict)


def decide(votes: list[Vote], policy: str) -> str:
    """accepted | rejected | pending from the votes. any-reject: one reject rejects, else accepted.
    majority: more accepts than rejects accepts, more rejects rejects, a tie stays pending.
    No votes: pending."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {POLICIES}")
    if not votes:
        return "pending"
    count = Counter(v.verdict for v in votes)
    if policy == "any-reject":
        return "rejected" if count["reject"] else "accepted"
    if count["accept"] == count["reject"]:
        return "pending"
    return "accepted" if count["accept"] > count["reject"] else "rejected"


def _get(record: dict[str, Any], path: str) -> Any:
    """The value at a dotted path (list indices as numbers)."""
    value: Any = record
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _set(record: dict[str, Any], path: str, new: Any) -> None:
    """Set the value at a dotted path that already exists."""
    *parents, last = path.split(".")
    target: Any = record
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = new
    else:
        target[last] = new


def _agreed_edits(votes: list[Vote]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Edits all accepting votes agree on, and the conflicting ones per field."""
    by_field: dict[str, dict[str, Any]] = {}
    for vote in votes:
        if vote.verdict == "accept":
            for path, text in vote.edits.items():
                by_field.setdefault(path, {})[vote.annotator] = text
    # Values compared as canonical JSON: an edit may be a list (a corrected box), not only text.
    agreed = {p: next(iter(t.values())) for p, t in by_field.items() if len({canonical_json(v) for v in t.values()}) == 1}
    conflicts = {p: t for p, t in by_field.items() if len({canonical_json(v) for v in t.values()}) > 1}
    return agreed, conflicts


def merge_record(record: dict[str, Any], task_id: int, votes: list[Vote], policy: str, now: str) -> MergeOutcome:
    """Apply a task's counted votes to a copy of `record` under `policy`; `now` stamps history entries."""
    status = decide(votes, policy)
    old = record["verification"]
    votes = sorted(votes, key=lambda v: (v.annotator, v.annotation_id))
    notes = "\n".join(f"{v.annotator}: {v.notes}" for v in votes if v.notes) or None
    times = [v.time for v in votes if v.time]
    verification = {
        "status": status,
        "annotators": sorted({v.annotator for v in votes}),
        "reasons": sorted({r for v in votes if v.verdict == "reject" for r in v.reasons}),
        "notes": notes,
        "task_id": task_id,
        "time": max(times) if times else None,
        "votes": [{"annotator": v.annotator, "verdict": v.verdict, "reasons": list(v.reasons),
                   "annotation_id": v.annotation_id} for v in votes],
    }
    agreed, conflicts = _agreed_edits(votes) if status == "accepted" else ({}, {})
    history = list(old.get("history", []))
    merged = copy.deepcopy(record)
    annotators = verification["annotators"]
    if old.get("status") != status:
        history.append({"field": "verification.status", "previous": old.get("status"), "value": status,
                        "time": now, "task_id": task_id, "annotators": annotators})
    for path, text in sorted(agreed.items()):
        previous = _get(merged, path)
        if previous != text:
            _set(merged, path, text)
            history.append({"field": path, "previous": previous, "value": text, "time": now,
                            "task_id": task_id, "annotators": annotators})
    verification["history"] = history
    unchanged = {k: v for k, v in old.items() if k not in verification}
    merged["verification"] = {**unchanged, **verification}
    if merged == record:
        merged = record
    disagreement = len({v.verdict for v in votes}) > 1
    return MergeOutcome(record=merged, disagreement=disagreement, conflicts=conflicts)
