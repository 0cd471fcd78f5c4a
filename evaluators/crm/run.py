"""CRM's probe plan for the shared run engine (evaluators/run_engine.py).

Contract
--------
- Per item and per image shown (the original, then every variant "{mode}-{style}" of the record):
  the chain-of-thought call (`{image}_cot`, at `cot_temperature`, default 0.2), then, in the same
  conversation (user: image + question; assistant: the model's steps; user: final-answer prompt),
  the final-answer call (`{image}_answer`, at `answer_temperature`, default 0): the CRM paper's
  settings. The images' conversations run concurrently; an answer waits only for its own CoT, and
  is not asked (an error line) when that CoT failed.
- Then the original once more (`resample_cot`, `resample_answer`): the same conversation, another
  request seed; the change it shows against the original is the noise floor of SDR and AFR.
- `circular` (`run --circular`, evaluators/circular.py): every image shown of a multiple-choice item
  (the original and each masked variant) is also asked in every further rotation of its options,
  each its own conversation named "{image}@r{k}" (probes `{image}@r{k}_cot`, `{image}@r{k}_answer`;
  meta `rotation`), so each first-order accuracy (original and masked) has its `accuracy_circular`.
  The re-sample (the noise floor) is asked in the original order only.
- A RUN_DIR resumes only with the same temperatures, prompt templates and `circular` (`resume_settings`).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from mmfaith.evaluators.circular import rotate_options, rotated_probe, rotations
from mmfaith.evaluators.crm.prompts import (RESAMPLE, TEMPLATE_VERSION, TEMPLATES_SHA256, answer_prompt, cot_prompt,
                                            probe_names)
from mmfaith.evaluators.image_payload import Shown
from mmfaith.images import ImageRef
from mmfaith.evaluators.run_engine import ItemAsker, RunSummary, Turn, run_benchmark
from mmfaith.evaluators.run_settings import RunSettings
from mmfaith.loaders.crm import CrmItem, open_crm_dataset

COT_FAILED = "not asked: this image's chain of thought failed and the final answer is asked after it; re-run to retry"
PRIORITY = {"answer": 0, "cot": 1}
"""An answer closes its conversation: it goes before new chains of thought."""


@dataclass(frozen=True)
class CrmRunRequest(RunSettings):
    """The flags of `mmfaith run crm`, one field each (the shared ones are RunSettings')."""

    cot_temperature: float = 0.2
    answer_temperature: float = 0.0


def shown(item: CrmItem) -> list[tuple[str, ImageRef]]:
    """(image name, image) in the order asked: the original, then the record's variants."""
    return [("original", item.original), *item.variants.items()]


def asked(item: CrmItem) -> list[tuple[str, ImageRef]]:
    """(image name, image) of every conversation a run asks: the images shown, then the original re-sampled."""
    return [*shown(item), (RESAMPLE, item.original)]


def item_shows(item: CrmItem) -> dict[str, Any]:
    """What an item's probes show (`ProbePlan.shows`): every image's sha256, the question and the options
    (never the gold)."""
    record = item.record
    return {"images": [image.sha256 for _, image in shown(item)], "question": record["question"],
            "options": record["options"]}


def conversations(item: CrmItem, circular: bool) -> list[tuple[str, ImageRef, int]]:
    """(conversation name, image, rotation of the options): `asked`, then with `circular` every image shown in
    every further rotation ("{image}@r{k}")."""
    rotated = [(rotated_probe(name, k), image, k) for name, image in shown(item)
               for k in rotations(item.record["options"], circular) if k > 0]
    return [(name, image, 0) for name, image in asked(item)] + rotated


def rotated_record(record: dict[str, Any], k: int) -> dict[str, Any]:
    """The record as rotation k of its options shows it (the prompts read its options)."""
    return {**record, "options": rotate_options(record["options"], k)} if k else record


class CrmProbePlan:
    """Two calls per image shown (see the module docstring)."""

    def __init__(self, cot_temperature: float = 0.2, answer_temperature: float = 0.0, circular: bool = False) -> None:
        self.cot_temperature = cot_temperature
        self.answer_temperature = answer_temperature
        self.circular = circular

    def expected_probes(self, item: CrmItem) -> tuple[str, ...]:
        return tuple(probe for name, _, _ in conversations(item, self.circular) for probe in probe_names(name))

    def resume_settings(self) -> dict[str, Any]:
        return {"cot_temperature": self.cot_temperature, "answer_temperature": self.answer_temperature,
                "prompt_templates_sha256": TEMPLATES_SHA256, "circular": self.circular}

    def provenance(self) -> dict[str, Any]:
        return {"prompt_template_version": TEMPLATE_VERSION}

    def shows(self, item: CrmItem) -> dict[str, Any]:
        return item_shows(item)

    def images(self, item: CrmItem) -> list[Shown]:
        return [image for _, image in shown(item)]

    async def run_item(self, item: CrmItem, asker: ItemAsker) -> None:
        async def conversation(name: str, image: ImageRef, k: int) -> None:
            cot_probe, answer_probe = probe_names(name)
            record = rotated_record(item.record, k)
            meta = {"image": name.split("@")[0], "temperature": self.cot_temperature,
                    **({"rotation": k} if self.circular else {})}
            first = [Turn("user", (image, cot_prompt(record)))]
            cot = asker.answered(cot_probe) or await asker.ask(cot_probe, first, meta, priority=PRIORITY["cot"],
                                                               temperature=self.cot_temperature)
            if not asker.pending(answer_probe):
                return
            if cot["response"] is None and not asker.dry_run:
                await asker.fail(answer_probe, {**meta, "temperature": self.answer_temperature}, COT_FAILED)
                return
            turns = [*first, Turn("assistant", (cot["response"] or "<the model's steps>",)),
                     Turn("user", (answer_prompt(record),))]
            await asker.ask(answer_probe, turns, {**meta, "temperature": self.answer_temperature},
                            priority=PRIORITY["answer"],
                            temperature=self.answer_temperature)

        todo = [(name, image, k) for name, image, k in conversations(item, self.circular)
                if any(asker.pending(probe) for probe in probe_names(name))]
        if asker.dry_run:
            for name, image, k in todo:
                await conversation(name, image, k)
        else:
            await asyncio.gather(*(conversation(name, image, k) for name, image, k in todo))


def run_crm(request: CrmRunRequest, circular: bool = False) -> RunSummary:
    """Ask every item's probes through the shared engine; see the module docstring."""
    plan = CrmProbePlan(request.cot_temperature, request.answer_temperature, circular)
    return run_benchmark("crm", request, open_crm_dataset(request.dataset), plan)
