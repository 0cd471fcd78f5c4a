"""Reading a VFaith answer (VFaith section 4.1: "we first specify \\boxed{} as the output format,
extract answers from it, and directly compare them with the standard answers").

Multiple choice and perception sets are read by the shared reader (evaluators/answers.py,
docs/answers.md: `read_choice`, `read_choice_set`); with `--extract paper` only the last
\\boxed{} is read, as the paper does. Free form (`parse_free`): the normalised last answer tag
(paper: the last \\boxed{}); by default a reply of at most five words without a tag is its own
answer. The scorer compares it with the gold's normalised text and asks the judge where they differ.
Normalisation: lower case, surrounding punctuation and a leading article dropped, inner whitespace
collapsed, number words zero to twenty as digits, colour synonyms as the basic colour term
(mmfaith/vocabulary.normalize_color: "grey" -> "gray").
"""
from __future__ import annotations

import re

from mmfaith.vocabulary import normalize_color
from mmfaith.evaluators.answers import NUMBER_WORDS, last_boxed, last_tag, plain

_ARTICLE = re.compile(r"^(?:a|an|the)\s+")


def normalize(text: str) -> str:
    """The comparable form of a short answer (module docstring)."""
    value = re.sub(r"\s+", " ", (text or "").strip().lower())
    value = value.strip(" .,:;!?\"'`()[]")
    value = _ARTICLE.sub("", value)
    if value in NUMBER_WORDS:
        return str(NUMBER_WORDS[value])
    color = normalize_color(value) if " " not in value else None
    return color or value


def parse_free(response: str | None, rule: str = "default") -> str | None:
    """The normalised final answer of a free-form reply: its last answer tag (the paper: its last
    \\boxed{}); by default, without a tag, a reply of at most five words itself. None when unparsed."""
    answer = last_boxed(response) if rule == "paper" else last_tag(response)
    if answer is None and rule != "paper" and response and len(plain(response).split()) <= 5:
        answer = response
    return None if answer is None or not normalize(plain(answer)) else normalize(plain(answer))
