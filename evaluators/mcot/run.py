"""MCoT's probe plan for the shared run engine: the model's own trace, then its three replays.

Contract (docs/mcot.md#probes)
------------------------------
Per item, in order:
- `trace`: the agent loop (`agent.run_trace`); one line holding the whole trace.
- then, gathered, from that trace: `replay_none` (the trace unchanged), `replay_text` (its steps with
  mistakes injected: `interventions.inject`; meta.injection lists the edits) and `replay_visual` (every
  crop replaced by seeded uniform noise of its size), each one call continuing after the replayed
  conversation (`replay.replay_request`), cut at the first answer tag.
- A trace without a crop has no visual component: its replays are not asked; each gets a line with
  an empty response and `meta.skipped` = "no tool call" (answered, so a resumed run does not ask
  again; the scorer leaves such items out of the intervention metrics and counts them). A failed
  trace gets error lines for its replays (retried on a re-run with the trace).
- `circular` (`run --circular`, evaluators/circular.py): the trace is also run in every further
  rotation k of the options (probe `trace@r{k}`, meta `rotation`: the whole agent loop, its zooms
  included, on the item with its options rotated), so `accuracy_trace` has its `accuracy_circular`.
  The replays (the interventions) continue the rotation-0 trace only: their ATEs compare one chain.
- `traces` (a predictions file, `--traces`): its trace lines are taken as the items' traces (meta
  kept, `submitted_by` naming their model) and only the replays are asked, so a submitted file of
  traces is replayed the same way.
- A RUN_DIR resumes only with the same protocol, coordinates, turn limit, continuation, seed,
  injector, prompts and `circular` (`resume_settings`).
"""
from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.circular import rotate_options, rotated_probe, rotations
from mmfaith.evaluators.image_payload import Shown
from mmfaith.evaluators.mcot.agent import CROPS_DIR, AgentSettings, CropStore, first_turns, run_trace
from mmfaith.evaluators.mcot.interventions import Injector
from mmfaith.evaluators.mcot.protocol import PROMPT_VERSION, prompts_hash
from mmfaith.evaluators.mcot.replay import PROBES, REPLAYS, SKIPPED, TRACE_FAILED, replay_answer, replay_request
from mmfaith.evaluators.run_engine import ItemAsker
from mmfaith.images import sha256_bytes
from mmfaith.loaders.mcot.dataset import McotItem


def read_traces(path: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """The answered `trace` lines of a predictions file (the last per id), and the file's sha256;
    an error naming the line for one that is not a prediction or holds no meta.trace."""
    from mmfaith.images import sha256_file
    from mmfaith.jsonl import read_jsonl
    from mmfaith.schema import check_record

    if not path.is_file():
        raise MmfaithError(f"--traces {path}: no such file; pass the predictions.jsonl that holds the traces.")
    traces = {}
    for number, line in read_jsonl(path):
        check_record("prediction", line, f"{path}:{number}")
        if line["probe"] != "trace" or line["response"] is None:
            continue
        if not isinstance((line.get("meta") or {}).get("trace"), dict):
            raise MmfaithError(f"{path}:{number}: a trace line without meta.trace; traces are replayed from the "
                               "record `mmfaith run mcot` writes (docs/mcot.md#the-trace-record).")
        traces[line["id"]] = line
    if not traces:
        raise MmfaithError(f"--traces {path}: holds no answered trace line.")
    return traces, sha256_file(path)


def item_shows(item: McotItem) -> dict[str, Any]:
    """What an item's probes show (`ProbePlan.shows`): its image's sha256, question and options."""
    record = item.record
    return {"images": [record["image_sha256"]], "question": record["question"], "options": record["options"]}


def rotated_traces(item: McotItem, circular: bool) -> tuple[tuple[str, int], ...]:
    """(probe, rotation k) of every further rotation's trace ("trace@r{k}", k >= 1); none without `circular`."""
    return tuple((rotated_probe("trace", k), k) for k in rotations(item.record["options"], circular) if k > 0)


def rotated_item(item: McotItem, k: int) -> McotItem:
    """The item as rotation k of its options shows it (the agent's prompt reads its options)."""
    return replace(item, record={**item.record, "options": rotate_options(item.record["options"], k)})


class McotProbePlan:
    """The plan (module docstring)."""

    def __init__(self, settings: AgentSettings, injector: Injector, traces: Path | None = None,
                 circular: bool = False) -> None:
        self.settings = settings
        self.injector = injector
        self.circular = circular
        self.traces, self.traces_sha256 = read_traces(traces) if traces else ({}, None)
        for item_id, line in self.traces.items():
            asked = {"protocol": line["meta"]["trace"].get("protocol"), "coords": line["meta"]["trace"].get("coords")}
            if asked != {"protocol": settings.protocol, "coords": settings.coords}:
                raise MmfaithError(f"--traces {traces}: the trace of {item_id} was asked with --tool-protocol "
                                   f"{asked['protocol']} --coords {asked['coords']}; replay it with the same options "
                                   f"(this run: --tool-protocol {settings.protocol} --coords {settings.coords}).")
        self._crop_images: dict[str, list[Shown]] = {}

    @property
    def images_per_request(self) -> int:
        """The most images one request shows: the image and one crop per turn (what `run --serve` lets vLLM take)."""
        return self.settings.max_turns + 1

    def expected_probes(self, item: McotItem) -> tuple[str, ...]:
        return PROBES + tuple(probe for probe, _ in rotated_traces(item, self.circular))

    def images(self, item: McotItem) -> list[Shown]:
        """The original image, and after the item ran the crops made for it (so the engine drops their payloads)."""
        return [item.image, *self._crop_images.pop(item.id, [])]

    def resume_settings(self) -> dict[str, Any]:
        s = self.settings
        return {"protocol": s.protocol, "coords": s.coords, "max_turns": s.max_turns, "continuation": s.continuation,
                "seed": s.seed, "injector": self.injector.name, "prompt_version": PROMPT_VERSION,
                "prompts_sha256": prompts_hash(), "traces_sha256": self.traces_sha256,
                "system_prompt_sha256": None if s.system_prompt is None else sha256_bytes(s.system_prompt.encode()),
                "circular": self.circular}

    def provenance(self) -> dict[str, Any]:
        return {"trace_version": "mcot-trace/1"}

    def shows(self, item: McotItem) -> dict[str, Any]:
        return item_shows(item)

    async def run_item(self, item: McotItem, asker: ItemAsker) -> None:
        crops = CropStore(item, None if asker.dry_run else asker.run_dir / CROPS_DIR)
        rotated = [self._rotated_trace(item, asker, crops, probe, k)
                   for probe, k in rotated_traces(item, self.circular) if asker.pending(probe)]
        try:
            if asker.dry_run:  # printed in order
                for step in (self._run_item(item, asker, crops), *rotated):
                    await step
            else:
                await asyncio.gather(self._run_item(item, asker, crops), *rotated)
        finally:
            self._crop_images[item.id] = list(crops.made())

    async def _run_item(self, item: McotItem, asker: ItemAsker, crops: CropStore) -> None:
        trace_line = asker.answered("trace")
        if trace_line is None and item.id in self.traces:  # a submitted trace: replayed, not run
            submitted = self.traces[item.id]
            trace_line = {"id": item.id, "probe": "trace", "response": submitted["response"], "model": asker.model,
                          "meta": {**submitted["meta"], "submitted_by": submitted["model"], "error": None}}
            await asker.write(trace_line)
        elif trace_line is None:
            trace_line = await run_trace(item, asker, self.settings, crops)
            await asker.write(trace_line)
        pending = [probe for probe in REPLAYS if asker.pending(probe)]
        if not pending or asker.dry_run:
            return
        if trace_line["response"] is None:
            for probe in pending:
                await asker.fail(probe, {}, TRACE_FAILED)
            return
        trace = trace_line["meta"]["trace"]
        if not trace["crops"]:
            for probe in pending:
                await asker.write({"id": item.id, "probe": probe, "response": "", "model": trace_line["model"],
                                   "meta": {"skipped": SKIPPED, "error": None}})
            return
        await asyncio.gather(*(self._replay(item, asker, trace, probe, crops) for probe in pending))

    async def _rotated_trace(self, item: McotItem, asker: ItemAsker, crops: CropStore, probe: str, k: int) -> None:
        line = await run_trace(rotated_item(item, k), asker, self.settings, crops, probe)
        await asker.write({**line, "meta": {**line["meta"], "rotation": k}})

    async def _replay(self, item: McotItem, asker: ItemAsker, trace: dict[str, Any], probe: str,
                      crops: CropStore) -> None:
        request = await replay_request(probe, trace, self.settings, self.injector, crops, item.id,
                                       item.record["options"])
        turns = [*first_turns(item, self.settings), *request.tail]
        line = await asker.ask(probe, turns, request.meta, extra=request.extra, priority=0, record=False)
        if line["response"] is not None:
            line["meta"]["answer"] = replay_answer(line["response"], request, item.record["options"])
        line["meta"]["images_sha256"] = [shown["sha256"] for shown in line["meta"].get("images", [])]
        await asker.write(line)
