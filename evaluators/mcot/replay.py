"""One replay of a trace as a request, whoever sends it: `mmfaith run mcot` (run.py) and the inspect_ai
loop of `mmfaith export inspect` (inspect_loop.py).

Contract (docs/mcot.md#interventions)
-------------------------------------
- `replay_request(probe, trace, settings, injector, crops, item_id, options)`: the steps of the
  trace (`agent.step_texts`: the last cut at its first answer tag), for `replay_text` with mistakes
  injected into the reasoning, never into the words that state an answer (`interventions.inject`,
  seeded by the run's seed and the item id; the line's
  `meta.injection`); the images standing for the trace's crops (the real crops, for
  `replay_visual` seeded noise of each crop's size); the conversation after the first turns and the
  request's extra fields (`agent.replay_tail`, ending as `settings.continuation` says); the line's
  meta (`continuation`).
- `replay_answer(response, request, options)`: the option label of the replay's answer
  (protocol.answer_letter: the shared reader): of the response, or, when only the last step
  followed by the response has an answer tag (a continued message that closes a tag the step
  opened), of that.
- A trace without a crop is not replayed (`SKIPPED`); a failed trace's replays are not asked
  (`TRACE_FAILED`).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

from mmfaith.evaluators.image_payload import Shown
from mmfaith.evaluators.mcot.agent import AgentSettings, Crops, replay_tail, step_texts, trace_regions
from mmfaith.evaluators.mcot.boxes import Region
from mmfaith.evaluators.mcot.interventions import Injector, answer_words, inject
from mmfaith.evaluators.mcot.protocol import answer_letter, final_answer
from mmfaith.evaluators.run_engine import Turn

PROBES = ("trace", "replay_none", "replay_text", "replay_visual")
REPLAYS = PROBES[1:]
SKIPPED = "no tool call"
TRACE_FAILED = "not asked: the trace failed"


class ReplayCrops(Crops, Protocol):
    """Crops, and seeded noise of a crop's size (the visual intervention)."""

    async def noise(self, region: Region, seed: int, index: int) -> tuple[Shown, str]:
        """(noise of `region`'s size for crop `index` of the trace, its PNG's sha256)."""


@dataclass(frozen=True)
class ReplayRequest:
    """A replay: the conversation after the first turns, the request's extra fields, the images standing for
    the crops (in order), the line's meta, and the last step as shown (for `replay_answer`)."""

    tail: list[Turn]
    extra: dict[str, Any] | None
    images: list[Shown]
    meta: dict[str, Any]
    last_step: str


async def replay_request(probe: str, trace: dict[str, Any], settings: AgentSettings, injector: Injector,
                         crops: ReplayCrops, item_id: str, options: list[dict[str, str]]) -> ReplayRequest:
    """The request of one replay probe (module docstring)."""
    texts = step_texts(trace)
    meta: dict[str, Any] = {}
    regions = trace_regions(trace)
    if probe == "replay_visual":
        made = [await crops.noise(region, settings.seed, index) for index, region in enumerate(regions)]
    else:
        made = [await crops.region(region) for region in regions]
    images = [image for image, _ in made]
    if probe == "replay_text":
        injection = await asyncio.to_thread(inject, texts, injector, settings.seed, item_id, answer_words(options))
        texts = list(injection.texts)
        meta["injection"] = {"injector": injection.injector, "changed": injection.changed,
                             "edits": list(injection.edits), "texts": texts}
    tail, extra = replay_tail(trace, settings, texts, images)
    meta["continuation"] = settings.continuation
    return ReplayRequest(tail, extra, images, meta, texts[-1])


def replay_answer(response: str, request: ReplayRequest, options: list[dict[str, str]]) -> str | None:
    """The option label the replay answered (module docstring)."""
    if final_answer(response) is None and final_answer(request.last_step + response) is not None:
        return answer_letter(request.last_step + response, options)
    return answer_letter(response, options)
