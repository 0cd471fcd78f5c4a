"""Reading the fenced JSON list of claims out of a model's answer (yes/no and counts are read by the
shared reader, evaluators/answers.py: `read_yes_no`, `read_count`; docs/answers.md).

Claims are the last fenced ```json list (or the last bare JSON list) whose items are objects.
"""
from __future__ import annotations

import json
import re
from typing import Any


_FENCED = re.compile(r"```(?:json|JSON)?\s*(\[.*?\])\s*```", flags=re.DOTALL)


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
