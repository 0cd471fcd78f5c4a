"""MCoT's reference models: deterministic agents that bracket the intervention metrics (docs/mcot.md#reference-models).

- `zoom-oracle`: zooms into the union of the item's target boxes, then answers from the crop's
  pixels: when a crop it is shown equals the original image's pixels in the region its box maps to,
  it answers the gold; otherwise (noise) the first other option. Its text also states the answer,
  but it never reads it: ATE_text 0, ATE_visual negative.
- `text-follower`: zooms the same way, then states the gold option's text and its number in its step
  ("it is blue: option number 2") and, when asked to go on from a (replayed) trace, answers the
  option its own earlier steps number last (else whose text they mention last): ATE_text negative
  (a changed detail changes its answer), ATE_visual 0.
- `blind`: never calls the tool and answers the first option: no visual component, left out of the
  intervention metrics and counted.
- `prior`: never calls the tool and reads neither the image nor the item's gold: it answers the
  option whose text is most often the gold among the other items of its category
  (evaluators/prior_model.py, the builds' one definition); left out of the intervention metrics like `blind`. It answers
  requests with or without an image (`run --no-image`).
Each speaks both protocols (function calling when the request carries `tools`, else text tags) and
all three coordinate conventions (read from the system prompt), and answers any rotation of the
options (`run --circular`) by its option, under the letter that rotation shows it.
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from typing import Any

import numpy as np
from PIL import Image

from mmfaith.evaluators.circular import rotate_options, rotations, shown_label
from mmfaith.evaluators.mcot.boxes import COORDS, Region, box_in, crop, map_box
from mmfaith.evaluators.prior_model import prior_answers
from mmfaith.evaluators.mcot.protocol import COORD_WORDS, FINAL_ANSWER_REQUEST, TOOL_NAME
from mmfaith.evaluators.reference_server import RequestRefused
from mmfaith.images import sha256_bytes
from mmfaith.loaders.mcot.dataset import McotDataset, McotItem

MODELS = ("zoom-oracle", "text-follower", "blind", "prior")


class McotReference:
    """One reference model over one dataset (module docstring)."""

    def __init__(self, name: str, dataset: McotDataset) -> None:
        if name not in MODELS:
            raise RequestRefused(404, f"unknown MCoT reference model {name!r}; known: {', '.join(MODELS)}")
        self.name = name
        self._by_image: dict[str | None, list[McotItem]] = {}
        for item in dataset.items:
            self._by_image.setdefault(item.record["image_sha256"], []).append(item)
            self._by_image.setdefault(None, []).append(item)
        self._prior = prior_answers((item.id, item.record["category"], item.record["options"], item.record["answer"])
                                    for item in dataset.items) if name == "prior" else {}

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str | dict[str, Any]:
        messages = body["messages"]
        item, k = self._item(text, images)
        original = item.record
        if k:  # the item as this rotation shows it: its options, and the gold under the letter shown
            item = replace(item, record={**original, "options": rotate_options(original["options"], k),
                                         "answer": shown_label(original["options"], k, original["answer"])})
        coords = _coords(messages)
        functions = bool(body.get("tools"))
        assistant_texts = [_text(m) for m in messages if m.get("role") == "assistant"]
        replay = bool(body.get("continue_final_message")) or _text(messages[-1]) == FINAL_ANSWER_REQUEST
        target = self._target(item)
        options = item.record["options"]
        if not assistant_texts:  # the first turn
            if self.name == "prior":
                guess = self._prior[item.id]
                if guess is not None and k:
                    guess = shown_label(original["options"], k, guess)
                return f"I answer from the question alone. <answer>{guess or 'unknown'}</answer>"
            if self.name == "blind" or target is None:
                return f"I can answer directly. <answer>{options[0]['label'] if options else 'unknown'}</answer>"
            box = box_in(target, Region(0, 0, *item.size), coords)
            label = " and ".join(t["label"] for t in item.record["targets"])
            step = f"I need to look closely at the {label}."
            arguments = {"bbox_2d": box, "label": label}
            if functions:
                return {"content": step, "tool_calls": [{"id": "call_0", "type": "function", "function": {
                    "name": TOOL_NAME, "arguments": json.dumps(arguments)}}]}
            return f"{step} <tool_call>{json.dumps({'name': TOOL_NAME, 'arguments': arguments})}</tool_call>"
        gold_text = next((o["text"] for o in options if o["label"] == item.record["answer"]), item.record["answer"])
        if not replay:  # the turn after the crop, in the model's own trace
            letter = self._from_pixels(item, images[1:], coords) if self.name == "zoom-oracle" else item.record["answer"]
            number = 1 + next((i for i, o in enumerate(options) if o["label"] == item.record["answer"]), 0)
            return f"In the crop it is {gold_text}: option number {number}. <answer>{letter}</answer>"
        if self.name == "zoom-oracle":
            letter = self._from_pixels(item, images[1:], coords)
        else:
            said = " ".join(assistant_texts)
            letter = _numbered(said, options) or _last_mentioned(said, options) or "none"
        return f"<answer>{letter}</answer>"

    def _item(self, text: str, images: list[bytes]) -> tuple[McotItem, int]:
        """The item a request asks (its image, question and options; without an image, as `prior` answers, its
        question and options alone) and the rotation of its options the request shows."""
        candidates = self._by_image.get(sha256_bytes(images[0]) if images else None if self.name == "prior" else "")
        asked = [item for item in candidates or [] if item.record["question"] in text]
        for item in asked:
            options = item.record["options"]
            shown = [k for k in rotations(options, True) if _listing(rotate_options(options, k)) in text]
            if shown:
                return item, shown[0]
        if asked:  # options listed otherwise (or none): the first item with the question, in its own order
            return asked[0], 0
        raise RequestRefused(400, "not an MCoT item of this dataset (first image and question unknown)")

    @staticmethod
    def _target(item: McotItem) -> Region | None:
        boxes = [t["bbox"] for t in item.record["targets"]]
        if not boxes:
            return None
        x1 = min(b[0] for b in boxes)
        y1 = min(b[1] for b in boxes)
        x2 = max(b[0] + b[2] for b in boxes)
        y2 = max(b[1] + b[3] for b in boxes)
        return Region(int(x1), int(y1), int(np.ceil(x2)), int(np.ceil(y2)))

    def _from_pixels(self, item: McotItem, crops: list[bytes], coords: str) -> str:
        """The gold when a crop shows the real pixels of the region the oracle's box maps to, else a wrong option."""
        target = self._target(item)
        assert target is not None
        full = Region(0, 0, *item.size)
        region = map_box(box_in(target, full, coords), full, coords)
        with Image.open(item.image_path) as opened:
            expected = crop(np.asarray(opened.convert("RGB")), region)
        for data in crops:
            with Image.open(io.BytesIO(data)) as opened:
                if np.array_equal(np.asarray(opened.convert("RGB")), expected):
                    return item.record["answer"]
        others = [o["label"] for o in item.record["options"] if o["label"] != item.record["answer"]]
        return others[0] if others else "none"


def _listing(options: list[dict[str, str]]) -> str:
    """How the first turn lists the options (protocol.question_text)."""
    return "\n".join(f"({option['label']}) {option['text']}" for option in options)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict) and part.get("type") == "text")


def _coords(messages: list[dict[str, Any]]) -> str:
    system = next((_text(m) for m in messages if m.get("role") == "system"), "")
    for coords in COORDS:
        if COORD_WORDS[coords] in system:
            return coords
    raise RequestRefused(400, "the system prompt names no coordinate convention")


def _numbered(text: str, options: list[dict[str, str]]) -> str | None:
    """The label of the option the text numbers last ("option number 2"; a number past the last wraps)."""
    numbers = re.findall(r"option number (\d+)", text)
    return options[(int(numbers[-1]) - 1) % len(options)]["label"] if numbers and options else None


def _last_mentioned(text: str, options: list[dict[str, str]]) -> str | None:
    """The label of the option whose text the text mentions last (as a whole word), None when none."""
    best, where = None, -1
    for option in options:
        for match in re.finditer(r"\b" + re.escape(option["text"].lower()) + r"\b", text.lower()):
            if match.start() > where:
                best, where = option["label"], match.start()
    return best
