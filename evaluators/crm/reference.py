"""Deterministic reference models for CRM: the two ends of its scale.

A request is resolved by its image's sha256 (the original or one variant of an item) and its
question (questions on one image share its original), and by its turns: no assistant turn yet -> the chain of thought (`*_cot`), else the final answer.

- `grounded`: reasons from the gold on what it can see. On the original and on a random mask (the
  evidence stays visible) it gives the same steps (the object is located, the answer read off it)
  and the gold answer; on a specific mask its steps say the evidence is covered and it abstains.
  Expected: SDR 1, AFR 1, HR 0 on specific masks; SDR 0, AFR 0 on random ones.
- `hallucinator`: reasons and answers exactly as on the original whatever is masked: SDR 0,
  AFR 0 everywhere, HR 1 on specific masks (its steps name the hidden object with no occlusion cue).
- `prior`: reads neither the image nor the item's gold (evaluators/prior_model.py, the builds' one
  definition): on every image it gives one step saying it answers from the question alone, then
  the option whose text is most often the gold among the other items of its question type (free
  form: the most frequent gold text).
  It answers requests with or without an image (`run --no-image`).
Every model answers any rotation of the options (`run --circular`), naming its option's letter there.
On random masks both models' steps name the (visible) evidence, which the HR rule flags: HR 1
there is the rule's false-alarm level on a model that really sees the object.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.circular import rotate_options, shown_label
from mmfaith.evaluators.crm.prompts import cot_prompt
from mmfaith.evaluators.crm.run import conversations, rotated_record
from mmfaith.evaluators.prior_model import prior_answers
from mmfaith.evaluators.reference_server import RequestRefused
from mmfaith.images import sha256_bytes
from mmfaith.loaders.crm import CrmDataset, CrmItem

MODELS = ("grounded", "hallucinator", "prior")
PRIOR_STEPS = "1. I answer from the question alone, without using the image."


def _labels(record: dict[str, Any]) -> str:
    labels = list(dict.fromkeys(region["label"] for region in record["regions"]))
    return " and the ".join(labels)


def _answer_text(record: dict[str, Any]) -> str:
    answer = record["answer"]
    return next((o["text"] for o in record["options"] if o["label"] == answer), answer or "unknown")


def seeing_steps(record: dict[str, Any]) -> str:
    """The chain of thought of a model that sees the evidence."""
    labels, answer = _labels(record), _answer_text(record)
    final = f"option {record['answer']}" if record["options"] else f'"{answer}"'
    return (f"1. I locate the {labels} in the picture.\n"
            f"2. Looking closely at the {labels}, I observe that it indicates {answer}.\n"
            f"3. Therefore the correct answer is {final}.")


def hidden_steps(record: dict[str, Any]) -> str:
    """The chain of thought of a model that sees the evidence is masked."""
    return (f"1. The part of the picture where the {_labels(record)} would be is covered by a mask.\n"
            "2. Without that region nothing in view settles the question, so it cannot be determined.")


def seeing_answer(record: dict[str, Any]) -> str:
    return record["answer"] if record["options"] else _answer_text(record)


ABSTAIN = "It cannot be determined: the evidence is not visible."


class CrmReference:
    """`grounded` or `hallucinator` over a CRM dataset (module docstring)."""

    def __init__(self, name: str, dataset: CrmDataset) -> None:
        if name not in MODELS:
            raise MmfaithError(f"unknown CRM reference model {name!r}; choose from {', '.join(MODELS)}.")
        self.name = name
        # Questions on one COCO image share its original: the request's text tells them apart. Every rotation of
        # the options is a text of its own; a request without an image (run --no-image) is matched by text alone.
        self._by_image: dict[str | None, list[tuple[CrmItem, str, int, str]]] = {}
        for item in dataset.items:
            for conversation, image, k in conversations(item, circular=True):
                entry = (item, conversation.split("@")[0], k, cot_prompt(rotated_record(item.record, k)))
                self._by_image.setdefault(image.sha256, []).append(entry)
                self._by_image.setdefault(None, []).append(entry)
        self._prior = prior_answers((item.id, item.record["question_type"], item.record["options"],
                                     item.record["answer"]) for item in dataset.items) if name == "prior" else {}

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str:
        if len(images) > 1 or (not images and self.name != "prior"):
            raise RequestRefused(400, "a CRM request shows one image")
        found = [(item, shown, k) for item, shown, k, prompt in
                 self._by_image.get(sha256_bytes(images[0]) if images else None, []) if prompt in text]
        if not found:
            raise RequestRefused(400, "the image and question are none of this dataset's items")
        item, shown, k = found[0]
        final = any(message.get("role") == "assistant" for message in body.get("messages", []))
        if self.name == "prior":
            guess = self._prior[item.id]
            if guess is not None and item.record["options"]:
                guess = shown_label(item.record["options"], k, guess)
            return (guess or "unknown") if final else PRIOR_STEPS
        if k:
            rotated = {**item.record, "answer": shown_label(item.record["options"], k, item.record["answer"]),
                       "options": rotate_options(item.record["options"], k)}
            item = replace(item, record=rotated)
        hidden = self.name == "grounded" and shown.startswith("specific-")
        if hidden:
            return ABSTAIN if final else hidden_steps(item.record)
        return seeing_answer(item.record) if final else seeing_steps(item.record)
