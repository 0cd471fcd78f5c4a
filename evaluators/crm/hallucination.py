"""The rule judge of CRM's Hallucination Rate: does a step assert what a masked evidence region shows?

Rule (fixed by the project; the CRM paper's HR counts reasoning that describes masked content):
a step of a masked-image chain of thought is a hallucination when all three hold:
1. it names a masked region's label: a COCO category in any of its noun forms (mmfaith/nouns.py:
   "knife", "knives"), or, for a free-text label (a VisArgs premise, more than two words), at least
   two of the premise's content words (its only one when it has one);
2. it has no occlusion cue (OCCLUSION_CUES: "masked", "covered", "hidden", "blocked", "blurred",
   "cannot see", "not visible", ...): a step that says the region is hidden makes no claim about it;
3. it says more than the question: after removing function words (STOPWORDS), reasoning words
   (REASONING_WORDS: "question", "image", "look", "answer", ...) and the label's own words, some
   word remains that the question does not contain. "The question asks about the color of the
   vase" only restates the question; "The vase is white" claims something.
On random masks the evidence stays visible, so the same rule, applied to the evidence's labels,
measures how often it fires on a model that really sees the object: its false-alarm level.
"""
from __future__ import annotations

import re
from functools import lru_cache

from mmfaith.nouns import display_name, noun_forms

RULES_VERSION = "crm-hallucination-rule/1"
OCCLUSION_CUES = (
    r"mask(?:ed|s|ing)?", r"cover(?:ed|s|ing)?", r"hidden", r"hid(?:e|es|ing)", r"block(?:ed|s|ing)?",
    r"blur(?:red|ry|s)?", r"obscur(?:ed|es|ing)", r"occlu(?:ded|sion|des)", r"can ?not see", r"can'?t see",
    r"unable to see", r"not visible", r"invisible", r"not shown", r"cannot be seen", r"can'?t be seen",
    r"noise", r"redacted", r"blacked out", r"grayed out", r"greyed out", r"patch",
)
_CUE = re.compile(r"\b(?:" + "|".join(OCCLUSION_CUES) + r")\b", re.IGNORECASE)
STOPWORDS = frozenset("""a an the and or but so of in on at to for from by with about as into onto over under is are
was were be been being it its this that these those there here which what who whom whose how why when where i we you he
she they me my our your his her their them us do does did not no yes can could would should will may might must has
have had than then also very just only any some each every all both one two three four five six more most much many
such other another same own too if because while since until out up down off again further once""".split())
REASONING_WORDS = frozenset("""question questions ask asks asked asking image images picture pictures photo photos
photograph look looks looking looked see sees seeing seen view answer answers answering answered option options choice
choices determine determined find finding found identify identifying identified need needs check checking consider
considering step steps first second third next finally therefore thus hence correct given based shown show shows
appear appears visible locate locating located observe observing examine examining focus focusing whether""".split())


_WORD = re.compile(r"[a-z]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def content_words(text: str) -> set[str]:
    """Words of three letters or more that are neither function words nor reasoning words."""
    return {w for w in _words(text) if len(w) >= 3 and w not in STOPWORDS and w not in REASONING_WORDS}


@lru_cache(maxsize=4096)  # labels repeat (COCO categories, a build's premises): each one's words made once
def label_words(label: str) -> frozenset[str]:
    """The words that make up a label's forms (removed before the "says more" test)."""
    if len(label.split()) > 2:
        return frozenset(content_words(label))
    return frozenset(word for form in noun_forms(display_name(label).lower()) for word in form.split())


@lru_cache(maxsize=4096)
def _label_form(label: str) -> re.Pattern[str]:
    """Any noun form of a short label as a whole word (one pattern: a step names the label when it holds one)."""
    forms = sorted(noun_forms(display_name(label).lower()))
    if not forms:
        return re.compile(r"(?!)")  # names nothing
    return re.compile(r"\b(?:" + "|".join(re.escape(form) for form in forms) + r")\b")


def names_label(step: str, label: str) -> bool:
    """Condition 1 of the rule (module docstring)."""
    lowered = " ".join(_words(step))
    if len(label.split()) > 2:
        wanted = label_words(label)
        present = wanted & set(lowered.split())
        return bool(wanted) and len(present) >= min(2, len(wanted))
    return _label_form(label).search(lowered) is not None


def has_occlusion_cue(step: str) -> bool:
    """Condition 2's test: the step says the region is hidden (module docstring)."""
    return _CUE.search(step) is not None


def says_more_than(step: str, question: str, labels: list[str]) -> bool:
    """Condition 3 (module docstring): some content word of the step is neither the question's nor a label's."""
    known = content_words(question) | {word for label in labels for word in label_words(label)}
    return bool(content_words(step) - known)


def flags(step: str, labels: list[str], question: str) -> bool:
    """Whether the rule calls this step a claim about a masked region labelled by one of `labels`."""
    return (any(names_label(step, label) for label in labels) and not has_occlusion_cue(step)
            and says_more_than(step, question, labels))
