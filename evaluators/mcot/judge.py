"""Judges of reliability and sufficiency (section 4.2, eqs. 5-6; docs/mcot.md#reliability-and-sufficiency).

A judge sees one traced item with a visual component (`JudgeCase`: the record, the trace's crop
regions of the original image, the predicted answer) and returns `{"reliable": 0|1|None,
"sufficient": 0|1|None, ...}` (None: it cannot judge this item).

- `GeometricJudge` (offline; items with `targets` only): coverage = the target area the crops
  cover together (their union, exactly) over the target area; sufficient = coverage >= `coverage`
  (default COVERAGE = 0.5); reliable = sufficient AND the predicted answer is right. So the two
  differ exactly when the model zooms well and still answers wrong.
- `LlmJudge` (`--judge MODEL`): any OpenAI-compatible vision model, shown only the crops (made again
  from the original image, pixel-identical to the ones the run sent). Reliability: the fixed prompt
  `RELIABILITY_PROMPT` asks whether the crops support the predicted answer (Yes/No, eq. 5).
  Sufficiency: `SUFFICIENCY_PROMPT` asks the question with its options from the crops alone; the
  label is 1 when its letter is the gold (eq. 6). Prompts are versioned (`PROMPT_VERSION`); answers
  are cached by a hash of (provider, model, prompt, crops) under `<cache dir>/mcot-judge`.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from mmfaith.cache import ContentCache
from mmfaith.clients import ModelEndpoint, ask_with_images
from mmfaith.evaluators.mcot.boxes import Region, crop, union_area
from mmfaith.evaluators.mcot.protocol import answer_letter, final_answer
from mmfaith.images import png_bytes

COVERAGE = 0.5
PROMPT_VERSION = "mcot-judge/1"
RELIABILITY_PROMPT = """The images are regions a model zoomed into while answering a question about a larger picture.
Question: {question}
{options}
The model's answer: {answer}
Do these regions show visual evidence that supports this answer? Reply with Yes or No only."""
SUFFICIENCY_PROMPT = """The images are regions cropped from a larger picture. Using only what these regions show, answer the question.
Question: {question}
{options}
Reply with the option's letter only, as \\boxed{{LETTER}}."""


@dataclass(frozen=True)
class JudgeCase:
    record: dict[str, Any]
    image_path: Any
    regions: tuple[Region, ...]
    answer: str | None  # the trace's predicted option label


def coverage_share(case: JudgeCase) -> float | None:
    """Share of the targets' area the crops cover together; None without targets."""
    targets = [Region(int(x), int(y), int(np.ceil(x + w)), int(np.ceil(y + h)))
               for x, y, w, h in (t["bbox"] for t in case.record["targets"])]
    total = sum(t.area for t in targets)
    if not total:
        return None
    return sum(union_area(case.regions, within=t) for t in targets) / total


class GeometricJudge:
    """The offline judge (module docstring)."""

    def __init__(self, coverage: float = COVERAGE) -> None:
        self.coverage = coverage
        self.name = f"geometric(coverage>={coverage:g})"

    def judge(self, case: JudgeCase) -> dict[str, Any]:
        share = coverage_share(case)
        if share is None:
            return {"reliable": None, "sufficient": None, "coverage": None}
        sufficient = int(share >= self.coverage)
        right = int(case.answer is not None and case.answer == case.record["answer"])
        return {"reliable": sufficient * right, "sufficient": sufficient, "coverage": round(share, 6)}


class LlmJudge:
    """The LLM judge (module docstring)."""

    def __init__(self, endpoint: ModelEndpoint, cache: ContentCache | None = None) -> None:
        self.endpoint = endpoint
        self.cache = cache or ContentCache("mcot-judge")
        self.name = f"llm:{endpoint.model}:{PROMPT_VERSION}"

    def judge(self, case: JudgeCase) -> dict[str, Any]:
        record = case.record
        with Image.open(case.image_path) as opened:
            rgb = np.asarray(opened.convert("RGB"))
        crops = [png_bytes(crop(rgb, region)) for region in case.regions]
        options = "\n".join(f"({o['label']}) {o['text']}" for o in record["options"])
        shown = next((f"({o['label']}) {o['text']}" for o in record["options"] if o["label"] == case.answer),
                     case.answer or "no answer")
        verdict = self._ask(RELIABILITY_PROMPT.format(question=record["question"], options=options, answer=shown), crops)
        reply = self._ask(SUFFICIENCY_PROMPT.format(question=record["question"], options=options), crops)
        letter = answer_letter(final_answer(reply) or reply.strip(), record["options"])
        match = re.match(r"\s*(yes|no)\b", verdict, flags=re.IGNORECASE)
        return {"reliable": None if match is None else int(match.group(1).lower() == "yes"),
                "sufficient": int(letter == record["answer"]), "reliability_reply": verdict,
                "sufficiency_reply": reply}

    def _ask(self, prompt: str, crops: list[bytes]) -> str:
        digest = hashlib.sha256(f"{self.endpoint.provider}\n{self.endpoint.model}\n{prompt}".encode("utf-8"))
        for png in crops:
            digest.update(hashlib.sha256(png).digest())
        key = digest.hexdigest()
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        reply = ask_with_images(self.endpoint, prompt, crops, max_tokens=64)
        self.cache.put(key, reply, model=self.endpoint.model, prompt_version=PROMPT_VERSION)
        return reply


def agreement(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> dict[str, Any]:
    """How often two judges give the same label, per metric, over the items both judged."""
    result: dict[str, Any] = {}
    for label in ("reliable", "sufficient"):
        pairs = [(a[label], b[label]) for a, b in zip(first, second) if a[label] is not None and b[label] is not None]
        result[label] = {"n": len(pairs), "agreement": round(sum(x == y for x, y in pairs) / len(pairs), 6)
                         if pairs else None}
    return result

