"""SPD-Faith's probe plan for the shared run engine (evaluators/run_engine.py).

Contract
--------
- Per pair, in the order chosen for it (`pair_order`): `same`, `different` and `count` at once,
  then `describe` asked with the model's own count, parsed from its `count` answer
  (`answers.read_count`; meta.count_asked, null when none was readable and the open prompt was
  asked). Waiting calls are served describe first, then count (PRIORITY), so `describe` waits only
  for its own pair's `count`. A `describe` whose pair's `count` failed is not asked and gets an
  error line.
- The pair is shown as two images in one message (`separate`, the stored PNG files) or as one
  side-by-side canvas (`side-by-side`, made once per pair and order: `image_payload.side_by_side`).
- `perturb` (`--perturb blocks:RATIO`): both images shown with the same seeded blocks masked
  (builders/masks.BlockPerturbation: RATIO of an 8 x 8 grid, black, seeded by the seed and the
  pair id); each line records it in meta.perturb and, per image, its source's sha256 and the
  transform (meta.images).
- A RUN_DIR resumes only with the same layout, order, seed, perturbation and prompt templates
  (`resume_settings`).

`run_spd_faith(RunRequest)` runs SPD-Faith with the flags of `mmfaith run spd-faith`, one field each.
"""
from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.image_payload import GAP_PX, DerivedImage, Shown, decode_png, side_by_side
from mmfaith.evaluators.run_engine import ItemAsker, RunSummary, Turn, run_benchmark
from mmfaith.evaluators.run_settings import RunSettings
from mmfaith.evaluators.answers import read_count
from mmfaith.evaluators.spd_faith.prompts import (LAYOUTS, ORDER_CHOICES, ORDERS, PROBES, TEMPLATE_VERSION,
                                                  TEMPLATES_SHA256, prompt_text)
from mmfaith.images import ImageRef, png_bytes
from mmfaith.loaders.spd_faith import SpdPair, open_spd_dataset

if TYPE_CHECKING:  # the perturbation's OpenCV code loads only for a run that perturbs
    from mmfaith.builders.masks import BlockPerturbation

PRIORITY = {"describe": 0, "count": 1, "same": 2, "different": 2}
"""Waiting calls go lowest first: describe closes its pair and frees its images; count unblocks describe."""


@dataclass(frozen=True)
class RunRequest(RunSettings):
    """What to run: the flags of `mmfaith run spd-faith`, one field each (the shared ones are RunSettings')."""

    layout: str = "separate"
    order: str = "original-first"
    seed: int = 0
    perturb: float | None = None


def pair_order(order: str, seed: int, pair_id: str) -> str:
    """The order a pair is shown in; for "random", a fixed function of the seed and the pair id."""
    if order != "random":
        return order
    return ORDERS[hashlib.sha256(f"{seed}:{pair_id}".encode()).digest()[0] & 1]


def shown_images(pair: SpdPair, order: str) -> tuple[ImageRef, ImageRef]:
    """(first, second) image of a pair in the order shown; image_a is the original."""
    original = ImageRef(pair.record["image_a_sha256"], pair.image_a_path)
    edited = ImageRef(pair.record["image_b_sha256"], pair.image_b_path)
    return (original, edited) if order == "original-first" else (edited, original)


def item_shows(pair: SpdPair) -> dict[str, Any]:
    """What a pair's probes show (`ProbePlan.shows`): its two images (the prompts are fixed by the templates,
    whose hash the run dir records)."""
    return {"images": [pair.record["image_a_sha256"], pair.record["image_b_sha256"]]}


class SpdProbePlan:
    """The four probes of a pair, shown in one layout and order (see the module docstring)."""

    def __init__(self, layout: str = "separate", order: str = "original-first", seed: int = 0,
                 perturb: float | None = None) -> None:
        if layout not in LAYOUTS:
            raise MmfaithError(f"--pair-layout must be one of {', '.join(LAYOUTS)}, not {layout!r}.")
        if order not in ORDER_CHOICES:
            raise MmfaithError(f"--order must be one of {', '.join(ORDER_CHOICES)}, not {order!r}.")
        self.layout = layout
        self.order = order
        self.seed = seed
        self.perturbation: BlockPerturbation | None = None
        if perturb is not None:
            from mmfaith.builders.masks import BlockPerturbation

            self.perturbation = BlockPerturbation(perturb, seed)

    def expected_probes(self, pair: SpdPair) -> tuple[str, ...]:
        return PROBES

    def resume_settings(self) -> dict[str, Any]:
        settings = {"layout": self.layout, "order": self.order, "seed": self.seed,
                    "prompt_templates_sha256": TEMPLATES_SHA256}
        if self.perturbation is not None:  # one run dir per ratio; absent when unperturbed (older run dirs resume)
            settings["perturb"] = self.perturbation.provenance()
        return settings

    def provenance(self) -> dict[str, Any]:
        return {"gap_px": GAP_PX if self.layout == "side-by-side" else None,
                "prompt_template_version": TEMPLATE_VERSION}

    def shows(self, pair: SpdPair) -> dict[str, Any]:
        return item_shows(pair)

    def images(self, pair: SpdPair) -> list[Shown]:
        first, second = shown_images(pair, pair_order(self.order, self.seed, pair.id))
        if self.perturbation is not None:
            first, second = (_perturbed(image, self.perturbation, pair.id) for image in (first, second))
        if self.layout == "side-by-side":
            return [_canvas(first, second)]
        return [first, second]

    async def run_item(self, pair: SpdPair, asker: ItemAsker) -> None:
        order = pair_order(self.order, self.seed, pair.id)
        images = self.images(pair)
        meta: dict[str, Any] = {"order": order, "layout": self.layout}
        if self.perturbation is not None:
            meta["perturb"] = self.perturbation.provenance()

        async def ask(probe: str, count: int | None = None, note: dict[str, Any] | None = None) -> dict[str, Any]:
            turn = Turn("user", (*images, prompt_text(probe, self.layout, count)))
            return await asker.ask(probe, [turn], {**meta, "count_asked": count if probe == "describe" else None},
                                   priority=PRIORITY[probe], dry_run_note=note)

        async def count_then_describe() -> None:
            count_line = asker.answered("count") or await ask("count")
            if not asker.pending("describe"):
                return
            if asker.dry_run and count_line["response"] is None:
                await ask("describe", None, {"count_asked": "the model's count answer"})
            elif count_line["response"] is None:
                await asker.fail("describe", {**meta, "count_asked": None}, (
                    "not asked: this pair's count probe failed and describe is asked with the model's own count; "
                    "re-run to retry"))
            else:
                await ask("describe", read_count(count_line["response"]))

        independent = [probe for probe in ("same", "different") if asker.pending(probe)]
        if asker.dry_run:  # printed one by one, in probe order
            for probe in independent:
                await ask(probe)
            await count_then_describe()
        else:
            await asyncio.gather(count_then_describe(), *(ask(probe) for probe in independent))


def _perturbed(image: ImageRef, perturbation: BlockPerturbation, pair_id: str) -> DerivedImage:
    """The image with the pair's seeded blocks masked (both images of a pair get the same blocks)."""
    return DerivedImage(key=f"blocks:{perturbation.ratio:g}:{perturbation.seed}:{pair_id}:{image.sha256}",
                        sources=(image,), transform=perturbation.transform,
                        make=lambda: png_bytes(perturbation.apply(decode_png(image.load()), pair_id)),
                        size=image.size)


def _canvas(first: Shown, second: Shown) -> DerivedImage:
    """The side-by-side canvas of a pair in the order shown."""

    def make() -> bytes:
        try:
            return side_by_side(first.load(), second.load())
        except ValueError as exc:
            stored = second.sources[0] if isinstance(second, DerivedImage) else second
            raise MmfaithError(f"{stored.path}: {exc}; use --pair-layout separate for pairs of unequal sizes.") from exc

    def size() -> tuple[int, int]:
        (w1, h1), (w2, _) = first.size(), second.size()
        return w1 + GAP_PX + w2, h1  # side_by_side requires one size

    sources = tuple(source for image in (first, second)
                    for source in (image.sources if isinstance(image, DerivedImage) else (image,)))
    transform = f"side-by-side gap {GAP_PX}px" + (f" of {first.transform}" if isinstance(first, DerivedImage) else "")
    return DerivedImage(key=f"side-by-side:{first.key}:{second.key}", sources=sources,
                        transform=transform, make=make, size=size)


def run_spd_faith(request: RunRequest) -> RunSummary:
    """Ask every pair's four probes through the shared engine; see the module docstring."""
    plan = SpdProbePlan(request.layout, request.order, request.seed, request.perturb)
    return run_benchmark("spd-faith", request, open_spd_dataset(request.dataset), plan)
