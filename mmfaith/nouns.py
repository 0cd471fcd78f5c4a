"""English forms of object names (COCO categories and the like): plurals, articles, display names.

Shared by the question templates (`builders/coco_questions.py`), which must say "How many knives"
and "Is there an apple", and by the judges that match names in a model's text (SPD-Faith's claim
parser), which must recognise "knives" as the knife category.
"""
from __future__ import annotations

IRREGULAR_PLURALS: dict[str, str] = {
    "knife": "knives", "mouse": "mice", "person": "people", "man": "men", "woman": "women",
    "child": "children", "gentleman": "gentlemen", "calf": "calves", "ox": "oxen",
    "sheep": "sheep", "skis": "skis", "scissors": "scissors", "broccoli": "broccoli",
}
# Names said differently from COCO's category names in a question.
DISPLAY_NAMES: dict[str, str] = {"tv": "TV", "hair drier": "hair dryer"}
# Names that are grammatically plural in the singular sense ("the skis are", "are there scissors").
PLURAL_ONLY = frozenset({"skis", "scissors"})


def display_name(category: str) -> str:
    """The category as a question says it ("tv" -> "TV")."""
    return DISPLAY_NAMES.get(category, category)


def plural(phrase: str) -> str:
    """The plural of a noun phrase, inflecting its last word ("wine glass" -> "wine glasses")."""
    words = phrase.split()
    last = words[-1]
    if last in IRREGULAR_PLURALS:
        form = IRREGULAR_PLURALS[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        form = last + "es"
    elif last.endswith("y") and last[-2:-1] not in tuple("aeiou"):
        form = last[:-1] + "ies"
    else:
        form = last + "s"
    return " ".join([*words[:-1], form])


def counted(n: int, noun: str) -> str:
    """A count with its noun in the matching number: "1 pair", "3 pairs", "0 masked variants"."""
    return f"{n} {noun if n == 1 else plural(noun)}"


def with_article(phrase: str) -> str:
    """"a car", "an apple"; plural-only names take none ("scissors")."""
    if phrase.split()[-1] in PLURAL_ONLY:
        return phrase
    return ("an " if phrase[:1].lower() in "aeiou" else "a ") + phrase


def noun_forms(phrase: str) -> set[str]:
    """Every form a text may use for the phrase: itself and the plausible plurals of its last word
    (regular -s/-es/-ies and the irregular one), for matching names in free text."""
    words = phrase.split()
    last = words[-1]
    forms = {last, last + "s", last + "es", IRREGULAR_PLURALS.get(last, last)}
    if last.endswith("y"):
        forms.add(last[:-1] + "ies")
    return {" ".join([*words[:-1], form]) for form in forms}
