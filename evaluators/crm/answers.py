"""Reading a final answer: abstentions, option letters, free-form text.

Abstention (fixed by the project): the answer says the question cannot be answered from what is
visible. It is recognised by any of ABSTENTION_PATTERNS (case-insensitive), for example "cannot be
determined", "can't tell", "not visible", "is hidden", "unable to answer", "not enough
information", "none of the options". An abstention is an answer of its own: it flips against any
option and against any free-form answer that is not an abstention.

Option letter (multiple choice): an abstention -> ABSTAIN; else the shared reader's label
(evaluators/answers.py, docs/answers.md); an empty or unreadable answer is None: unanswered, never
compared as text, so never a flip.
"""
from __future__ import annotations

import re
from typing import Any

from mmfaith.evaluators.answers import read_choice

ABSTAIN = "ABSTAIN"
ABSTENTION_PATTERNS = (
    r"can ?not be (?:determined|answered|told|seen|identified)", r"can'?t be (?:determined|answered|told|seen)",
    r"(?:cannot|can'?t|could not|couldn'?t|unable to) (?:determine|tell|answer|see|identify|know)",
    r"not (?:possible|able) to (?:determine|tell|answer|see)", r"\bnot visible\b", r"\binvisible\b",
    r"\bis (?:hidden|masked|covered|obscured|occluded)\b", r"not enough (?:information|visual)",
    r"insufficient (?:information|evidence)", r"none of the (?:options|choices|above)", r"\bundeterminable\b",
    r"\bno way to (?:tell|know|determine)\b",
)
_ABSTENTION = re.compile("|".join(f"(?:{pattern})" for pattern in ABSTENTION_PATTERNS), re.IGNORECASE)


def is_abstention(text: str | None) -> bool:
    """Whether an answer abstains (module docstring)."""
    return bool(text) and _ABSTENTION.search(text) is not None


def choice(text: str | None, options: list[dict[str, Any]]) -> str | None:
    """The option label an answer picks (the shared reader, evaluators/answers.py), ABSTAIN, or None when
    it is empty or unreadable."""
    if text is None or not text.strip():
        return None
    if is_abstention(text):
        return ABSTAIN
    return read_choice(text, options)
