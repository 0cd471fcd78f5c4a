"""VFaith's probe plan for the shared run engine (evaluators/run_engine.py).

Contract
--------
- A pair gets two independent probes, gathered: `original` (the question and its options with the
  original image) and `edited` (the same text with the edited image). A perception item gets one,
  `perception` (its statements with its one, edited, image). One image per message, zero-shot
  (prompts.py).
- `shows(item)` is the image's sha256 and the question and option text (never the gold), so the
  run dir's dataset fingerprint changes when any of them does.
- A RUN_DIR resumes only with the same prompt templates (`resume_settings`).

`run_vfaith(RunSettings)` runs VFaith with the flags of `mmfaith run vfaith` (the shared ones; VFaith has none
of its own).
"""
from __future__ import annotations

import asyncio
from typing import Any

from mmfaith.evaluators.image_payload import ImageRef, Shown
from mmfaith.evaluators.run_engine import ItemAsker, RunSummary, Turn, run_benchmark
from mmfaith.evaluators.run_settings import RunSettings
from mmfaith.evaluators.vfaith.prompts import (PAIR_PROBES, PERCEPTION_PROBES, TEMPLATE_VERSION, TEMPLATES_SHA256,
                                               perception_prompt, question_prompt)
from mmfaith.loaders.vfaith.dataset import VfaithItem, VfaithPair, VfaithPerception, open_vfaith_dataset


def probe_text(item: VfaithItem) -> str:
    """The text every probe of the item sends (the same for `original` and `edited`)."""
    if isinstance(item, VfaithPerception):
        return perception_prompt(item.record["options"])
    return question_prompt(item.record["question"], item.record["options"])


def probe_images(item: VfaithItem) -> dict[str, ImageRef]:
    """probe -> the image it shows."""
    if isinstance(item, VfaithPerception):
        return {"perception": ImageRef(item.record["image_sha256"], item.image_path)}
    return {"original": ImageRef(item.record["image_original_sha256"], item.original_path),
            "edited": ImageRef(item.record["image_edited_sha256"], item.edited_path)}


def item_shows(item: VfaithItem) -> dict[str, Any]:
    """What an item's probes show (`ProbePlan.shows`): its images' sha256, question and options."""
    record = item.record
    return {"images": [ref.sha256 for ref in probe_images(item).values()],
            "question": record["question"], "options": record["options"]}


class VfaithProbePlan:
    """The probes of a pair (original, edited) or of a perception item (module docstring)."""

    def expected_probes(self, item: VfaithItem) -> tuple[str, ...]:
        return PERCEPTION_PROBES if isinstance(item, VfaithPerception) else PAIR_PROBES

    def resume_settings(self) -> dict[str, Any]:
        return {"prompt_templates_sha256": TEMPLATES_SHA256}

    def provenance(self) -> dict[str, Any]:
        return {"prompt_template_version": TEMPLATE_VERSION}

    def shows(self, item: VfaithItem) -> dict[str, Any]:
        return item_shows(item)

    def images(self, item: VfaithItem) -> list[Shown]:
        return list(probe_images(item).values())

    async def run_item(self, item: VfaithItem, asker: ItemAsker) -> None:
        text = probe_text(item)
        calls = [asker.ask(probe, [Turn("user", (image, text))], {}) for probe, image in probe_images(item).items()
                 if asker.pending(probe)]
        if asker.dry_run:
            for call in calls:
                await call
        else:
            await asyncio.gather(*calls)


def run_vfaith(request: RunSettings) -> RunSummary:
    """Ask every pair's and perception item's probes through the shared engine; see the module docstring."""
    return run_benchmark("vfaith", request, open_vfaith_dataset(request.dataset), VfaithProbePlan())


__all__ = ["VfaithPair", "VfaithPerception", "VfaithProbePlan", "probe_images", "probe_text", "run_vfaith"]
