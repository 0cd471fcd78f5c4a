"""The `prior` reference model's choice for any family's items: the one prior definition of the builds.

Contract
--------
`prior_answers(rows)` takes, per item (or per probe, where a family's build keys its templates per
probe), (key, template key, options, gold) where options are the item's [{"label", "text"}] (empty
for a free-form question) and gold is the gold label (multiple choice) or the gold text (free
form); it returns key -> the answer the prior gives:
- multiple choice: `mmfaith.gold_balance.prior_choices`, the definition build.json's, the summary
  line's and the card's "prior" scores use: of the item's own options, the one whose text is most
  often the gold of the OTHER items of its template, ties by its letter's count, then the earliest
  letter. The templates are the builds' (CRM: question type; MCoT: category; VFaith: question type
  and probe side), so the served prior scores what build.json says it would.
- free form: the most frequent gold text (case and spaces folded) of the template among the other
  items (mmfaith/prior.py), None when the item is its template's only one.
It reads neither the image nor the item's own gold.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

from mmfaith.gold_balance import GoldItem, prior_choices
from mmfaith.prior import leave_one_out_prior

Row = tuple[Hashable, str, Sequence[Mapping[str, Any]], str]


def fold(text: str) -> str:
    """A free-form gold compared case- and space-insensitively."""
    return " ".join(str(text).lower().split())


def prior_answers(rows: Iterable[Row]) -> dict[Hashable, str | None]:
    """key -> the prior's answer (module docstring)."""
    rows = list(rows)
    chosen = [row for row in rows if row[2]]
    answers: dict[Hashable, str | None] = dict(zip(
        (key for key, _, _, _ in chosen),
        prior_choices([GoldItem.of_record(template, options, gold) for _, template, options, gold in chosen])))
    free = [(key, template, fold(gold)) for key, template, options, gold in rows if not options]
    answers.update(leave_one_out_prior(free))  # type: ignore[arg-type]
    return answers
