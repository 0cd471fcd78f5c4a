"""The zoom-in agent loop on the shared run engine, and the replay of a recorded trace.

Contract (docs/mcot.md#the-agent-loop)
--------------------------------------
`run_trace(item, asker, settings, crops)` asks the model (each call one `ItemAsker.ask` with
`record=False`) until a reply holds a final answer and no tool call, or `max_turns` calls were made;
each tool call's box is mapped to the original image (`boxes.map_box`, a crop of a crop included),
the crop is made once (`CropStore`) and sent back (tags: in a user turn wrapped in
`<tool_response>`; functions: a `tool` message "crop attached" per call, then the crops in one user
turn). A malformed call (bad JSON, no bbox_2d, an empty box) is recorded and the model is told
why, and the loop goes on. It returns the probe's line: the last reply as `response`, and in meta
the whole `trace` (TRACE_VERSION) and `images_sha256`, tokens and latency summed over the calls.
Its steps (`reply_calls`, `reply_text`, `TraceBuilder`, `answer_calls`) are what the inspect_ai
loop of `mmfaith export inspect` runs too (inspect_loop.py), so both record the same trace.

`replay_tail(trace, settings, texts, crop_images)` rebuilds the conversation of a trace (after
`first_turns`) with
the given assistant texts (the trace's own, or intervened) and crop images (the stored crops, or
noise), cut at the first answer tag, ending as `settings.continuation` says: `continue` (the last
assistant message continued: `continue_final_message`, `add_generation_prompt` false) or
`user-turn` (a final user turn asking only for the answer).
"""
from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image

from mmfaith.evaluators.image_payload import DerivedImage, Shown
from mmfaith.evaluators.mcot.boxes import BoxError, Region, crop, grid_size, inverted, map_box, noise_like
from mmfaith.evaluators.mcot.protocol import (FINAL_ANSWER_REQUEST, TOOL, TOOL_ANSWER_TEXT, TOOL_NAME, ToolCall,
                                              answer_letter,
                                              cut_at_answer, final_answer, function_tool_calls, question_text,
                                              system_prompt, tag_tool_calls)
from mmfaith.evaluators.run_engine import ItemAsker, Turn
from mmfaith.images import png_bytes, sha256_bytes
from mmfaith.jsonl import write_atomic
from mmfaith.loaders.mcot.dataset import McotItem

TRACE_VERSION = "mcot-trace/1"
CROPS_DIR = "crops"
NOT_RUN = "not run: the turn limit was reached"


@dataclass(frozen=True)
class AgentSettings:
    """How the loop and the replays talk to the model (recorded in run.json)."""

    protocol: str = "tags"
    coords: str = "resized"
    max_turns: int = 6
    continuation: str = "continue"
    seed: int = 0
    system_prompt: str | None = None
    """Replaces the built-in system prompt (a model's own, e.g. DeepEyes'); None: `protocol.system_prompt`."""

    def extra(self) -> dict[str, Any] | None:
        return {"tools": [TOOL]} if self.protocol == "functions" else None


def crop_transform(region: Region) -> str:
    """How a crop is recorded among the images a request showed: "crop x1,y1,x2,y2" of the original."""
    return f"crop {','.join(map(str, region.as_list()))}"


def crop_png(rgb: np.ndarray, region: Region) -> bytes:
    """A crop's PNG bytes, as sent and stored (the bytes its sha256 in the trace names)."""
    return png_bytes(crop(rgb, region))


def noise_png(region: Region, seed: int, item_id: str, index: int) -> bytes:
    """The PNG bytes of crop `index`'s noise stand-in (the visual intervention): seeded by the run's seed, the
    item and the crop's index, of the crop's size."""
    return png_bytes(noise_like(region, seed, f"{item_id}:{index}"))


def noise_transform(region: Region, seed: int, index: int) -> str:
    """How a noise crop (the visual intervention) is recorded among the images a request showed."""
    return f"noise seed={seed} index={index} size={region.width}x{region.height}"


def shown_images(image_sha256: str, derived: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The images a request showed, the original then images made from it ((sha256, transform) each), as a
    prediction line's `meta.images` records them."""
    return [{"sha256": image_sha256}, *({"sha256": sha, "sources": [image_sha256], "transform": transform}
                                        for sha, transform in derived)]


class CropStore:
    """The crops of one item's original image, each made once and kept as RUN_DIR/crops/<name>.png.

    A crop's PNG is written on first use and read back after (replays and resumed runs send the
    stored bytes); in a dry run (`folder` None) it is made in memory only.
    """

    def __init__(self, item: McotItem, folder: Path | None) -> None:
        self.item = item
        self.folder = folder
        self._rgb: np.ndarray | None = None
        self._made: dict[str, asyncio.Future[tuple[bytes, str]]] = {}
        self._images: dict[str, DerivedImage] = {}

    async def region(self, region: Region) -> tuple[DerivedImage, str]:
        """(the crop as a derived image, its sha256)."""
        name = f"{self.item.record['image_sha256'][:16]}-{'_'.join(map(str, region.as_list()))}"
        return await self._image(name, crop_transform(region), lambda rgb: crop_png(rgb, region), region)

    async def noise(self, region: Region, seed: int, index: int) -> tuple[DerivedImage, str]:
        """Seeded uniform noise of the crop's size (the visual intervention)."""
        name = f"noise-{seed}-{self.item.record['image_sha256'][:16]}-{index}-{'_'.join(map(str, region.as_list()))}"
        return await self._image(name, noise_transform(region, seed, index),
                                 lambda rgb: noise_png(region, seed, self.item.id, index), region)

    async def _image(self, name: str, transform: str, make: Any, region: Region) -> tuple[DerivedImage, str]:
        if name not in self._made:  # one making per crop, awaited by every caller (replays run at once)
            self._made[name] = asyncio.ensure_future(asyncio.to_thread(self._make, name, make))
        png, sha = await self._made[name]
        if name not in self._images:
            self._images[name] = DerivedImage(key=sha, sources=(self.item.image,), transform=transform,
                                              make=lambda: png, size=lambda: (region.width, region.height))
        return self._images[name], sha

    def made(self) -> list[DerivedImage]:
        """Every image made so far (for the engine to drop their payloads when the item is done)."""
        return list(self._images.values())

    def _make(self, name: str, make: Any) -> tuple[bytes, str]:
        path = None if self.folder is None else self.folder / f"{name}.png"
        if path is not None and path.is_file():
            png = path.read_bytes()
        else:
            if self._rgb is None:
                with Image.open(io.BytesIO(self.item.image_path.read_bytes())) as opened:
                    self._rgb = np.asarray(opened.convert("RGB"))
            png = make(self._rgb)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, png)
        return png, sha256_bytes(png)


def first_turns(item: McotItem, settings: AgentSettings) -> list[Turn]:
    """The system prompt and the first user turn (image, question, options)."""
    width, height = item.size
    grid = grid_size(width, height, settings.coords) if settings.coords == "resized" else None
    return [Turn("system", (settings.system_prompt or system_prompt(settings.protocol, settings.coords),)),
            Turn("user", (item.image, question_text(item.record["question"], item.record["options"], grid)))]


class TraceBuilder:
    """One trace record as its turns come in (docs/mcot.md#the-trace-record), whoever asks the model:
    `run_trace` here, and the inspect_ai solver of `mmfaith export inspect` (inspect_loop.py).

    `reply` records a model reply; `resolve` checks one of its tool calls and maps its box to the
    original image (`target_image` 1 to the images shown so far, `boxes.map_box`), recording it; the
    caller makes the crop and reports it with `cropped`; `not_run` records calls left at the turn
    limit; `finish` adds the final answer and its option label.
    """

    def __init__(self, image_sha256: str, size: tuple[int, int], settings: AgentSettings) -> None:
        width, height = size
        self.frames = [Region(0, 0, width, height)]  # image n (1-based) of the conversation: its region of the original
        self.images_sha256 = [image_sha256]
        self.coords = settings.coords
        self.trace: dict[str, Any] = {"version": TRACE_VERSION, "protocol": settings.protocol,
                                      "coords": settings.coords, "image_size": [width, height],
                                      "max_turns": settings.max_turns, "turns": [], "crops": [],
                                      "stopped": "max_turns"}

    def reply(self, text: str, finish_reason: str | None, calls: list[ToolCall]) -> None:
        """Record a reply (its calls are resolved next); a reply without calls stops the trace."""
        self.trace["turns"].append({"text": text, "finish_reason": finish_reason, "tool_calls": []})
        if not calls:
            self.trace["stopped"] = "answer" if final_answer(text) is not None else "no_answer"

    def resolve(self, call: ToolCall) -> tuple[Region | None, dict[str, Any]]:
        """(the call's region of the original image, or None when it cannot be run: its record's
        `error` says why), the call's record in the current turn."""
        record: dict[str, Any] = {"raw": call.raw, "arguments": call.arguments, "error": call.error}
        region = None
        if call.error is None:
            assert call.arguments is not None
            target = call.arguments.get("target_image", 1)
            if not isinstance(target, int) or isinstance(target, bool) or not 1 <= target <= len(self.frames):
                record["error"] = f"target_image must be 1 to {len(self.frames)}, got {target!r}"
            else:
                try:
                    region = map_box(call.arguments["bbox_2d"], self.frames[target - 1], self.coords)
                except BoxError as exc:
                    record["error"] = str(exc)
                record.update(box_given=call.arguments["bbox_2d"], target_image=target)
                if region is not None and inverted(call.arguments["bbox_2d"]):
                    record["box_inverted"] = True  # taken in order (boxes.map_box), and said so
        self.trace["turns"][-1]["tool_calls"].append(record)
        return region, record

    def cropped(self, record: dict[str, Any], region: Region, sha256: str) -> None:
        """The crop of a resolved call was made (and is shown as the next image)."""
        self.frames.append(region)
        self.images_sha256.append(sha256)
        record.update(box_mapped=region.as_list(), crop={"sha256": sha256, "size": [region.width, region.height]})
        self.trace["crops"].append({"box": region.as_list(), "sha256": sha256, "image_number": len(self.frames)})

    def not_run(self, calls: list[ToolCall]) -> None:
        """The last allowed reply still called the tool: its calls are recorded, not run."""
        self.trace["turns"][-1]["tool_calls"] = [{"raw": call.raw, "error": NOT_RUN} for call in calls]

    def failed(self) -> None:
        """A model call failed: the trace stops there."""
        self.trace["stopped"] = "error"

    def finish(self, options: list[dict[str, str]]) -> dict[str, Any]:
        """The finished trace: the last reply's final answer and its option label."""
        turns = self.trace["turns"]
        self.trace["final_answer"] = final_answer(turns[-1]["text"]) if turns else None
        self.trace["answer"] = answer_letter(turns[-1]["text"], options) if turns else None
        return self.trace


NO_IMAGE_CROP = "no image is given, so there is nothing to crop"
"""A tool call's error in a `run --no-image` trace: the zoom tool answers every call with it
(docs/mcot.md#blind-controls)."""


def tool_error_message(error: str) -> str:
    """What the model is told about a tool call that could not be run."""
    return f"Error: {error}. Call {TOOL_NAME} again with a valid box, or answer."


async def run_trace(item: McotItem, asker: ItemAsker, settings: AgentSettings, crops: CropStore,
                    probe: str = "trace") -> dict[str, Any]:
    """The model's own run (module docstring) as `probe` (a rotation of the options: "trace@r{k}"); returns the
    line (written by the caller)."""
    builder = TraceBuilder(item.record["image_sha256"], item.size, settings)
    turns = first_turns(item, settings)
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "calls": 0}
    line: dict[str, Any] = {}
    for number in range(settings.max_turns):
        line = await asker.ask(probe, turns, {"turn": number}, extra=settings.extra(), record=False,
                               priority=settings.max_turns - number)
        meta = line["meta"]
        totals["calls"] += 1
        for key in ("prompt_tokens", "completion_tokens", "latency_s"):
            totals[key] += meta.get(key) or 0
        if line["response"] is None:
            builder.failed()
            break
        text = line["response"]
        calls = reply_calls(text, meta.get("tool_calls", []), settings)
        text = reply_text(text, calls, settings)
        builder.reply(text, meta.get("finish_reason"), calls)
        if not calls:
            break
        if number == settings.max_turns - 1:
            builder.not_run(calls)
            break
        answer_turns = await answer_calls(calls, builder, settings, crops, no_image=asker.no_image)
        assistant_fields = {"tool_calls": meta["tool_calls"]} if settings.protocol == "functions" else None
        turns += [Turn("assistant", (text,) if text else (), assistant_fields), *answer_turns]
    trace = builder.finish(item.record["options"])
    meta = {**line.get("meta", {}), **totals, "latency_s": round(totals["latency_s"], 4), "trace": trace,
            "images_sha256": builder.images_sha256}
    meta.pop("turn", None)
    meta.pop("tool_calls", None)
    if line.get("response") is None:
        meta["error"] = f"turn {len(trace['turns']) + 1}: {line.get('meta', {}).get('error')}"
    return {**line, "probe": probe, "meta": meta}


class Crops(Protocol):
    """Where a loop's crops come from: `CropStore` for `mmfaith run`, the sample's image in inspect_ai."""

    async def region(self, region: Region) -> tuple[Shown, str]:
        """(the crop of `region` of the original image as an image to show, its PNG's sha256)."""


async def answer_calls(calls: list[ToolCall], builder: TraceBuilder, settings: AgentSettings,
                       crops: Crops, no_image: bool = False) -> list[Turn]:
    """Resolve and run one reply's tool calls (recorded in `builder`); the turns that answer them: functions, a
    `tool` turn per call ("crop attached" or the error) then the crops in one user turn; tags, one user turn
    of `<tool_response>` pieces (the crop, or the error text). With `no_image` no call is run: each is
    answered with the error NO_IMAGE_CROP (a trace without crops, whose replays are skipped)."""
    pieces: list[Shown | str] = []
    tool_turns: list[Turn] = []
    for call in calls:
        region, record = builder.resolve(call)
        if no_image and region is not None:
            region, record["error"] = None, NO_IMAGE_CROP
        if region is None:
            message = tool_error_message(record["error"])
            if settings.protocol == "functions":
                tool_turns.append(Turn("tool", (message,), {"tool_call_id": call.call_id or ""}))
            else:
                pieces.append(f"<tool_response>{message}</tool_response>")
        else:
            image, sha = await crops.region(region)
            builder.cropped(record, region, sha)
            if settings.protocol == "functions":
                tool_turns.append(Turn("tool", (TOOL_ANSWER_TEXT,), {"tool_call_id": call.call_id or ""}))
                pieces.append(image)
            else:
                pieces += ["<tool_response>", image, "</tool_response>"]
    return [*tool_turns, *([Turn("user", tuple(pieces))] if pieces else [])]


def replay_tail(trace: dict[str, Any], settings: AgentSettings, texts: list[str],
                crop_images: list[Shown]) -> tuple[list[Turn], dict[str, Any] | None]:
    """The replayed conversation after its first turns (`first_turns`), and the request's extra fields
    (module docstring).

    `texts` are the assistant steps (one per recorded turn, the last already cut at the answer tag);
    `crop_images` the images standing for the trace's crops, in order.
    """
    turns: list[Turn] = []
    crops = iter(crop_images)
    for number, turn in enumerate(trace["turns"]):
        text = texts[number]
        executed = turn["tool_calls"]
        last = number == len(trace["turns"]) - 1
        if last:
            text = text.split("<tool_call>")[0] if any(c.get("error") == NOT_RUN for c in executed) else text
            fields = None
        else:
            fields = ({"tool_calls": [_openai_call(number, i, c) for i, c in enumerate(executed)]}
                      if settings.protocol == "functions" else None)
        turns.append(Turn("assistant", (text,) if text else (), fields))
        if last:
            break
        pieces: list[Shown | str] = []
        for index, call in enumerate(executed):
            if settings.protocol == "functions":
                answer = TOOL_ANSWER_TEXT if call.get("crop") else f"Error: {call['error']}."
                turns.append(Turn("tool", (answer,), {"tool_call_id": f"call_{number}_{index}"}))
                if call.get("crop"):
                    pieces.append(next(crops))
            elif call.get("crop"):
                pieces += ["<tool_response>", next(crops), "</tool_response>"]
            else:
                pieces.append(f"<tool_response>Error: {call['error']}.</tool_response>")
        if pieces:
            turns.append(Turn("user", tuple(pieces)))
    if settings.continuation == "continue":
        return turns, {**(settings.extra() or {}), "continue_final_message": True, "add_generation_prompt": False}
    return [*turns, Turn("user", (FINAL_ANSWER_REQUEST,))], settings.extra()


def _openai_call(turn: int, index: int, call: dict[str, Any]) -> dict[str, Any]:
    """A recorded call as the `tool_calls` entry of a replayed assistant message (ids renumbered)."""
    return {"id": f"call_{turn}_{index}", "type": "function", "function": {"name": TOOL_NAME, "arguments": call["raw"]}}


def reply_calls(text: str, tool_calls: list[dict[str, Any]], settings: AgentSettings) -> list[ToolCall]:
    """A reply's tool calls: its OpenAI `tool_calls` (functions) or the `<tool_call>` tags of its text (tags)."""
    return function_tool_calls(tool_calls) if settings.protocol == "functions" else tag_tool_calls(text)


def reply_text(text: str, calls: list[ToolCall], settings: AgentSettings) -> str:
    """A reply's text as the trace keeps it and the conversation goes on with it: a tags reply with calls cut
    after its last closed `</tool_call>` (what the model would have stopped at)."""
    return _through_last_call(text) if settings.protocol == "tags" and calls else text


def _through_last_call(text: str) -> str:
    """A tags reply up to its last closed `</tool_call>`: what the model would have stopped at."""
    end = text.rfind("</tool_call>")
    return text[:end + len("</tool_call>")] if end > text.rfind("<tool_call>") else text


def step_texts(trace: dict[str, Any]) -> list[str]:
    """The trace's assistant steps as a replay shows them: the last cut at the first answer tag."""
    texts = [turn["text"] for turn in trace["turns"]]
    if texts:
        texts[-1] = cut_at_answer(texts[-1])
    return texts


def trace_regions(trace: dict[str, Any]) -> list[Region]:
    """The original-image regions of the trace's crops, in order."""
    return [Region(*crop_["box"]) for crop_ in trace["crops"]]
