"""One rule for failed, missing, empty and unparsed answers, in every family (docs/answers.md).

Each expected answer (an (id, probe) the scorer reads) has one status:
- `failed`: the call failed (a prediction line with a null response, none answered later);
- `missing`: no line at all (a submission that left it out, a run that never asked);
- `empty`: the reply is empty or blank (never equal to another answer);
- `unparsed`: the reader (evaluators/answers.py) found no answer in it;
- `answered`: read.
`Tally` counts them apart, with the paper-format compliance of the replies received (where the
family's paper fixes a format; None elsewhere). `answered_share` = answered / expected;
`parse_rate` = answered / replies received (answered + unparsed + empty); `paper_format_share` =
replies in the paper's format / replies whose format was checked. Warnings: answered share
below `threshold` (default 0.90), or more than 10 % of the replies received unread. Paired metrics
use only pairs where both sides are `answered` and report how many pairs were left out.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("answered", "unparsed", "empty", "failed", "missing")
COVERAGE_THRESHOLD = 0.90
UNREAD_LIMIT = 0.10


def status_of(line: dict[str, Any] | None, failed: bool, answer: object) -> str:
    """The status of one expected answer: its answered line (None when there is none), whether a call for
    it failed, and what the reader made of it (None: nothing)."""
    if line is None:
        return "failed" if failed else "missing"
    response = line.get("response")
    if response is None:
        return "failed"
    if not str(response).strip():
        return "empty"
    return "unparsed" if answer is None else "answered"


@dataclass
class Tally:
    """Counts per status, and how many replies received were in the paper's format."""

    threshold: float = COVERAGE_THRESHOLD
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATUSES, 0))
    paper_format: int = 0
    paper_format_seen: int = 0

    def add(self, status: str, paper_format: bool | None = None) -> str:
        """Count one expected answer; `paper_format` None where the family has no paper format. Returns `status`."""
        self.counts[status] += 1
        if paper_format is not None:
            self.paper_format_seen += 1
            self.paper_format += int(paper_format)
        return status

    def add_tally(self, other: Tally) -> None:
        """Count `other`'s answers too (a scorer's chunks, each tallied apart)."""
        for status, count in other.counts.items():
            self.counts[status] += count
        self.paper_format += other.paper_format
        self.paper_format_seen += other.paper_format_seen

    def to_json(self) -> dict[str, Any]:
        """metrics.json's `answers` block (module docstring), with its warnings."""
        expected = sum(self.counts.values())
        received = self.counts["answered"] + self.counts["unparsed"] + self.counts["empty"]
        block: dict[str, Any] = {"expected": expected, **self.counts,
                                 "answered_share": _share(self.counts["answered"], expected),
                                 "parse_rate": _share(self.counts["answered"], received),
                                 "paper_format_share": _share(self.paper_format, self.paper_format_seen),
                                 "coverage_threshold": self.threshold}
        block["warnings"] = warnings(block)
        return block


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None


def warnings(block: dict[str, Any]) -> list[str]:
    """The coverage and unread warnings of an `answers` block."""
    found = []
    if block["answered_share"] is not None and block["answered_share"] < block["coverage_threshold"]:
        found.append(f"only {block['answered_share']:.1%} of the {block['expected']} expected answers were read "
                     f"(below {block['coverage_threshold']:.0%}): {block['failed']} failed calls, {block['missing']} "
                     f"missing, {block['empty']} empty, {block['unparsed']} unparsed")
    if block["parse_rate"] is not None and 1 - block["parse_rate"] > UNREAD_LIMIT:
        found.append(f"{1 - block['parse_rate']:.1%} of the replies received could not be read (above "
                     f"{UNREAD_LIMIT:.0%}); see docs/answers.md")
    return found


def console(block: dict[str, Any]) -> str:
    """The fragment every score's console line ends with."""
    paper = block["paper_format_share"]
    return (f"answered {block['answered']}/{block['expected']} ({_percent(block['answered_share'])}); "
            f"{block['failed']} failed, {block['missing']} missing, {block['empty']} empty, {block['unparsed']} "
            f"unparsed; parse rate {_percent(block['parse_rate'])}"
            + ("" if paper is None else f"; paper format {_percent(paper)}"))


def print_warnings(block: dict[str, Any]) -> None:
    """Each warning of an `answers` block as one `mmfaith: warning:` line on stderr."""
    for warning in block["warnings"]:
        print(f"mmfaith: warning: {warning}", file=sys.stderr)


def markdown(block: dict[str, Any]) -> list[str]:
    """report.md's "Answers read" section."""
    lines = ["## Answers read", "", "How each expected answer ended (docs/answers.md): " + console(block) + ".", ""]
    lines += [f"**Warning:** {warning}." for warning in block["warnings"]]
    return lines + ([""] if block["warnings"] else [])


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"
