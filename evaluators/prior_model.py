"""The `prior` reference model's choice for any family's items (mmfaith/prior.py's leave-one-out prior).

Contract
--------
`prior_answers(rows)` takes, per item, (item id, template key, options, gold) where options are the
item's [{"label", "text"}] (empty for a free-form question) and gold is the gold label (multiple
choice) or the gold text (free form); it returns item id -> the answer the prior gives:
- multiple choice: the option whose text (case and spaces folded) is the most frequent gold TEXT
  of the template among the other items, so the same answer follows its text through every
  rotation of the options; when no option has that text, the most frequent gold LETTER of the
  template among the other items (a position prior), and when the template has no other
  multiple-choice item, the most frequent gold letter among all the other items (a letter the
  item's options lack is passed over: None when neither fits);
- free form: the most frequent gold text of the template among the other items (None when the
  item is its template's only one). It reads neither the image nor the item's own gold.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mmfaith.prior import leave_one_out_prior

Row = tuple[str, str, Sequence[Mapping[str, Any]], str]


def fold(text: str) -> str:
    """An option's or gold's text compared case- and space-insensitively."""
    return " ".join(str(text).lower().split())


def gold_text(options: Sequence[Mapping[str, Any]], gold: str) -> str:
    """The folded text of the gold: its option's text, or the gold itself for a free-form question."""
    return fold(next((option["text"] for option in options if option["label"] == gold), gold))


def prior_answers(rows: Iterable[Row]) -> dict[str, str | None]:
    """item id -> the prior's answer (module docstring)."""
    rows = list(rows)
    by_text = leave_one_out_prior((item_id, template, gold_text(options, gold))
                                  for item_id, template, options, gold in rows)
    by_letter = leave_one_out_prior((item_id, template, gold) for item_id, template, options, gold in rows if options)
    any_letter = leave_one_out_prior((item_id, "", gold) for item_id, _, options, gold in rows if options)
    answers: dict[str, str | None] = {}
    for item_id, _, options, _ in rows:
        text = by_text[item_id]
        if not options:
            answers[item_id] = text
            continue
        labels = [option["label"] for option in options]
        matching = [option["label"] for option in options if fold(option["text"]) == text]
        letters = [letter for letter in (by_letter.get(item_id), any_letter.get(item_id)) if letter in labels]
        answers[item_id] = (matching or letters or [None])[0]
    return answers
