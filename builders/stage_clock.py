"""CPU seconds a build spends per stage, split by what became of the candidate (build.json).

A work unit (a slot, a question) runs its stages inside `clock.stage(name)`; the seconds are the
process's CPU time (`time.process_time`), which other load on the machine changes far less than
wall time. The driver adds each unit's clock into the build's totals under "accepted" or
"rejected", so build.json says how much of the work went into candidates that were thrown away.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

STAGES = ("plan", "inpaint", "gates", "encode")
"""plan: reading the image, masks and the edit plan; inpaint: applying the edits (inpainting,
recolouring, pasting); gates: the quality gates; encode: PNG encoding and hashing."""


@dataclass
class StageClock:
    """CPU seconds per stage of one unit of work (or, added up, of a build)."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.process_time()
        try:
            yield
        finally:
            self.seconds[name] += time.process_time() - started

    def add(self, other: StageClock) -> None:
        for name, value in other.seconds.items():
            self.seconds[name] += value


@dataclass
class BuildClock:
    """A build's CPU seconds per stage for the candidates it kept and those it rejected."""

    accepted: StageClock = field(default_factory=StageClock)
    rejected: StageClock = field(default_factory=StageClock)

    def count(self, unit: StageClock, kept: bool) -> None:
        (self.accepted if kept else self.rejected).add(unit)

    def as_json(self) -> dict[str, object]:
        accepted, rejected = sum(self.accepted.seconds.values()), sum(self.rejected.seconds.values())
        return {"accepted": {k: round(v, 3) for k, v in self.accepted.seconds.items()},
                "rejected": {k: round(v, 3) for k, v in self.rejected.seconds.items()},
                "rejected_share": round(rejected / (accepted + rejected), 4) if accepted + rejected else None}
