"""Reading a final answer out of a model's reply: one reader for every family (docs/answers.md).

Contract
--------
- `last_boxed(text)`: the content of the last `\\boxed{...}` (nested braces allowed), the papers'
  format (SPD-Faith appendix B, VFaith section 4.1). `last_tag(text)`: the content of the last
  answer tag of either kind, `\\boxed{...}` or `<answer>...</answer>` (any case).
- `read_choice(text, options)`: the option label a multiple-choice reply picks, None when it picks
  none. With an answer tag, the last tag's content is read; without, the reply. A content reads as:
  a label in any dress (`A`, `a`, `(A)`, `A.`, `A)`, `**A**`, `Answer: A`, `Option B`,
  `\\text{A}`, `\\textbf{B}`), a label with its own option's text (`B) blue car`; another option's
  text makes it unanswered), or exactly one option's text. A longer reply is read from its answer
  statements ("the answer is (B)", "Answer: **B**", "I choose B", a label opening the reply
  "B. ..." / "(B) ...", a label on the last line, a correction "no wait, B"): the LAST statement
  wins; the article "A" ("A careful look ...") is never a label; two different options ("A and
  C", "B or C"), a refusal, or nothing recognisable is unanswered, never a guess. A reply with no
  statement at all is read by the option texts it names, when it names exactly one.
- `read_choice_set(text, options)`: the set of labels a perception reply names (`A, C`, `A and
  C`, `AC`, `A/C`, `Only A`, option texts; `none` or an empty box is the empty set); None when a
  part is no option.
- `read_yes_no(text, asks)`: True/False for yes/no to a question that `asks` "same" or "different"
  (a statement such as "no difference" or "identical" is mapped through the question); a leading
  "Yes,"/"No," wins over what follows.
- `read_count(text)`: the number of differences a reply states (digits or number words; "no
  differences", "none", "identical" are 0); coordinates, sizes and list numbers are not counts.
- `Rule`: `default` (everything above) or `paper` (a family's own rule where the paper has one:
  only an answer tag is read; a reply without one is unanswered).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mmfaith.vocabulary import normalize_color

RULES = ("default", "paper")
NUMBER_WORDS = {word: value for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_BOXED_START = re.compile(r"\\boxed\s*\{")
_LATEX_WRAP = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|emph|texttt)\s*\{([^{}]*)\}")
_LEAD_WORDS = re.compile(r"^(?:(?:the\s+)?(?:final\s+|correct\s+|best\s+)?(?:answer|option|choice)s?(?:\s+is|\s+are)?"
                         r"|only|options?|choices?|letter)\s*[:\-=]?\s*", re.IGNORECASE)
_REFUSAL = re.compile(r"\b(?:can ?not|can'?t|unable to|impossible to|not possible to|no way to)\s+(?:be\s+)?"
                      r"(?:determine|determined|tell|told|answer|answered|say|know|see|identify)|"
                      r"\bnone of the (?:options|choices|above)\b|\bnot enough information\b", re.IGNORECASE)
_SPLIT = re.compile(r"\s*(?:,|;|/|&|\+|\band\b|\bor\b)\s*", re.IGNORECASE)
_CONNECTOR = r"(?:because|since|as|is|was|seems|would|should|which|-|–|—|:)"
_TWO = "\x00two options"
_WRAP_OPEN, _WRAP_CLOSE = r"[*_`\[(]*", r"[*_`\])]*"


def _letter(name: str) -> str:
    """A label in its dress (wrappers kept apart so the article test can see them), groups named after `name`."""
    return (rf"(?P<{name}open>{_WRAP_OPEN})(?P<{name}letter>[A-Za-z])(?P<{name}close>{_WRAP_CLOSE})(?![\w'])")


_STATEMENT = re.compile("|".join((
    rf"\b(?:final\s+|correct\s+|right\s+|best\s+)?(?:answer|option|choice)(?:\s+(?:is|would be|should be|must be|="
    rf"|will be))?\s*[:\-=]?\s*(?:option\s+|choice\s+|letter\s+)?{_letter('s')}",
    rf"\bI\s+(?:would\s+)?(?:think|believe|choose|pick|select|go with|say|answer)(?:\s+it'?s|\s+that)?\s*"
    rf"(?:option\s+)?{_letter('i')}",
    rf"\b(?:no,?\s+wait|wait|actually|correction|on (?:second thought|reflection)|I mean|rather)[,:]?\s*"
    rf"(?:it'?s\s+|it is\s+|the answer is\s+|option\s+)?{_letter('c')}",
    r"\*\*\(?(?P<bold>[A-Z])[).:]?\*\*",
)), re.IGNORECASE)
_OPENING = re.compile(r"^\W*?(?:\((?P<paren>[A-Za-z])\)|(?P<label>[A-Z])(?=[.):,]|\s*$|\s+(?:because|since|-|–|—)\s))")
_MULTI_AFTER = re.compile(r"^\s*(?:,|and|or|&|/)\s*[*(]*([A-Za-z])[*)]*(?![\w'])", re.IGNORECASE)


def _boxed_spans(text: str) -> list[tuple[int, str]]:
    """(start, content) of every \\boxed{...}, braces balanced; an unclosed box is skipped."""
    spans = []
    for match in _BOXED_START.finditer(text):
        close = text.find("}", match.end())
        if close >= 0 and text.find("{", match.end(), close) < 0:  # no brace inside: the first "}" closes it
            spans.append((match.start(), text[match.end():close]))
            continue
        depth, index = 1, match.end()
        while index < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[index], 0)
            index += 1
        if depth == 0:
            spans.append((match.start(), text[match.end():index - 1]))
    return spans


def last_boxed(text: str | None) -> str | None:
    """The content of the last \\boxed{...}, stripped; None if there is none."""
    spans = _boxed_spans(text or "")
    return spans[-1][1].strip() if spans else None


def last_tag(text: str | None) -> str | None:
    """The content of the last answer tag (`\\boxed{}` or `<answer></answer>`), stripped; None without one."""
    spans = _boxed_spans(text or "") + [(m.start(), m.group(1)) for m in _ANSWER_TAG.finditer(text or "")]
    return max(spans)[1].strip() if spans else None

_EMPHASIS = re.compile(r"[*_`$]")
_ARTICLE = re.compile(r"^(?:a|an|the)\s+")
_PUNCTUATION = re.compile(r"[^\w\s]")
_BARE_LABEL = re.compile(r"[(\[]?([A-Za-z])[)\]]?[.):]?")
_LABEL_WITH_TEXT = re.compile(r"\(?([A-Za-z])(?:[.):]\s*|\s+)(.+)", re.DOTALL)
_NOT_SAME = re.compile(r"\bnot (?:the same|identical)\b", re.IGNORECASE)
_FENCE = re.compile(r"```.*?```", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
"""Patterns the readers apply to every answer, compiled once (a scorer reads hundreds of thousands)."""


def plain(text: str) -> str:
    """A short answer without its dress: LaTeX wrappers, Markdown emphasis, `$`, a leading "Answer:"/"Option"."""
    value = text
    while _LATEX_WRAP.search(value):
        value = _LATEX_WRAP.sub(r"\1", value)
    value = _EMPHASIS.sub("", value).strip()
    previous = None
    while previous != value:
        previous, value = value, _LEAD_WORDS.sub("", value).strip()
    return value.strip(" \t\n.,;:!")


def normalised(text: str) -> str:
    """Lower case, punctuation as spaces, whitespace collapsed, a leading article dropped, a number word as
    digits, a colour synonym as its basic colour term (mmfaith/vocabulary.normalize_color: "grey" -> "gray")."""
    value = _ARTICLE.sub("", " ".join(_PUNCTUATION.sub(" ", text.lower()).split()))
    if value in NUMBER_WORDS:
        return str(NUMBER_WORDS[value])
    return (normalize_color(value) if value and " " not in value else None) or value


def _labels(options: Sequence[dict[str, Any]]) -> dict[str, str]:
    return {option["label"].upper(): option["label"] for option in options}


def _by_text(text: str, options: Sequence[dict[str, Any]]) -> str | None:
    wanted = normalised(text)
    found = [option["label"] for option in options if normalised(option["text"]) == wanted]
    return found[0] if len(found) == 1 else None


def _part_label(part: str, options: Sequence[dict[str, Any]]) -> str | None:
    """The label one short part names: a label, a label with its own option's text, or an option's text;
    `_TWO` for a label with another option's text ("B. red" where red is A)."""
    labels = _labels(options)
    value = plain(part)
    bare = _BARE_LABEL.fullmatch(value)
    if bare:
        return labels.get(bare.group(1).upper())
    with_text = _LABEL_WITH_TEXT.fullmatch(value)
    if with_text and with_text.group(1).upper() in labels:
        label = labels[with_text.group(1).upper()]
        named = _by_text(with_text.group(2), options)
        if named is not None:
            return label if named == label else _TWO
    return _by_text(value, options)


def _short_choice(content: str, options: Sequence[dict[str, Any]]) -> tuple[bool, str | None]:
    """(decided, label) for a short content: a label, a label set of one, or an option's text."""
    value = plain(content)
    if not value or _REFUSAL.search(value):
        return True, None
    single = _part_label(value, options)
    if single is not None:
        return True, None if single == _TWO else single
    parts = [part for part in _SPLIT.split(value) if part.strip()]
    if len(parts) > 1:
        read = [_part_label(part, options) for part in parts]
        if all(label is not None for label in read):
            return True, read[0] if len(set(read)) == 1 and read[0] != _TWO else None
    return False, None


def _article(match: re.Match[str], group: str, text: str) -> bool:
    """Whether a matched bare letter is the article "a"/"A" (or any bare lower-case letter before a word)."""
    letter = match.group(group)
    wrapped = bool(match.group(group.replace("letter", "open")) or match.group(group.replace("letter", "close")))
    after = text[match.end():]
    if wrapped or not re.match(r"\s+[A-Za-z]", after):
        return False
    return (letter in "Aa" or letter.islower()) and not re.match(rf"\s+{_CONNECTOR}\b", after, re.IGNORECASE)


def _statements(text: str, options: Sequence[dict[str, Any]]) -> list[tuple[int, str | None]]:
    """(position, label or None for two options) of every answer statement of a longer reply."""
    labels = _labels(options)
    found: list[tuple[int, str | None]] = []
    for match in _STATEMENT.finditer(text):
        group = next(name for name, value in match.groupdict().items()
                     if value is not None and (name.endswith("letter") or name.endswith("bold")))
        if group.endswith("letter") and _article(match, group, text):
            continue
        label = labels.get(match.group(group).upper())
        if label is None:
            continue
        other = _MULTI_AFTER.match(text[match.end():])
        two = other is not None and labels.get(other.group(1).upper()) not in (None, label) and other.group(1).isupper()
        found.append((match.start(group), None if two else label))
    opening = _OPENING.match(text)
    if opening:
        letter = opening.group("paren") or opening.group("label")
        if letter.upper() in labels:
            found.append((opening.start(), labels[letter.upper()]))
    last_line = text.strip().splitlines()[-1] if text.strip() else ""
    decided, label = _short_choice(last_line, options) if len(last_line) <= 40 else (False, None)
    if decided and label is not None:
        found.append((text.rfind(last_line), label))
    return found


def read_choice(text: str | None, options: Sequence[dict[str, Any]], rule: str = "default") -> str | None:
    """The option label a multiple-choice reply picks; None when unanswered (module docstring)."""
    if not text or not text.strip():
        return None
    tag = last_tag(text)
    if tag is not None:
        decided, label = _short_choice(tag, options)
        if decided or rule == "paper":
            return label
        return read_choice(tag, options) if tag.strip() != text.strip() else None
    if rule == "paper":
        return None
    decided, label = _short_choice(text, options)
    if decided:
        return label
    found = _statements(text, options)
    if found:
        return max(found, key=lambda hit: hit[0])[1]
    if _REFUSAL.search(text):
        return None
    said = f" {normalised(text)} "
    named = [o["label"] for o in options if f" {normalised(o['text'])} " in said]
    return named[0] if len(named) == 1 else None


def read_choice_set(text: str | None, options: Sequence[dict[str, Any]], rule: str = "default") -> frozenset[str] | None:
    """The set of labels a perception reply names; None when unanswered (module docstring)."""
    if text is None:
        return None
    tag = last_tag(text)
    if tag is None and (rule == "paper" or not text.strip()):
        return None
    value = plain(tag if tag is not None else text)
    if tag is not None and not value or normalised(value) in ("none", "none of them", "no option", "no options"):
        return frozenset()
    labels = _labels(options)
    parts = [part for part in _SPLIT.split(value) if part.strip()]
    if len(parts) == 1 and re.fullmatch(r"[A-Z](?:\s+[A-Z])+|[A-Z]{2,}", parts[0].strip()) and \
            _by_text(parts[0], options) is None:
        parts = list(parts[0].replace(" ", ""))
    read = [_part_label(part, options) for part in parts]
    if read and all(label not in (None, _TWO) for label in read):
        return frozenset(label for label in read if label is not None)
    if tag is None:
        stated = re.search(r"\b(?:answers?|options?)\s*(?:is|are|:)\s*([^.\n]+)", text, re.IGNORECASE)
        if stated:
            return read_choice_set(f"\\boxed{{{stated.group(1)}}}", options)
        if labels and (single := read_choice(text, options)) is not None:
            return frozenset({single})
    return None


_SAME = re.compile(r"\bno (?:visible |obvious |apparent |noticeable )?(?:differences?|changes?)\b|\bidentical\b|"
                   r"\b(?:exactly |completely |essentially )?the same\b|\bnot different\b|\bno difference\b",
                   re.IGNORECASE)
_DIFFERENT = re.compile(r"\bnot (?:the same|identical)\b|\bdiffer(?:ent|s|ence|ences)?\b|\bchanged?\b", re.IGNORECASE)
_YES_NO = re.compile(r"\b(yes|no)\b(?!\s+(?:visible |obvious |apparent |noticeable )?(?:differences?|changes?|"
                     r"difference)\b)", re.IGNORECASE)
_LEADING_YES_NO = re.compile(r"^\W*(yes|no)\b(?!\s+(?:visible |obvious |apparent |noticeable )?"
                             r"(?:differences?|changes?)\b)", re.IGNORECASE)
_STATED_YES_NO = re.compile(r"\b(?:answer|conclusion)\s*(?:is|:)\s*\W*(yes|no)\b", re.IGNORECASE)


def _state(text: str) -> bool | None:
    """True when a statement says the pictures are the same, False when it says they differ, None else."""
    value = plain(text)
    negated_same = _NOT_SAME.search(value)
    if _SAME.search(value) and not negated_same:
        return True
    if negated_same or _DIFFERENT.search(value):
        return False
    return None


def read_yes_no(text: str | None, asks: str = "different", rule: str = "default") -> bool | None:
    """Yes (True) or no (False) to a question that asks whether the pictures are `same` or `different`."""
    if not text or not text.strip():
        return None
    boxed = last_boxed(text)
    if boxed is None and rule == "paper":
        return None
    span = plain(boxed) if boxed is not None else text.strip()
    leading = _LEADING_YES_NO.match(span)
    if leading:
        return leading.group(1).lower() == "yes"
    if boxed is not None:
        words = _YES_NO.findall(span)
        if words:
            return words[-1].lower() == "yes"
        state = _state(span)
        return None if state is None else state == (asks == "same")
    stated = list(_STATED_YES_NO.finditer(text))
    if stated:
        return stated[-1].group(1).lower() == "yes"
    final = _final_sentence(text)
    words = _YES_NO.findall(final)
    if words:
        return words[-1].lower() == "yes"
    state = _state(final)
    return None if state is None else state == (asks == "same")


def _final_sentence(text: str) -> str:
    body = _FENCE.sub(" ", text).strip()
    sentences = [s for s in _SENTENCE_END.split(body) if s.strip()]
    return sentences[-1] if sentences else ""


_COORDINATES = re.compile(r"[(\[]\s*-?\d+(?:\.\d+)?\s*(?:,\s*-?\d+(?:\.\d+)?\s*)+[)\]]|"
                          r"\b\d+(?:\.\d+)?\s*(?:px|pixels?|%|percent|x\s*\d+)\b|^\s*\d+[.)]\s|\n\s*\d+[.)]\s|"
                          r"\b(?:two|2|both)\s+(?:pictures|images|photos|halves)\b", re.IGNORECASE)
_NUMBER = r"(\d+|" + "|".join(NUMBER_WORDS) + r")"
_COUNT_STATED = re.compile(rf"\b{_NUMBER}\s+(?:\w+\s+)?(?:differences?|changes?|discrepanc(?:y|ies))\b|"
                           rf"\b(?:differences?|changes?)\s*(?:is|are|:|=|found:?|in total:?)\s*{_NUMBER}\b|"
                           rf"\b(?:total|count|answer|number)\b[^.\d\n]{{0,30}}?\b(?:is|:|=|of)\s*{_NUMBER}\b",
                           re.IGNORECASE)
_ZERO = re.compile(r"^\W*(?:none|no|zero|nothing)\W*$|\bno (?:visible |obvious |apparent |noticeable )?"
                   r"(?:differences?|changes?)\b|\bidentical\b|\bthe same\b", re.IGNORECASE)
_NUMBER_WORD = re.compile(rf"\b{_NUMBER}\b", re.IGNORECASE)


def _count_of(token: str) -> int | None:
    token = token.lower()
    return int(token) if token.isdigit() else NUMBER_WORDS.get(token)


def read_count(text: str | None, rule: str = "default") -> int | None:
    """The number of differences a reply states; None when it states none (module docstring)."""
    if not text or not text.strip():
        return None
    boxed = last_boxed(text)
    if boxed is None and rule == "paper":
        return None
    source = plain(boxed) if boxed is not None else text
    cleaned = _COORDINATES.sub(" ", "\n" + source)
    if boxed is not None:
        numbers = _NUMBER_WORD.findall(cleaned)
        if numbers:
            return _count_of(numbers[0])
        return 0 if _ZERO.search(source) else None
    stated = list(_COUNT_STATED.finditer(cleaned))
    if stated:
        return _count_of(next(group for group in stated[-1].groups() if group is not None))
    final = _COORDINATES.sub(" ", "\n" + _final_sentence(text))
    numbers = _NUMBER_WORD.findall(final)
    if numbers:
        return _count_of(numbers[-1])
    return 0 if _ZERO.search(final) else None
