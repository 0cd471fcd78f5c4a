"""Judges of reliability and sufficiency (section 4.2, eqs. 5-6; docs/mcot.md#reliability-and-sufficiency).

A judge sees one traced item with a visual component (`JudgeCase`: the record, the trace's crop
regions of the original image, the predicted answer) and returns `{"reliable": 0|1|None,
"sufficient": 0|1|None, ...}` (None: it cannot judge this item).

- `GeometricJudge` (offline; items with `targets` only): coverage = the target area the zooms
  cover together (their union, exactly) over the target area, where a zoom is a crop of at most
  `max_share` of the image (default MAX_CROP_SHARE = 0.6: a whole-image crop shows everything and
  earns nothing); sufficient = coverage >= `coverage` (default COVERAGE = 0.5); reliable =
  sufficient AND the predicted answer is right. So the two differ exactly when the model zooms
  well and still answers wrong.
- `grounding(case)`: grounding_iou and target hit of one trace (TreeBench-style precision).
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
from mmfaith.evaluators.mcot.boxes import Region, crop, intersection_area, union_area
from mmfaith.evaluators.mcot.protocol import answer_letter
from mmfaith.images import png_bytes

COVERAGE = 0.5
MAX_CROP_SHARE = 0.6
HIT_SHARE = 0.5
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


def _targets(record: dict[str, Any]) -> list[Region]:
    return [Region(int(x), int(y), int(np.ceil(x + w)), int(np.ceil(y + h)))
            for x, y, w, h in (t["bbox"] for t in record.get("targets") or [])]


def evidence_boxes(record: dict[str, Any]) -> list[Region]:
    """The boxes a crop is measured against: each target box and, for several targets (a relation
    question's two objects), the box enclosing them all."""
    targets = _targets(record)
    if len(targets) > 1:
        targets.append(Region(min(t.x1 for t in targets), min(t.y1 for t in targets),
                              max(t.x2 for t in targets), max(t.y2 for t in targets)))
    return targets


def zooms(case: JudgeCase, max_share: float) -> tuple[Region, ...]:
    """The crops that are zooms: at most `max_share` of the image's area (a whole-image crop is none)."""
    image_area = case.record["width"] * case.record["height"]
    return tuple(region for region in case.regions if region.area <= max_share * image_area)


def coverage_share(case: JudgeCase, max_share: float = MAX_CROP_SHARE) -> float | None:
    """Share of the targets' area the zooms (`zooms`) cover together; None without targets."""
    targets = _targets(case.record)
    total = sum(t.area for t in targets)
    if not total:
        return None
    regions = zooms(case, max_share)
    return sum(union_area(regions, within=t) for t in targets) / total


def iou(a: Region, b: Region) -> float:
    """Intersection over union of two boxes."""
    inter = intersection_area(a, b)
    union = a.area + b.area - inter
    return inter / union if union else 0.0


def grounding(case: JudgeCase, max_share: float = MAX_CROP_SHARE) -> dict[str, Any] | None:
    """Where the trace looked, against the target boxes (docs/mcot.md#grounding; TreeBench's measure):
    `iou`, the best IoU of any crop with any evidence box (`evidence_boxes`), in original-image
    pixels; `hit`, 1 when a zoom (`zooms`) covers at least HIT_SHARE of an evidence box. None
    without targets or crops."""
    targets = evidence_boxes(case.record)
    if not targets or not case.regions:
        return None
    best = max(iou(region, target) for region in case.regions for target in targets)
    hit = any(intersection_area(region, target) >= HIT_SHARE * target.area
              for region in zooms(case, max_share) for target in targets if target.area)
    return {"iou": round(best, 6), "hit": int(hit)}


class GeometricJudge:
    """The offline judge (module docstring)."""

    def __init__(self, coverage: float = COVERAGE, max_share: float = MAX_CROP_SHARE) -> None:
        self.coverage = coverage
        self.max_share = max_share
        self.name = f"geometric(coverage>={coverage:g}, crops<={max_share:g} of the image)"

    def judge(self, case: JudgeCase) -> dict[str, Any]:
        share = coverage_share(case, self.max_share)
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
        letter = answer_letter(reply, record["options"])
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

