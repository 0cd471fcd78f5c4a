"""The zoom-in tool as the model sees it, in both protocols, and what a reply says.

Contract (docs/mcot.md#the-agent-loop)
--------------------------------------
- `tags` (DeepEyes / Pixel-Reasoner): the system prompt describes the tool; the model writes
  `<tool_call>{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [x1, y1, x2, y2], "label": ...,
  "target_image": 1}}</tool_call>`; the crop comes back in a user turn
  `<tool_response>` + image + `</tool_response>`.
- `functions` (OpenAI function calling): the request carries `tools=[TOOL]`, the reply
  `tool_calls`; each gets a `tool` message "crop attached" (the tool role carries text only) and
  the crops follow in one user turn.
- The final answer is the last `\\boxed{...}` or `<answer>...</answer>` (any case) of a reply
  without a tool call; `answer_letter` reads a reply's option label with the shared reader
  (evaluators/answers.py, docs/answers.md), so a corrected answer wins and two options are none.
Prompts are fixed and versioned (`PROMPT_VERSION`); their hash goes into run.json.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from mmfaith.evaluators.answers import last_tag, read_choice
from mmfaith.jsonl import canonical_json

PROMPT_VERSION = "mcot-agent/1"
TOOL_NAME = "image_zoom_in_tool"
PROTOCOLS = ("tags", "functions")
# How a replay asks for the final answer: the last assistant message continued, or a final user turn.
CONTINUATIONS = ("continue", "user-turn")
TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
ANSWER_START = re.compile(r"<answer>|\\boxed\{", re.IGNORECASE)
COORD_WORDS = {
    "pixels": "pixel coordinates of that image as you see it",
    "normalized": "coordinates normalized to 0-1000 on both axes of that image",
    "resized": "pixel coordinates of that image as resized to the grid size stated with the question",
}
TOOL = {"type": "function", "function": {
    "name": TOOL_NAME,
    "description": "Zoom in on a region of an image: returns the crop of that region as a new image.",
    "parameters": {"type": "object", "required": ["bbox_2d"], "properties": {
        "bbox_2d": {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4,
                    "description": "[x1, y1, x2, y2] of the region"},
        "label": {"type": "string", "description": "what the region shows"},
        "target_image": {"type": "integer", "description": "which image to crop: 1 the original, 2 the first crop, ..."},
    }}}}
FINAL_ANSWER_REQUEST = "Based on the reasoning above, give only your final answer as \\boxed{LETTER}."
TOOL_ANSWER_TEXT = "crop attached"


def system_prompt(protocol: str, coords: str) -> str:
    """The system prompt of one protocol and coordinate convention (the grid size is filled per image)."""
    where = COORD_WORDS[coords]
    common = ("Answer the question about the image. You may zoom in on regions of the image with the tool "
              f"{TOOL_NAME}: bbox_2d is [x1, y1, x2, y2] in {where}; target_image is 1 for the original image "
              "(default), 2 for the first crop, and so on. Think step by step, zoom where the details are small, "
              "and end with the final answer as <answer>LETTER</answer>.")
    if protocol == "tags":
        return common + (" To call the tool, write <tool_call>{\"name\": \"" + TOOL_NAME + "\", \"arguments\": "
                         "{\"bbox_2d\": [x1, y1, x2, y2], \"label\": \"...\"}}</tool_call> and stop; the crop comes "
                         "back as a new image.")
    return common + " Call the tool through function calling."


def question_text(question: str, options: list[dict[str, str]], grid: tuple[float, float] | None) -> str:
    """The first user turn's text: the question, the options, and (coords resized) the grid size."""
    lines = [question, *(f"({option['label']}) {option['text']}" for option in options)]
    if grid is not None:
        lines.append(f"(The image is shown at {int(grid[0])}x{int(grid[1])}.)")
    return "\n".join(lines)


def prompts_hash() -> str:
    """sha256 of every fixed text the agent loop sends (both protocols, all conventions)."""
    texts = {f"{p}/{c}": system_prompt(p, c) for p in PROTOCOLS for c in COORD_WORDS}
    texts.update(tool=canonical_json(TOOL), final=FINAL_ANSWER_REQUEST, tool_answer=TOOL_ANSWER_TEXT)
    return hashlib.sha256(canonical_json(texts).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model wrote it: `arguments` parsed, or `error` saying why it cannot be used."""

    call_id: str | None
    raw: str
    arguments: dict[str, Any] | None
    error: str | None


def tag_tool_calls(text: str) -> list[ToolCall]:
    """Every `<tool_call>...</tool_call>` of a reply, in order (an unclosed tag is malformed)."""
    calls = [_parse_call(None, match.group(1).strip()) for match in TOOL_CALL.finditer(text)]
    opened, closed = text.count("<tool_call>"), text.count("</tool_call>")
    if opened > closed:
        tail = text[text.rfind("<tool_call>") + len("<tool_call>"):]
        calls.append(ToolCall(None, tail.strip(), None, "the <tool_call> tag is not closed with </tool_call>"))
    return calls


def function_tool_calls(tool_calls: list[dict[str, Any]]) -> list[ToolCall]:
    """The OpenAI `tool_calls` of a reply as `ToolCall`s."""
    calls = []
    for call in tool_calls:
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = function.get("name")
        raw = function.get("arguments")
        raw_text = raw if isinstance(raw, str) else canonical_json(raw)
        if name != TOOL_NAME:
            calls.append(ToolCall(call.get("id"), raw_text, None, f"unknown tool {name!r}; the tool is {TOOL_NAME}"))
            continue
        calls.append(_arguments(call.get("id"), raw_text, raw if isinstance(raw, dict) else None))
    return calls


def _parse_call(call_id: str | None, raw: str) -> ToolCall:
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        return ToolCall(call_id, raw, None, f"the tool call is not valid JSON ({exc.msg})")
    if not isinstance(document, dict) or document.get("name") != TOOL_NAME:
        return ToolCall(call_id, raw, None, f"the tool call must name {TOOL_NAME!r}")
    arguments = document.get("arguments")
    if isinstance(arguments, str):
        return _arguments(call_id, raw, None, arguments)
    return _arguments(call_id, raw, arguments if isinstance(arguments, dict) else {})


def _arguments(call_id: str | None, raw: str, parsed: dict[str, Any] | None, text: str | None = None) -> ToolCall:
    if parsed is None:
        try:
            parsed = json.loads(text if text is not None else raw)
        except json.JSONDecodeError as exc:
            return ToolCall(call_id, raw, None, f"the tool call's arguments are not valid JSON ({exc.msg})")
    if not isinstance(parsed, dict) or "bbox_2d" not in parsed:
        return ToolCall(call_id, raw, None, "the tool call has no bbox_2d argument")
    return ToolCall(call_id, raw, parsed, None)


def final_answer(text: str) -> str | None:
    """The content of the last answer tag (`<answer>` or `\\boxed{}`), None when there is none."""
    return last_tag(text)


def cut_at_answer(text: str) -> str:
    """The text before the first answer tag: what a replay shows of the turn that answered."""
    match = ANSWER_START.search(text)
    return text if match is None else text[:match.start()]


def answer_letter(reply: str | None, options: list[dict[str, str]]) -> str | None:
    """A reply's option label (evaluators/answers.read_choice); None when it picks none. With no options
    (a free-form item) the last answer tag's text."""
    if not options:
        return final_answer(reply or "") or None
    return read_choice(reply, options)
