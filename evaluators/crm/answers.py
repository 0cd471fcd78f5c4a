"""Reading a final answer: abstentions, option letters, free-form text.

Abstention (fixed by the project): the answer says the question cannot be answered from what is
visible. It is recognised by any of ABSTENTION_PATTERNS (case-insensitive), for example "cannot be
determined", "can't tell", "not visible", "is hidden", "unable to answer", "not enough
information", "none of the options". An abstention is an answer of its own: it flips against any
option and against any free-form answer that is not an abstention.

Option letter (multiple choice), first rule that applies: the answer is an abstention -> ABSTAIN;
it starts with a label ("B", "(B)", "B.", "B)"); it contains "answer is (B)" / "answer: B" /
"option B"; it contains exactly one option's text as a whole word or phrase -> that option;
else None (unreadable; compared by its normalised text).
"""
from __future__ import annotations

import re
from typing import Any

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


def normalised(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def choice(text: str | None, options: list[dict[str, Any]]) -> str | None:
    """The option label an answer picks, ABSTAIN, or None when unreadable (module docstring)."""
    if text is None:
        return None
    if is_abstention(text):
        return ABSTAIN
    labels = {option["label"] for option in options}
    stripped = text.strip().lstrip("*").strip()
    start = re.match(r"^\(?([A-Z])\)?(?:[.):,\s*]|$)", stripped)
    if start and start.group(1) in labels:
        return start.group(1)
    stated = re.search(r"(?:answer(?: is)?|option)\s*[:\-]?\s*\(?([A-Z])\)?\b", text, re.IGNORECASE)
    if stated and stated.group(1).upper() in labels:
        return stated.group(1).upper()
    said = normalised(text)
    named = [o["label"] for o in options if re.search(rf"\b{re.escape(normalised(o['text']))}\b", said)]
    return named[0] if len(named) == 1 else None
