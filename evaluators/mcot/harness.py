"""MCoT's part for the harness exporters (evaluators/harness/spec.py).

Per item one probe group of kind `tool`, probe `trace`: the model's own zoom-in trace as
`mmfaith run mcot --tool-protocol functions` asks it (the system prompt describing the tool, then the
image and the question; the tool declared by function calling; at most `max_turns` model calls);
the task arguments `-T max_turns=N` and `-T protocol=tags` change the turn limit and the protocol.
Only inspect_ai renders it (`inspect_loop.zoom_trace`); lmms-eval's rounds are fresh single
messages, so `mmfaith export lmms-eval` refuses MCoT in one line.

The replays (replay_none, replay_text, replay_visual) are not harness rounds: they rebuild the
trace's conversation and continue its last assistant message, which needs the server's
`continue_final_message` (vLLM). After `mmfaith import inspect`, `mmfaith run mcot --traces
predictions.jsonl --tool-protocol functions` replays the imported traces (not run again) against an
OpenAI-compatible server; `after_import` prints that command.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmfaith.evaluators.harness.spec import ProbeGroup, Round
from mmfaith.evaluators.mcot.agent import AgentSettings, first_turns
from mmfaith.evaluators.mcot.protocol import prompts_hash
from mmfaith.loaders.mcot.dataset import McotItem

PROTOCOL = "functions"
"""The export's default: the tool declared by function calling; `-T protocol=tags` runs the text-tag
protocol instead (DeepEyes, Pixel-Reasoner: the system prompt describes `<tool_call>`)."""


class McotHarness:
    """MCoT's probe group and its first round (module docstring)."""

    templates_sha256 = prompts_hash()
    inspect_tool_loop = "mmfaith.evaluators.mcot.inspect_loop:zoom_trace"

    def __init__(self, coords: str = "resized", max_turns: int = 6) -> None:
        self.agent = AgentSettings(protocol=PROTOCOL, coords=coords, max_turns=max_turns)
        self.settings = {"protocol": PROTOCOL, "coords": coords, "max_turns": max_turns}
        self.task_arguments = {"max_turns": max_turns, "protocol": PROTOCOL}

    def groups(self, item: McotItem) -> list[ProbeGroup]:
        system, user = first_turns(item, self.agent)
        state = {"system": system.content[0], "question": user.content[1], "coords": self.agent.coords,
                 "image_size": list(item.size), "options": item.record["options"]}
        return [ProbeGroup("tool", ("trace",), (item.image,), state)]

    def round(self, probe: str, state: dict[str, Any], earlier: Sequence[str | None]) -> Round:
        return Round(state["question"], {}, system=state["system"])

    def after_import(self, predictions: Path, dataset: str) -> str:
        """The replays of the imported traces (module docstring), with the protocol they were asked with."""
        from mmfaith.jsonl import read_jsonl

        traces = (line["meta"]["trace"] for _, line in read_jsonl(predictions) if line["response"] is not None)
        asked = next(traces, {"protocol": PROTOCOL, "coords": self.agent.coords})
        return (f"then replay the traces: mmfaith run mcot --dataset {dataset} --traces {predictions} "
                f"--tool-protocol {asked['protocol']} --coords {asked['coords']} --model MODEL --base-url URL "
                "--out RUN_DIR")


def harness() -> McotHarness:
    """The part `FamilyParts.harness` names: `mmfaith run mcot`'s defaults, with function calling."""
    return McotHarness()
