"""The inspect_ai side of `mmfaith export inspect`: dataset, samples and solvers (imports inspect_ai).

The task file an export writes (`DIR/mmfaith_<family>.py`) calls `mmfaith_task`, so it runs
wherever inspect_ai and mmfaith are installed. Contract:

- Dataset: `hf_dataset("parquet", data_files=...)` over the export's rows (evaluators/harness/
  rows.py); a sample per row, id = the row key (`{"id", "probes"}`), one user message holding the
  stored image bytes as data URIs (the bytes the model gets are the build's) then the prompt text,
  after a system message where the family's first round has one (MCoT).
- Solver (`probe_solver`), by the row's kind: `independent` -> one `generate()`; `dependent` ->
  one `generate()` per round, each later round a fresh single-message request whose text the
  family renders from the earlier answers (runtime.round_of; SPD-Faith: describe with the model's
  own count); a round that `continues` is appended to the conversation instead (CRM: the final
  answer after the model's own steps), and a round's own temperature is passed to its `generate()`
  (CRM: 0.2 for the steps, 0 for the answer). Every round's probe, prompt, response, error, stop
  reason and usage are kept in the sample's store under `mmfaith_rounds` (what `mmfaith import
  inspect` reads). `tool` -> the family's own loop (`HarnessPart.inspect_tool_loop`, MCoT's zoom-in
  trace: evaluators/mcot/inspect_loop.py), given the task's family arguments (`-T max_turns=N`);
  its rounds, with the family's meta (the trace), go to the same store key.
- No scorer: the metrics are `mmfaith score`'s, after `mmfaith import inspect`.
"""
from __future__ import annotations

from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import Sample, hf_dataset
from inspect_ai.model import (ChatMessage, ChatMessageSystem, ChatMessageUser, ContentImage, ContentText,
                              GenerateConfig, ModelOutput)
from inspect_ai.solver import Generate, Solver, TaskState, solver

from mmfaith.evaluators.harness import runtime
from mmfaith.families import lazy
from mmfaith.images import data_url

ROW_FIELDS = ("id", "family", "task", "kind", "probes", "state", "prompt", "image_sha256")
STORE_KEY = runtime.RECORD_KEY


def record_to_sample(record: dict[str, Any]) -> Sample:
    """One exported row as a sample (module docstring)."""
    images = [ContentImage(image=data_url(record[f"image_{number}"]))
              for number in range(1, len(record["image_sha256"]) + 1)]
    system = runtime.round_of(record, 0, []).system
    messages: list[ChatMessage] = [] if system is None else [ChatMessageSystem(content=system)]
    messages.append(ChatMessageUser(content=[*images, ContentText(text=record["prompt"])]))
    return Sample(id=record["key"], input=messages, metadata={name: record[name] for name in ROW_FIELDS})


def _round_entry(probe: str, prompt: str | None, output: ModelOutput | None, error: str | None) -> dict[str, Any]:
    usage = output.usage if output is not None else None
    response = output.completion if output is not None and not output.error else None
    return {"probe": probe, "prompt": prompt, "response": response,
            "error": error or (output.error if output is not None else None),
            "finish_reason": output.stop_reason if output is not None else None,
            "prompt_tokens": usage.input_tokens if usage else None,
            "completion_tokens": usage.output_tokens if usage else None}


@solver
def probe_solver(family_arguments: dict[str, Any] | None = None) -> Solver:
    """Ask a row's probes by its kind (module docstring)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        row = state.metadata
        runtime.require_kind(row["kind"], row["task"], "inspect")
        if row["kind"] == "tool":
            loop = lazy(runtime.harness_part(row["family"]).inspect_tool_loop)
            state.store.set(STORE_KEY, await loop(state, row, family_arguments or {}))
            return state
        images = [part for part in state.messages[-1].content if isinstance(part, ContentImage)]
        rounds: list[dict[str, Any]] = []
        earlier: list[str | None] = []
        for index, probe in enumerate(row["probes"]):
            asked = runtime.round_of(row, index, earlier)
            if asked.text is None:
                rounds.append(_round_entry(probe, None, None, asked.not_asked))
                earlier.append(None)
                continue
            text = asked.text  # the first round's is the sample's message (row["prompt"])
            config = {} if asked.temperature is None else {"temperature": asked.temperature}
            if index and asked.continues:  # after the earlier rounds' turns, the model's answers included
                state.messages.append(ChatMessageUser(content=text))
            elif index:
                state.messages = [ChatMessageUser(content=[*images, ContentText(text=text)])]
            state = await generate(state, **config)
            rounds.append(_round_entry(probe, text, state.output, None))
            earlier.append(rounds[-1]["response"])
            state.store.set(STORE_KEY, rounds)
        return state

    return solve


def mmfaith_task(name: str, data_files: list[str], export: dict[str, Any], max_tokens: int = 1024,
                 temperature: float = 0.0, **family_arguments: Any) -> Task:
    """The task an export's file defines: its rows, `probe_solver` (given the family's task arguments, e.g.
    MCoT's max_turns), `mmfaith run`'s generation defaults."""
    # cached=False: inspect keys its dataset cache by path and arguments only, so a folder exported
    # again from another dataset would be read back stale
    dataset = hf_dataset("parquet", split="train", data_files=data_files, sample_fields=record_to_sample, cached=False)
    return Task(dataset=dataset, solver=probe_solver(family_arguments), name=name, metadata={"mmfaith_export": export},
                config=GenerateConfig(max_tokens=max_tokens, temperature=temperature))
