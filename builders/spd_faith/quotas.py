"""How many pairs of each kind a build makes: --per-tier, --multi, --paper-mix, --controls.

--paper-mix N follows SPD-Faith appendix A.2: two thirds single-difference (2,000 of 3,000) split
easy/medium/hard 10/50/40, one third multi-difference split over 2/3/4/5 differences as
18.7% / 27.5% / 26.9% / 26.9% (the paper states the first two; splitting the rest evenly over 4 and
5 is this project's choice). Counts are rounded by largest remainder so they add up to N.
"""
from __future__ import annotations

from dataclasses import dataclass

TIER_SHARES = {"easy": 0.10, "medium": 0.50, "hard": 0.40}
MULTI_SHARES = {2: 0.187, 3: 0.275, 4: 0.269, 5: 0.269}
SINGLE_SHARE = 2 / 3


@dataclass(frozen=True)
class Quota:
    subset: str
    tier: str | None
    num_edits: int
    count: int

    @property
    def key(self) -> str:
        return f"{self.subset}/{self.tier if self.subset == 'single' else self.num_edits}"


def largest_remainder(total: int, shares: dict[object, float]) -> dict[object, int]:
    """Integer counts proportional to `shares` that add up to `total` (ties to the earlier key)."""
    weight = sum(shares.values())
    raw = {key: total * share / weight for key, share in shares.items()}
    counts = {key: int(value) for key, value in raw.items()}
    leftovers = sorted(shares, key=lambda key: (-(raw[key] - counts[key]), list(shares).index(key)))
    for key in leftovers[: total - sum(counts.values())]:
        counts[key] += 1
    return counts


def make_quotas(per_tier: int, multi: int, paper_mix: int | None, controls: int) -> list[Quota]:
    """The build's quotas in processing order: single easy, medium, hard; multi 2..5; control."""
    if paper_mix is not None:
        single_total = round(paper_mix * SINGLE_SHARE)
        tiers = largest_remainder(single_total, TIER_SHARES)
        multis = largest_remainder(paper_mix - single_total, MULTI_SHARES)
    else:
        tiers = {tier: per_tier for tier in TIER_SHARES}
        multis = largest_remainder(multi, {k: 1.0 for k in MULTI_SHARES})
    quotas = [Quota("single", str(tier), 1, count) for tier, count in tiers.items()]
    quotas += [Quota("multi", None, int(k), count) for k, count in multis.items()]
    quotas.append(Quota("control", None, 0, controls))
    return [q for q in quotas if q.count > 0]
