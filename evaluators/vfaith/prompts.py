"""VFaith's probes and their prompt templates (VFaith section 4.1 and appendix A.2, Figure 6).

Probes: `original` (the question with the original image), `edited` (the same question with the
edited image) and `perception` (a perception item with its one, edited, image). Zero-shot, as the
paper evaluates: the prompt asks for reasoning grounded strictly in the image and for the final
answer in \\boxed{}: an option letter (multiple choice), a short answer (free form), or for
perception every true option's letter (`\\boxed{A, C}`).

The templates are versioned; TEMPLATES_SHA256 (a hash of every template) is recorded in run.json
and metrics.json, and a run dir resumes only with the same templates.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

TEMPLATE_VERSION = "vfaith-prompts/1"
PAIR_PROBES = ("original", "edited")
PERCEPTION_PROBES = ("perception",)
PROBES = (*PAIR_PROBES, *PERCEPTION_PROBES)

_GROUNDING = ("Look carefully at the image and reason step by step, relying strictly on what this image shows, "
              "not on what such pictures usually show or on what you remember.")
CHOICE_TEMPLATE = ("{grounding}\n\nQuestion: {question}\nOptions:\n{options}\n\n"
                   "After your reasoning, give the letter of the correct option in \\boxed{{}}, for example "
                   "\\boxed{{B}}.")
FREE_TEMPLATE = ("{grounding}\n\nQuestion: {question}\n\n"
                 "After your reasoning, give the final short answer in \\boxed{{}}.")
PERCEPTION_TEMPLATE = ("{grounding}\n\nWhich of the following statements are true of this image? Several may be "
                       "true.\nOptions:\n{options}\n\nAfter your reasoning, give the letters of every true statement "
                       "in \\boxed{{}}, separated by commas, for example \\boxed{{A, C}}.")
TEMPLATES_SHA256 = hashlib.sha256("\n\x00".join(
    [TEMPLATE_VERSION, _GROUNDING, CHOICE_TEMPLATE, FREE_TEMPLATE, PERCEPTION_TEMPLATE]).encode("utf-8")).hexdigest()


def _options(options: Sequence[dict[str, Any]]) -> str:
    return "\n".join(f"{option['label']}. {option['text']}" for option in options)


def question_prompt(question: str, options: Sequence[dict[str, Any]]) -> str:
    """The text of the `original` and `edited` probes: multiple choice when there are options, else free form."""
    if options:
        return CHOICE_TEMPLATE.format(grounding=_GROUNDING, question=question, options=_options(options))
    return FREE_TEMPLATE.format(grounding=_GROUNDING, question=question)


def perception_prompt(options: Sequence[dict[str, Any]]) -> str:
    """The text of the `perception` probe."""
    return PERCEPTION_TEMPLATE.format(grounding=_GROUNDING, options=_options(options))
