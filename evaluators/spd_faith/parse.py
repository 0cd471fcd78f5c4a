"""Reading a model's answer: the final \\boxed{} answer and the fenced JSON list of claims.

Rules (fixed by the project, issue 3): the answer is the last \\boxed{...} in the response; without
one, the last yes/no word or number in the final sentence; otherwise the response is unparsed.
Counts are digits or the words zero to ten. Claims are the last fenced ```json list (or the last
bare JSON list) whose items are objects.
"""
from __future__ import annotations

import json
import re
from typing import Any

from mmfaith.evaluators.answers import last_boxed

NUMBER_WORDS = {"zero": 0, "no": 0, "none": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_FENCED = re.compile(r"```(?:json|JSON)?\s*(\[.*?\])\s*```", flags=re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_YES_NO = re.compile(r"\b(yes|no)\b", flags=re.IGNORECASE)
_COUNT = re.compile(r"\b(\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten)\b", flags=re.IGNORECASE)


def _final_sentence(text: str) -> str:
    body = re.sub(r"```.*?```", " ", text or "", flags=re.DOTALL).strip()
    sentences = [s for s in _SENTENCE_END.split(body) if s.strip()]
    return sentences[-1] if sentences else ""


def parse_yes_no(text: str) -> bool | None:
    """True for yes, False for no, None when unparsed."""
    boxed = last_boxed(text)
    if boxed is not None:
        words = _YES_NO.findall(boxed)
        return words[-1].lower() == "yes" if words else None
    words = _YES_NO.findall(_final_sentence(text))
    return words[-1].lower() == "yes" if words else None


def _to_count(token: str) -> int | None:
    token = token.lower()
    if token.isdigit():
        return int(token)
    return NUMBER_WORDS.get(token)


def parse_count(text: str) -> int | None:
    """The stated number of differences (digits or zero..ten), None when unparsed."""
    boxed = last_boxed(text)
    source = boxed if boxed is not None else _final_sentence(text)
    tokens = _COUNT.findall(source)
    if boxed is not None and not tokens and boxed.lower() in ("none", "no"):
        return 0
    return _to_count(tokens[-1]) if tokens else None


def parse_claims(text: str) -> list[dict[str, Any]] | None:
    """The model's list of claimed differences, or None when the response has no JSON list."""
    candidates = _FENCED.findall(text or "")
    if not candidates:
        start, end = (text or "").rfind("["), (text or "").rfind("]")
        candidates = [text[start:end + 1]] if 0 <= start < end else []
    for candidate in reversed(candidates):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, list) and all(isinstance(item, dict) for item in value):
            return value
    return None
