"""Splitting a chain of thought into steps (the unit of CRM's Step Disruption Rate).

Rule (fixed by the project; the CRM paper compares "reasoning steps" without saying how to cut them):
1. Numbered items: a line (or the text's start) beginning "1.", "2)", "3:", "Step 4:", "Step 5 -"
   starts a step; the marker is removed. Text before the first marker counts as a step too.
2. Otherwise bullets: a line beginning "-", "*" or "•" starts a step.
3. Otherwise sentences: the text is cut after ".", "!" or "?" followed by white space.
Each step's white space is collapsed; steps of fewer than MIN_WORDS words are dropped (a lone
"Answer:" or "So," says nothing to compare).
"""
from __future__ import annotations

import re

MIN_WORDS = 3
_NUMBERED = re.compile(r"(?im)^[ \t]*(?:\*\*)?(?:step[ \t]*)?\d{1,3}[ \t]*(?:[.):]|[ \t]-)(?:\*\*)?[ \t]*")
_BULLET = re.compile(r"(?m)^[ \t]*[-*\u2022][ \t]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _pieces(text: str, marker: re.Pattern[str]) -> list[str] | None:
    starts = [match for match in marker.finditer(text)]
    if not starts:
        return None
    pieces = [text[:starts[0].start()]]
    for here, after in zip(starts, [*starts[1:], None]):
        pieces.append(text[here.end():after.start() if after else len(text)])
    return pieces


def split_steps(text: str | None) -> list[str]:
    """The steps of a chain of thought (module docstring); [] for no text."""
    if not text:
        return []
    pieces = _pieces(text, _NUMBERED) or _pieces(text, _BULLET) or _SENTENCE_END.split(text)
    steps = [" ".join(piece.split()) for piece in pieces]
    return [step for step in steps if len(step.split()) >= MIN_WORDS]
