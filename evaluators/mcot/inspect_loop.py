"""MCoT's zoom-in trace inside inspect_ai: the `tool` rows of `mmfaith export inspect` (imports inspect_ai).

Contract (docs/harnesses.md#mcot)
---------------------------------
`zoom_trace(state, row, arguments)` runs, in the sample, the loop `mmfaith run mcot --tool-protocol
functions` runs (agent.run_trace), and returns the `trace` round for the sample's store:

- The conversation starts as the sample's messages (the system prompt describing the tool, then
  the image and the question). At most `arguments["max_turns"]` model calls (the task argument
  `-T max_turns=N`, default the export's: the run's 6), each `get_model().generate(messages,
  tools=[ZOOM_TOOL])` under the task's generation config; each call is a model event of the log.
- A reply's tool calls are resolved with the run's own code (`agent.TraceBuilder`: target_image,
  the box mapped to the original image, the errors the model is told); each is answered by a tool
  message (`crop attached`, or the error text), then the crops follow in one user message as PNG
  data URIs of the bytes `CropStore` makes: the messages `mmfaith run mcot` sends. A reply without
  calls ends the trace; the calls of the last allowed reply are recorded, not run. The loop is
  written as single steps rather than `generate(tool_calls="loop")`, whose only stops are
  message and token limits that end a sample as an error; the tool's crop is made by mmfaith, not
  by inspect's tool runner, so that its bytes and the call records are the run's.
- The round: the last reply as `response` (None when a call failed: inspect raises and the sample
  ends with its error), summed tokens, the last call's stop reason, and in `meta` what run_trace
  writes beside the response: `trace` (TRACE_VERSION), `images_sha256`, `images` (the last request's
  images, crops with their source and transform) and `calls`. The tool call's `raw` is its
  arguments as inspect parsed them, serialised again with `json.dumps` (inspect keeps no raw text).
"""
from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
from inspect_ai.model import ChatMessageTool, ChatMessageUser, ContentImage, get_model
from inspect_ai.solver import TaskState
from inspect_ai.tool import ToolCall as InspectToolCall
from inspect_ai.tool import ToolInfo, ToolParams
from PIL import Image

from mmfaith.evaluators.harness.inspect_solvers import data_uri
from mmfaith.evaluators.mcot.agent import AgentSettings, TraceBuilder, crop_png, shown_in_trace, tool_error_message
from mmfaith.evaluators.mcot.harness import PROTOCOL
from mmfaith.evaluators.mcot.protocol import TOOL, TOOL_ANSWER_TEXT, ToolCall, function_tool_calls
from mmfaith.images import sha256_bytes

ZOOM_TOOL = ToolInfo(name=TOOL["function"]["name"], description=TOOL["function"]["description"],
                     parameters=ToolParams.model_validate(TOOL["function"]["parameters"]))
"""The zoom-in tool as the request declares it (protocol.TOOL, in inspect's JSON-schema rendering)."""


def _calls(calls: list[InspectToolCall] | None) -> list[ToolCall]:
    """inspect's parsed tool calls as the run's `ToolCall`s (a parse error stays the call's error)."""
    converted = []
    for call in calls or []:
        if call.parse_error:
            converted.append(ToolCall(call.id, json.dumps(call.arguments), None,
                                      f"the tool call's arguments are not valid JSON ({call.parse_error})"))
            continue
        converted += function_tool_calls([{"id": call.id, "function": {"name": call.function,
                                                                        "arguments": json.dumps(call.arguments)}}])
    return converted


async def zoom_trace(state: TaskState, row: dict[str, Any], arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """Run the trace of one exported row (module docstring); returns its rounds (one, `trace`)."""
    layout = json.loads(row["state"])
    settings = AgentSettings(protocol=PROTOCOL, coords=layout["coords"], max_turns=int(arguments["max_turns"]))
    original = row["image_sha256"][0]
    builder = TraceBuilder(original, tuple(layout["image_size"]), settings)
    image = next(part for part in state.messages[-1].content if isinstance(part, ContentImage))
    with Image.open(io.BytesIO(base64.b64decode(image.image.split(",", 1)[1]))) as opened:
        rgb = np.asarray(opened.convert("RGB"))
    model = get_model()
    tokens = {"prompt_tokens": 0, "completion_tokens": 0}
    output = None
    calls_made = 0
    for number in range(settings.max_turns):
        output = await model.generate(state.messages, tools=[ZOOM_TOOL])
        calls_made += 1
        state.output = output
        if output.usage:
            tokens["prompt_tokens"] += output.usage.input_tokens
            tokens["completion_tokens"] += output.usage.output_tokens
        if output.error:
            builder.failed()
            break
        reply = output.message
        state.messages.append(reply)
        calls = _calls(reply.tool_calls)
        builder.reply(reply.text, output.stop_reason, calls)
        if not calls:
            break
        if number == settings.max_turns - 1:
            builder.not_run(calls)
            break
        crops = []
        for call in calls:
            region, record = builder.resolve(call)
            if region is None:
                state.messages.append(ChatMessageTool(content=tool_error_message(record["error"]),
                                                      tool_call_id=call.call_id, function=ZOOM_TOOL.name))
                continue
            png = crop_png(rgb, region)
            builder.cropped(record, region, sha256_bytes(png))
            state.messages.append(ChatMessageTool(content=TOOL_ANSWER_TEXT, tool_call_id=call.call_id,
                                                  function=ZOOM_TOOL.name))
            crops.append(ContentImage(image=data_uri(png)))
        if crops:
            state.messages.append(ChatMessageUser(content=crops))
    trace = builder.finish(layout["options"])
    failed = output is None or bool(output.error)
    return [{"probe": "trace", "prompt": row["prompt"], "response": None if failed else trace["turns"][-1]["text"],
             "error": output.error if output is not None and output.error else None,
             "finish_reason": output.stop_reason if output is not None else None, **tokens,
             "meta": {"trace": trace, "images_sha256": builder.images_sha256, "calls": calls_made,
                      "images": shown_in_trace(trace, original)}}]
