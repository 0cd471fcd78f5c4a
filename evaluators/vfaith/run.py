"""VFaith's probe plan for the shared run engine (evaluators/run_engine.py).

Contract
--------
- A pair gets two independent probes, gathered: `original` (the question and its options with the
  original image) and `edited` (the same text with the edited image). A perception item gets one,
  `perception` (its statements with its one, edited, image). One image per message, zero-shot
  (prompts.py).
- `shows(item)` is the image's sha256 and the question and option text (never the gold), so the
  run dir's dataset fingerprint changes when any of them does.
- `circular` (`run --circular`, evaluators/circular.py): a multiple-choice pair's `original` and
  `edited` are also asked once per further rotation of the options (`original@r1`, ...; meta
  `rotation`); perception items (several true statements) and free-form pairs are asked once.
- A RUN_DIR resumes only with the same prompt templates and `circular` (`resume_settings`).

`run_vfaith(RunSettings)` runs VFaith with the flags of `mmfaith run vfaith` (the shared ones; VFaith has none
of its own).
"""
from __future__ import annotations

import asyncio
from typing import Any

from mmfaith.evaluators.circular import rotate_options, rotated_probe, rotations
from mmfaith.evaluators.image_payload import Shown
from mmfaith.images import ImageRef
from mmfaith.evaluators.run_engine import ItemAsker, RunSummary, Turn, run_benchmark
from mmfaith.evaluators.run_settings import RunSettings
from mmfaith.evaluators.vfaith.prompts import (PAIR_PROBES, PERCEPTION_PROBES, TEMPLATE_VERSION, TEMPLATES_SHA256,
                                               perception_prompt, question_prompt)
from mmfaith.loaders.vfaith.dataset import VfaithItem, VfaithPair, VfaithPerception, open_vfaith_dataset


def probe_text(item: VfaithItem, rotation: int = 0) -> str:
    """The text every probe of the item sends (the same for `original` and `edited`), its options in `rotation`."""
    if isinstance(item, VfaithPerception):
        return perception_prompt(item.record["options"])
    return question_prompt(item.record["question"], rotate_options(item.record["options"], rotation))


def item_rotations(item: VfaithItem, circular: bool) -> range:
    """The option rotations the item's pair probes are asked in (perception: only the first)."""
    return range(1) if isinstance(item, VfaithPerception) else rotations(item.record["options"], circular)


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

    def __init__(self, circular: bool = False) -> None:
        self.circular = circular

    def expected_probes(self, item: VfaithItem) -> tuple[str, ...]:
        if isinstance(item, VfaithPerception):
            return PERCEPTION_PROBES
        return tuple(rotated_probe(probe, k) for probe in PAIR_PROBES for k in item_rotations(item, self.circular))

    def resume_settings(self) -> dict[str, Any]:
        return {"prompt_templates_sha256": TEMPLATES_SHA256, "circular": self.circular}

    def provenance(self) -> dict[str, Any]:
        return {"prompt_template_version": TEMPLATE_VERSION}

    def shows(self, item: VfaithItem) -> dict[str, Any]:
        return item_shows(item)

    def images(self, item: VfaithItem) -> list[Shown]:
        return list(probe_images(item).values())

    async def run_item(self, item: VfaithItem, asker: ItemAsker) -> None:
        asked = [(rotated_probe(probe, k), image, k) for probe, image in probe_images(item).items()
                 for k in item_rotations(item, self.circular)]
        calls = [asker.ask(name, [Turn("user", (image, probe_text(item, k)))], {"rotation": k} if self.circular else {})
                 for name, image, k in asked if asker.pending(name)]
        if asker.dry_run:
            for call in calls:
                await call
        else:
            await asyncio.gather(*calls)


def run_vfaith(request: RunSettings, circular: bool = False) -> RunSummary:
    """Ask every pair's and perception item's probes through the shared engine; see the module docstring."""
    return run_benchmark("vfaith", request, open_vfaith_dataset(request.dataset), VfaithProbePlan(circular))


__all__ = ["VfaithPair", "VfaithPerception", "VfaithProbePlan", "item_rotations", "probe_images", "probe_text",
           "run_vfaith"]
