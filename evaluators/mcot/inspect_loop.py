"""MCoT inside inspect_ai: the `tool` rows of `mmfaith export inspect` (imports inspect_ai).

Contract (docs/harnesses.md#mcot)
---------------------------------
`zoom_trace(state, row, arguments)` asks, in the sample, every probe `mmfaith run mcot` asks, with
the task's arguments `max_turns` (`-T max_turns=N`, default the export's: the run's 6), `protocol`
(`functions`, or `tags`), `continuation` (`continue`, or `user-turn`) and `seed`, and returns the
rounds for the sample's store:

- `trace`: the conversation starts as the sample's messages (the system prompt describing the tool
  in the protocol's words, then the image and the question). At most `max_turns` model calls, each
  `get_model().generate(messages, tools=...)` under the task's generation config (functions: the
  zoom-in tool declared, `ZOOM_TOOL`; tags: no tools), each a model event of the log. Each reply
  goes through the run's own steps (agent.reply_calls, reply_text, TraceBuilder, answer_calls:
  target_image, the box mapped to the original image, the errors the model is told); the turns
  answering its calls become inspect messages (text parts, and the crops as PNG data URIs of the
  bytes the run makes). A reply without calls ends the trace; the calls of the last allowed reply
  are recorded, not run. Written as single steps rather than `generate(tool_calls="loop")`,
  whose only stops are message and token limits that end a sample as an error; the crop is made by
  mmfaith, not by inspect's tool runner, so that its bytes and the call records are the run's. Its
  meta is what run_trace writes beside the response: `trace` (TRACE_VERSION), `images_sha256`,
  `images` (the last request's), `calls`. A function call's `raw` is its arguments as inspect
  parsed them, serialised again with `json.dumps` (inspect keeps no raw text).
- `replay_none`, `replay_text`, `replay_visual`: each one call, the request `replay.replay_request`
  builds (the rule injector; noise seeded by `seed`), after the sample's first messages; the
  `continue` continuation sends vLLM's `continue_final_message` / `add_generation_prompt` through
  inspect's `extra_body` (OpenAI-compatible providers only: with a local model pass
  `-T continuation=user-turn`). Meta as run.py writes it (continuation, injection, answer, images,
  images_sha256). A trace without a crop gives the replays an empty response and `meta.skipped`.
- A failed model call raises in inspect and the sample ends with its error (the import makes error
  lines of it; the replays of a failed trace are not asked).
"""
from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
from inspect_ai.model import (ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser,
                              ContentImage, ContentText, GenerateConfig, ModelOutput, get_model)
from inspect_ai.solver import TaskState
from inspect_ai.tool import ToolCall as InspectToolCall
from inspect_ai.tool import ToolInfo, ToolParams
from PIL import Image

from mmfaith.errors import MmfaithError
from mmfaith.images import data_url
from mmfaith.evaluators.image_payload import DerivedImage
from mmfaith.evaluators.mcot.agent import (AgentSettings, TraceBuilder, answer_calls, crop_png,
                                           crop_transform, noise_png, noise_transform, reply_calls, reply_text,
                                           shown_images)
from mmfaith.evaluators.mcot.boxes import Region
from mmfaith.evaluators.mcot.interventions import RuleInjector
from mmfaith.evaluators.mcot.protocol import CONTINUATIONS, PROTOCOLS, TOOL, TOOL_NAME, system_prompt
from mmfaith.evaluators.mcot.replay import REPLAYS, SKIPPED, replay_answer, replay_request
from mmfaith.evaluators.run_engine import Turn
from mmfaith.images import sha256_bytes

ZOOM_TOOL = ToolInfo(name=TOOL["function"]["name"], description=TOOL["function"]["description"],
                     parameters=ToolParams.model_validate(TOOL["function"]["parameters"]))
"""The zoom-in tool as a functions request declares it (protocol.TOOL, in inspect's JSON-schema rendering)."""


class SampleCrops:
    """The crops (and noise crops) of the sample's original image (replay.ReplayCrops), made in memory as the
    run makes them; their DerivedImages carry the run's transforms."""

    def __init__(self, image: bytes, item_id: str) -> None:
        with Image.open(io.BytesIO(image)) as opened:
            self.rgb = np.asarray(opened.convert("RGB"))
        self.item_id = item_id

    async def region(self, region: Region) -> tuple[DerivedImage, str]:
        return self._image(crop_png(self.rgb, region), crop_transform(region), region)

    async def noise(self, region: Region, seed: int, index: int) -> tuple[DerivedImage, str]:
        return self._image(noise_png(region, seed, self.item_id, index), noise_transform(region, seed, index), region)

    @staticmethod
    def _image(png: bytes, transform: str, region: Region) -> tuple[DerivedImage, str]:
        sha = sha256_bytes(png)
        return DerivedImage(key=sha, sources=(), transform=transform, make=lambda: png,
                            size=lambda: (region.width, region.height)), sha


def _calls_as_openai(calls: list[InspectToolCall] | None) -> list[dict[str, Any]]:
    """inspect's parsed tool calls as OpenAI `tool_calls` entries; a call inspect could not parse carries its
    parse error as its arguments text (not JSON: the run records and answers it as a malformed call)."""
    return [{"id": call.id, "function": {"name": call.function,
                                          "arguments": call.parse_error or json.dumps(call.arguments)}}
            for call in calls or []]


def _message(turn: Turn) -> ChatMessage:
    """A turn of the run's conversation (after the first turns) as an inspect message, images as data URIs of
    their bytes; a replayed assistant turn's OpenAI `tool_calls` as inspect tool calls."""
    if turn.role == "assistant":
        calls = [InspectToolCall(id=call["id"], function=call["function"]["name"],
                                 arguments=_arguments(call["function"]["arguments"]))
                 for call in (turn.fields or {}).get("tool_calls", [])]
        return ChatMessageAssistant(content=str(turn.content[0]) if turn.content else "", tool_calls=calls or None)
    if turn.role == "tool":
        return ChatMessageTool(content=str(turn.content[0]), tool_call_id=(turn.fields or {})["tool_call_id"],
                               function=TOOL_NAME)
    return ChatMessageUser(content=[ContentText(text=part) if isinstance(part, str) else
                                    ContentImage(image=data_url(part.load())) for part in turn.content])


def _arguments(raw: str) -> dict[str, Any]:
    """A recorded call's arguments for inspect, which sends them as JSON of its own: a malformed call's text
    cannot be sent as it was, so it goes as {}."""
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _image_bytes(message: ChatMessage) -> bytes:
    image = next(part for part in message.content if isinstance(part, ContentImage))
    return base64.b64decode(image.image.split(",", 1)[1])


def _settings(layout: dict[str, Any], arguments: dict[str, Any]) -> AgentSettings:
    """The run's settings from the row and the task arguments (module docstring); a bad value stops the sample."""
    protocol, continuation = arguments.get("protocol", "functions"), arguments.get("continuation", "continue")
    max_turns = int(arguments.get("max_turns", 6))
    if protocol not in PROTOCOLS or continuation not in CONTINUATIONS or max_turns < 1:
        raise MmfaithError(f"-T protocol={protocol} -T continuation={continuation} -T max_turns={max_turns}: the "
                           f"protocols are {', '.join(PROTOCOLS)}, the continuations {', '.join(CONTINUATIONS)}, "
                           "the turn limit 1 or more.")
    return AgentSettings(protocol=protocol, coords=layout["coords"], max_turns=max_turns, continuation=continuation,
                         seed=int(arguments.get("seed", 0)))


def _tokens(output: ModelOutput) -> dict[str, int | None]:
    usage = output.usage
    return {"prompt_tokens": usage.input_tokens if usage else None,
            "completion_tokens": usage.output_tokens if usage else None}


async def zoom_trace(state: TaskState, row: dict[str, Any], arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Ask every probe of one exported row (module docstring); returns its rounds in probe order."""
    layout = json.loads(row["state"])
    settings = _settings(layout, arguments)
    state.messages[0] = ChatMessageSystem(content=system_prompt(settings.protocol, settings.coords))
    first = list(state.messages)
    crops = SampleCrops(_image_bytes(first[-1]), row["id"])
    trace_round, trace = await _trace(state, row, layout, settings, crops)
    rounds = [trace_round]
    for probe in REPLAYS:
        if not trace["crops"]:
            rounds.append({"probe": probe, "prompt": None, "response": "", "error": None, "meta": {"skipped": SKIPPED}})
        else:
            rounds.append(await _replay(probe, first, trace, settings, crops, row, layout["options"]))
    return rounds


async def _trace(state: TaskState, row: dict[str, Any], layout: dict[str, Any], settings: AgentSettings,
                 crops: SampleCrops) -> tuple[dict[str, Any], dict[str, Any]]:
    """The trace round and the trace (module docstring); `layout` is the row's parsed state."""
    original = row["image_sha256"][0]
    builder = TraceBuilder(original, tuple(layout["image_size"]), settings)
    model = get_model()
    tools = [ZOOM_TOOL] if settings.protocol == "functions" else []
    tokens = {"prompt_tokens": 0, "completion_tokens": 0}
    for number in range(settings.max_turns):
        output = await model.generate(state.messages, tools=tools)
        state.output = output
        for key, value in _tokens(output).items():
            tokens[key] += value or 0
        if output.error:  # a refusal the provider reports without raising: the trace stops, as on a failed call
            builder.failed()
            break
        reply = output.message
        calls = reply_calls(reply.text, _calls_as_openai(reply.tool_calls), settings)
        text = reply_text(reply.text, calls, settings)
        builder.reply(text, output.stop_reason, calls)
        # every reply joins the sample's messages (the log's transcript ends with the answer); only a reply
        # whose calls are answered is sent again
        state.messages.append(reply if settings.protocol == "functions" else ChatMessageAssistant(content=text))
        if not calls:
            break
        if number == settings.max_turns - 1:
            builder.not_run(calls)
            break
        state.messages += [_message(turn) for turn in await answer_calls(calls, builder, settings, crops)]
    trace = builder.finish(layout["options"])
    return {"probe": "trace", "prompt": row["prompt"], "response": None if output.error else output.message.text,
            "error": output.error or None, "finish_reason": output.stop_reason, **tokens,
            "meta": {"trace": trace, "images_sha256": builder.images_sha256, "calls": number + 1,
                     "images": shown_images(original, [(c["sha256"], crop_transform(Region(*c["box"])))
                                                       for c in trace["crops"]])}}, trace


async def _replay(probe: str, first: list[ChatMessage], trace: dict[str, Any], settings: AgentSettings,
                  crops: SampleCrops, row: dict[str, Any], options: list[dict[str, str]]) -> dict[str, Any]:
    """One replay round (module docstring)."""
    request = await replay_request(probe, trace, settings, RuleInjector(), crops, row["id"], options)
    extra = dict(request.extra or {})
    tools = [ZOOM_TOOL] if extra.pop("tools", None) else []
    output = await get_model().generate([*first, *(_message(turn) for turn in request.tail)], tools=tools,
                                        config=GenerateConfig(extra_body=extra or None))
    response = None if output.error else output.completion
    meta = {**request.meta, "images": shown_images(row["image_sha256"][0],
                                                   [(image.key, image.transform) for image in request.images])}
    meta["images_sha256"] = [shown["sha256"] for shown in meta["images"]]
    if response is not None:
        meta["answer"] = replay_answer(response, request, options)
    return {"probe": probe, "prompt": None, "response": response, "error": output.error or None,
            "finish_reason": output.stop_reason, **_tokens(output), "meta": meta}
