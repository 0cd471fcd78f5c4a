"""MCoT's part for the harness exporters (evaluators/harness/spec.py).

Per item one probe group of kind `tool` holding every probe `mmfaith run mcot` asks: `trace` (the
model's own zoom-in trace: the system prompt describing the tool, then the image and the question;
at most `max_turns` model calls), then `replay_none`, `replay_text` and `replay_visual` (the trace
replayed unchanged, with injected mistakes, with noise crops). Only inspect_ai renders it
(`inspect_loop.zoom_trace` runs the loop and the replays in the sample); lmms-eval's rounds are
fresh single messages, so `mmfaith export lmms-eval` refuses MCoT in one line.

The settings are `mmfaith run mcot`'s defaults with function calling (inspect declares tools that
way); the task arguments `-T max_turns=N`, `-T protocol=tags`, `-T continuation=user-turn` and
`-T seed=N` change them as the run's options do. The text injector is the offline rule injector.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmfaith.evaluators.harness.spec import ProbeGroup, Round
from mmfaith.evaluators.mcot.agent import AgentSettings, first_turns
from mmfaith.evaluators.mcot.protocol import prompts_hash
from mmfaith.evaluators.mcot.replay import PROBES, TRACE_FAILED
from mmfaith.loaders.mcot.dataset import McotItem

PROTOCOL = "functions"
"""The export's default: the tool declared by function calling; `-T protocol=tags` runs the text-tag
protocol instead (DeepEyes, Pixel-Reasoner: the system prompt describes `<tool_call>`)."""
REPLAYED = "the trace replayed (docs/mcot.md#interventions)"
"""What a replay round asks: the loop sends the rebuilt conversation, not a text of its own."""


class McotHarness:
    """MCoT's probe group and its rounds (module docstring)."""

    templates_sha256 = prompts_hash()
    inspect_tool_loop = "mmfaith.evaluators.mcot.inspect_loop:zoom_trace"

    def __init__(self, agent: AgentSettings = AgentSettings(protocol=PROTOCOL)) -> None:
        self.agent = agent
        self.settings = {"protocol": agent.protocol, "coords": agent.coords, "max_turns": agent.max_turns,
                         "continuation": agent.continuation, "seed": agent.seed, "injector": "rule"}
        self.task_arguments = {"max_turns": agent.max_turns, "protocol": agent.protocol,
                               "continuation": agent.continuation, "seed": agent.seed}

    def groups(self, item: McotItem) -> list[ProbeGroup]:
        system, user = first_turns(item, self.agent)
        state = {"system": system.content[0], "question": user.content[1], "coords": self.agent.coords,
                 "image_size": list(item.size), "options": item.record["options"]}
        return [ProbeGroup("tool", PROBES, (item.image,), state)]

    def round(self, probe: str, state: dict[str, Any], earlier: Sequence[str | None]) -> Round:
        if probe == "trace":
            return Round(state["question"], {}, system=state["system"])
        if earlier[0] is None:
            return Round(None, {}, not_asked=TRACE_FAILED)
        return Round(REPLAYED, {})


def harness() -> McotHarness:
    """The part `FamilyParts.harness` names: `mmfaith run mcot`'s defaults, with function calling."""
    return McotHarness()
