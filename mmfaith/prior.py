"""The template prior: what a model that reads only the question's template would answer (leave one out).

Contract
--------
`leave_one_out_prior(rows)` takes (item id, template key, gold) triples, one per item (or several,
when an item has several golds of one template: VFaith's original and edited answers), and returns
item id -> the most frequent gold among the OTHER items' rows of the same template, or None when the
item is its template's only one. Ties go to the gold that sorts first (as a string), so the answer
is the same on every machine and in every order of `rows`. Golds are compared as given: a family
decides what its template key and its gold are (an option's text, a count, "yes"/"no") and
documents it.

This is the blind baseline of MMStar's leakage (Chen et al. 2024, "Are We on the Right Way for
Evaluating Large Vision-Language Models?", section 3): it never sees the image or the item's own
gold, so what it scores is what the question's wording and the dataset's gold distribution give
away. For multiple choice the builds and the `prior` reference models use mmfaith/gold_balance.py's
`prior_choices` (an option of the item's own); this module serves free-form and per-probe golds
(SPD-Faith's same/different/count, VFaith's perception sets).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable
from typing import TypeVar

G = TypeVar("G", bound=Hashable)


def leave_one_out_prior(rows: Iterable[tuple[str, str, G]]) -> dict[str, G | None]:
    """item id -> the most frequent gold of its template among the other items (module docstring)."""
    rows = list(rows)
    counts: dict[str, Counter[G]] = {}
    for _, template, gold in rows:
        counts.setdefault(template, Counter())[gold] += 1
    answers: dict[str, G | None] = {}
    own: dict[tuple[str, str], Counter[G]] = {}
    for item_id, template, gold in rows:
        own.setdefault((item_id, template), Counter())[gold] += 1
    for item_id, template, gold in rows:
        others = counts[template] - own[(item_id, template)]
        ranked = sorted(((count, value) for value, count in others.items()),
                        key=lambda pair: (-pair[0], str(pair[1])))
        answers[item_id] = ranked[0][1] if ranked else None
    return answers
