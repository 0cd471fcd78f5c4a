"""Reading a VFaith answer (VFaith section 4.1: "we first specify \\boxed{} as the output format,
extract answers from it, and directly compare them with the standard answers").

Rules (fixed by the project):
- The answer is the last \\boxed{...} of the response (evaluators/answers.py); a response without
  one is unparsed.
- Multiple choice (`parse_choice`): the boxed text is an option's label ("B", "(B)", "B.", "B. blue"),
  or, after normalisation (`normalize`), an option's text ("blue", "Blue.", "the blue one" is not);
  anything else is unparsed.
- Perception (`parse_choice_set`): the boxed text split on commas, semicolons, "and" or spaces
  between letters; every part must be an option (label or normalised text), else unparsed. "none"
  or an empty box is the empty set.
- Free form: the normalised boxed text (the scorer compares it with the gold's, and asks the
  judge where they differ).
Normalisation: lower case, surrounding punctuation and a leading article dropped, inner whitespace
collapsed, number words zero to twenty as digits, colour synonyms as the basic colour term
(builders/colors.normalize_color: "grey" -> "gray").
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mmfaith.builders.colors import normalize_color
from mmfaith.evaluators.answers import last_boxed

NUMBER_WORDS = {word: str(value) for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_LABEL = re.compile(r"^\(?([A-Za-z])\)?(?:[.:)]\s*(.*))?$")
_SPLIT = re.compile(r"\s*(?:,|;|\band\b|&)\s*")
_ARTICLE = re.compile(r"^(?:a|an|the)\s+")


def normalize(text: str) -> str:
    """The comparable form of a short answer (module docstring)."""
    value = re.sub(r"\s+", " ", (text or "").strip().lower())
    value = value.strip(" .,:;!?\"'`()[]")
    value = _ARTICLE.sub("", value)
    if value in NUMBER_WORDS:
        return NUMBER_WORDS[value]
    color = normalize_color(value) if " " not in value else None
    return color or value


def _option_of(part: str, options: Sequence[dict[str, Any]]) -> str | None:
    """The label one answer part names: a label ("B", "(B)", "B.", "B. blue" when B's text is blue), or
    an option's normalised text; None otherwise (also for "B. red" when B is not red)."""
    by_label = {option["label"]: option for option in options}
    match = _LABEL.match(part.strip())
    if match and match.group(1).upper() in by_label:
        label, rest = match.group(1).upper(), match.group(2)
        if not rest or normalize(rest) == normalize(by_label[label]["text"]):
            return label
        return None
    wanted = normalize(part)
    found = [option["label"] for option in options if normalize(option["text"]) == wanted]
    return found[0] if len(found) == 1 else None


def parse_choice(response: str | None, options: Sequence[dict[str, Any]]) -> str | None:
    """The option label a multiple-choice answer names; None when unparsed."""
    boxed = last_boxed(response)
    if boxed is None or not boxed.strip():
        return None
    return _option_of(boxed, options)


def parse_choice_set(response: str | None, options: Sequence[dict[str, Any]]) -> frozenset[str] | None:
    """The set of option labels a perception answer names; None when unparsed."""
    boxed = last_boxed(response)
    if boxed is None:
        return None
    text = boxed.strip()
    if not text or normalize(text) == "none":
        return frozenset()
    parts = [part for part in _SPLIT.split(text) if part.strip()]
    if len(parts) == 1 and re.fullmatch(r"[A-Za-z](?:\s+[A-Za-z])+", parts[0].strip()):
        parts = parts[0].split()  # "A C"
    labels = [_option_of(part, options) for part in parts]
    if any(label is None for label in labels):
        return None
    return frozenset(label for label in labels if label is not None)


def parse_free(response: str | None) -> str | None:
    """The normalised boxed text of a free-form answer; None when unparsed."""
    boxed = last_boxed(response)
    return None if boxed is None or not normalize(boxed) else normalize(boxed)
