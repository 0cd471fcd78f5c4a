"""The naturalness audit's contract: what a family declares so its accepted items can be labelled and re-measured.

The audit (docs/audit.md, `benchmarks/naturalness_audit.py`) asks how many of the items that a
family's builder accepts a careful annotator would reject. It rebuilds fixed recipes (sources and
seeds) with the current builders, matches every accepted item to a person's verdict by a key that
stays the same while the builder makes the same item, and prints the reject share of what the
builders accept, the yield and how each gate read on the labelled rejects.

A family declares its part of the audit as an `AuditPart` (`FamilyParts.audit`); the verdicts live in
`benchmarks/audit/<family>.jsonl` (`Verdict`, one JSON object a line, sorted by key). Nothing in this
module knows a family.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from mmfaith.errors import MmfaithError

REASONS: tuple[str, ...] = (
    "wrong_gold",                 # the answer key is wrong (a colour, a count, an existence, a relation)
    "ambiguous_target",           # a person cannot tell which object is meant, or cannot recognise it
    "instance_remains",           # another instance (or a reflection) of a removed or absent thing remains
    "blotch_or_smear",            # a fill of copied content, a smear or a blotch where something was removed
    "remnant",                    # part of the removed object is still visible
    "flat_or_spilled_recolour",   # a recolour without shading, with fringes, or spilling past the object
    "background_recoloured",      # a recolour that paints the background inside a see-through outline
    "answer_leaks",               # the mask or edit gives the answer away (e.g. blur keeps the colour)
    "other",                      # anything else; the note says what
)
VERDICTS: tuple[str, ...] = ("accept", "reject")


@dataclass(frozen=True)
class AuditRecipe:
    """One build the audit draws items from.

    `name` is unique within the family (it appears in the verdicts); `source` is "embedded" (the
    package's COCO sample, always available) or "coco128" (the 128-image sample, built only when the
    benchmark is given its folder); `args` are the arguments of `mmfaith build FAMILY` other than
    `--out` and the COCO source flags, a fixed seed among them.
    """

    name: str
    source: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class GateReading:
    """One gate's measurement of an accepted item: `value` against `limit`; the item passes when the
    value is `passes` ("below" or "above") the limit."""

    gate: str
    value: float
    limit: float
    passes: str

    def margin(self) -> float:
        """How far inside its limit the value lies (0 at the limit, larger = more comfortably accepted)."""
        return self.limit - self.value if self.passes == "below" else self.value - self.limit


@dataclass(frozen=True)
class AuditItem:
    """One gate-accepted item of a build, as the audit sees it.

    `key` names the item by what it is made of (source image, target annotation, edit or template
    and its parameters), never by a build-time counter, so that a rebuild that makes the same item
    gives the same key; `kind` is the edit type, template or mask style the report groups by;
    `gates` are the gates' readings; `images` ((caption, file)) and `lines` (question, gold,
    edit) are what the review card shows the person who labels it.
    """

    key: str
    kind: str
    gates: tuple[GateReading, ...]
    images: tuple[tuple[str, Path], ...]
    lines: tuple[str, ...]


@dataclass(frozen=True)
class AuditPart:
    """A family's part of the audit: its recipes, its accepted items in a build dir, and how many
    candidates the build considered (the yield's denominator, from the build's journal)."""

    recipes: tuple[AuditRecipe, ...]
    items: Callable[[Path], Iterable[AuditItem]]
    candidates: Callable[[Path], int]


@dataclass(frozen=True)
class Verdict:
    """A person's verdict on one item: `verdict` is "accept" or "reject"; `reason` is one of `REASONS`
    for a reject and "" for an accept; `note` says in a few words what was seen; `recipe` names the
    recipe the item came from when it was labelled."""

    key: str
    kind: str
    verdict: str
    reason: str
    note: str
    recipe: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {', '.join(VERDICTS)}")
        if (self.verdict == "reject") != bool(self.reason):
            raise ValueError("a reject carries a reason and an accept none")
        if self.reason and self.reason not in REASONS:
            raise ValueError(f"reason {self.reason!r} is not one of {', '.join(REASONS)}")


def read_verdicts(path: Path) -> dict[str, Verdict]:
    """The verdicts of a family's audit file by key; a malformed line is a one-line error naming the file and line."""
    verdicts: dict[str, Verdict] = {}
    if not path.exists():
        return verdicts
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            verdict = Verdict(**json.loads(line))
        except (ValueError, TypeError) as error:
            raise MmfaithError(f"{path}:{number}: not a verdict ({error})") from None
        if verdict.key in verdicts:
            raise MmfaithError(f"{path}:{number}: key {verdict.key!r} is labelled twice")
        verdicts[verdict.key] = verdict
    return verdicts


def write_verdicts(path: Path, verdicts: Iterable[Verdict]) -> None:
    """Write verdicts one a line, sorted by key (so a change shows as a small diff)."""
    lines = [json.dumps(asdict(verdict), ensure_ascii=False, sort_keys=True)
             for verdict in sorted(verdicts, key=lambda verdict: verdict.key)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
