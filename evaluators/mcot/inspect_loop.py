"""MCoT's zoom-in trace inside inspect_ai: the `tool` rows of `mmfaith export inspect` (imports inspect_ai).

Contract (docs/harnesses.md#mcot)
---------------------------------
`zoom_trace(state, row, arguments)` runs, in the sample, the loop `mmfaith run mcot` runs
(agent.run_trace) with the task's arguments `max_turns` (`-T max_turns=N`, default the export's:
the run's 6) and `protocol` (`-T protocol=tags`; default `functions`), and returns the `trace`
round for the sample's store:

- The conversation starts as the sample's messages: the system prompt describing the tool (the
  protocol's), then the image and the question. At most `max_turns` model calls, each
  `get_model().generate(messages, tools=...)` under the task's generation config (functions: the
  zoom-in tool declared, `ZOOM_TOOL`; tags: no tools), each a model event of the log.
- Each reply goes through the run's own steps (agent.reply_calls, reply_text, TraceBuilder,
  answer_calls: target_image, the box mapped to the original image, the errors the model is
  told); the turns that answer its calls become inspect messages (text parts, and the crops as
  PNG data URIs of the bytes the run makes): the messages `mmfaith run mcot` sends. A reply
  without calls ends the trace; the calls of the last allowed reply are recorded, not run. The
  loop is written as single steps rather than `generate(tool_calls="loop")`, whose only stops are
  message and token limits that end a sample as an error; the crop is made by mmfaith, not by
  inspect's tool runner, so that its bytes and the call records are the run's.
- The round: the last reply as `response` (a failed call raises in inspect and the sample ends
  with its error), summed tokens, the last call's stop reason, and in `meta` what run_trace writes
  beside the response: `trace` (TRACE_VERSION), `images_sha256`, `images` (the last request's
  images, crops with their source and transform) and `calls`. A function call's `raw` is its
  arguments as inspect parsed them, serialised again with `json.dumps` (inspect keeps no raw text).
"""
from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
from inspect_ai.model import (ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser,
                              ContentImage, ContentText, get_model)
from inspect_ai.solver import TaskState
from inspect_ai.tool import ToolCall as InspectToolCall
from inspect_ai.tool import ToolInfo, ToolParams
from PIL import Image

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.inspect_solvers import data_uri
from mmfaith.evaluators.image_payload import DerivedImage
from mmfaith.evaluators.mcot.agent import (AgentSettings, TraceBuilder, answer_calls, crop_png, crop_transform,
                                           reply_calls, reply_text, shown_in_trace)
from mmfaith.evaluators.mcot.boxes import Region
from mmfaith.evaluators.mcot.protocol import PROTOCOLS, TOOL, system_prompt
from mmfaith.evaluators.run_engine import Turn
from mmfaith.images import sha256_bytes

ZOOM_TOOL = ToolInfo(name=TOOL["function"]["name"], description=TOOL["function"]["description"],
                     parameters=ToolParams.model_validate(TOOL["function"]["parameters"]))
"""The zoom-in tool as a functions request declares it (protocol.TOOL, in inspect's JSON-schema rendering)."""


class SampleCrops:
    """The crops of the sample's original image (agent.Crops), made in memory as the run makes them."""

    def __init__(self, image: bytes) -> None:
        with Image.open(io.BytesIO(image)) as opened:
            self.rgb = np.asarray(opened.convert("RGB"))

    async def region(self, region: Region) -> tuple[DerivedImage, str]:
        png = crop_png(self.rgb, region)
        sha = sha256_bytes(png)
        return DerivedImage(key=sha, sources=(), transform=crop_transform(region), make=lambda: png,
                            size=lambda: (region.width, region.height)), sha


def _calls_as_openai(calls: list[InspectToolCall] | None) -> list[dict[str, Any]]:
    """inspect's parsed tool calls as OpenAI `tool_calls` entries; a call inspect could not parse carries its
    parse error as its arguments text (not JSON: the run records and answers it as a malformed call)."""
    return [{"id": call.id, "function": {"name": call.function,
                                          "arguments": call.parse_error or json.dumps(call.arguments)}}
            for call in calls or []]


def _message(turn: Turn) -> ChatMessage:
    """A turn answering tool calls as an inspect message (images as data URIs of their bytes)."""
    if turn.role == "tool":
        return ChatMessageTool(content=str(turn.content[0]), tool_call_id=(turn.fields or {})["tool_call_id"],
                               function=ZOOM_TOOL.name)
    return ChatMessageUser(content=[ContentText(text=part) if isinstance(part, str) else
                                    ContentImage(image=data_uri(part.load())) for part in turn.content])


def _image_bytes(message: ChatMessage) -> bytes:
    image = next(part for part in message.content if isinstance(part, ContentImage))
    return base64.b64decode(image.image.split(",", 1)[1])


async def zoom_trace(state: TaskState, row: dict[str, Any], arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the trace of one exported row (module docstring); returns its rounds (one, `trace`)."""
    layout = json.loads(row["state"])
    protocol = arguments.get("protocol", "functions")
    if protocol not in PROTOCOLS:
        raise MmfaithError(f"-T protocol={protocol}: the protocols are {', '.join(PROTOCOLS)}.")
    settings = AgentSettings(protocol=protocol, coords=layout["coords"], max_turns=int(arguments["max_turns"]))
    state.messages[0] = ChatMessageSystem(content=system_prompt(protocol, settings.coords))
    original = row["image_sha256"][0]
    builder = TraceBuilder(original, tuple(layout["image_size"]), settings)
    crops = SampleCrops(_image_bytes(state.messages[-1]))
    model = get_model()
    tools = [ZOOM_TOOL] if protocol == "functions" else []
    tokens = {"prompt_tokens": 0, "completion_tokens": 0}
    output = None
    for number in range(settings.max_turns):
        output = await model.generate(state.messages, tools=tools)
        state.output = output
        if output.usage:
            tokens["prompt_tokens"] += output.usage.input_tokens
            tokens["completion_tokens"] += output.usage.output_tokens
        if output.error:
            builder.failed()
            break
        reply = output.message
        calls = reply_calls(reply.text, _calls_as_openai(reply.tool_calls), settings)
        text = reply_text(reply.text, calls, settings)
        builder.reply(text, output.stop_reason, calls)
        if not calls:
            break
        if number == settings.max_turns - 1:
            builder.not_run(calls)
            break
        state.messages.append(reply if protocol == "functions" else ChatMessageAssistant(content=text))
        state.messages += [_message(turn) for turn in await answer_calls(calls, builder, settings, crops)]
    trace = builder.finish(layout["options"])
    failed = output is None or bool(output.error)
    return [{"probe": "trace", "prompt": row["prompt"], "response": None if failed else output.message.text,
             "error": output.error if output is not None and output.error else None,
             "finish_reason": output.stop_reason if output is not None else None, **tokens,
             "meta": {"trace": trace, "images_sha256": builder.images_sha256, "calls": number + 1,
                      "images": shown_in_trace(trace, original)}}]
