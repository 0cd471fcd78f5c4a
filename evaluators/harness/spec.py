"""What a family declares so that other harnesses can ask its probes (`FamilyParts.harness`).

Contract
--------
A family's `HarnessPart` cuts each item into `ProbeGroup`s, each one chain of requests a harness
sends as a unit:

- `independent`: one probe, one request (SPD-Faith's same / different, VFaith's original /
  edited / perception, CRM's variants). lmms-eval: `generate_until`; inspect: one `generate()`.
- `dependent`: several probes in rounds, each round a fresh single-message request whose text may
  use the earlier rounds' answers (SPD-Faith's count, then describe with the model's own count;
  CRM's chain of thought, then the answer at temperature 0). lmms-eval: `generate_until_agentic`;
  inspect: one `generate()` per round, the answers kept in the sample's store.
- `tool`: a tool loop (MCoT's zoom-in trace). inspect only: the family names the inspect_ai code
  that runs the loop (`HarnessPart.inspect_tool_loop`, "module:function"); lmms-eval's agentic
  rounds are fresh single messages that cannot carry the model's calls and the crops as a
  conversation, so its exporter refuses such a group with a one-line error.

`round(probe, state, earlier)` renders the text of one round (`probe`) of a group with
the family's own prompt code, from the group's `state` (JSON that travels in the exported row)
and the responses of the earlier rounds; it is what both the exported tasks (at the harness's run
time, through `runtime.py`) and the import (to recover what each round asked) call, so the bytes
the harness sends are the bytes `mmfaith run` sends. `Round.meta` is the family's part of the
prediction line's meta (SPD-Faith: order, layout, count_asked). A round whose prerequisite
failed is not asked: `round` returns `Round(text=None, ...)` with `not_asked` saying why. A round with
`continues` is sent in the conversation of the earlier rounds (inspect only: lmms-eval's agentic
rounds are fresh single messages, so its exporter refuses such a group). A first round with a
`system` text is sent after that system message (MCoT's tool description).

A family may also declare `task_arguments` (inspect task arguments with their defaults, passed to
its tool loop: MCoT's `max_turns`). In a `tool` group the rounds after the first are requests the
family's loop builds itself (MCoT's replays): `round` returns a text naming them (or `not_asked`),
and the loop records no prompt for them, so the import checks none.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mmfaith.images import ImageRef

KINDS = ("independent", "dependent", "tool")
RENDERED_KINDS = {"lmms-eval": ("independent", "dependent"), "inspect": KINDS}
"""The kinds each harness's export renders (module docstring)."""


@dataclass(frozen=True)
class ProbeGroup:
    """One chain of requests of an item: its kind, its probes in round order, the stored images every
    round shows (in order) and the JSON state its rounds are rendered from."""

    kind: str
    probes: tuple[str, ...]
    images: tuple[ImageRef, ...]
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Round:
    """One round's request text (None: not asked, `not_asked` says why), its temperature (None: the
    harness's), the family's meta for its prediction line and whether it continues the conversation."""

    text: str | None
    meta: dict[str, Any]
    temperature: float | None = None
    not_asked: str | None = None
    continues: bool = False
    """True: asked in the same conversation as the earlier rounds (their prompts as user turns, the model's
    answers as assistant turns, then this text; CRM's final answer), not as a fresh single message."""
    system: str | None = None
    """The system message sent before a first round (None: none)."""


class HarnessPart(Protocol):
    """A family's declaration for the harness exporters (see the module docstring)."""

    templates_sha256: str
    """The hash of the prompt templates the rounds are rendered with (recorded in every export)."""

    settings: dict[str, Any]
    """How the export shows the items (SPD-Faith: layout, order, seed): `mmfaith run`'s defaults."""

    def groups(self, item: Any) -> list[ProbeGroup]:
        """The item's probe groups; together they cover every probe the item expects, once each."""

    def round(self, probe: str, state: dict[str, Any], earlier: Sequence[str | None]) -> Round:
        """The round asking `probe` in a group, given the responses of its earlier rounds (None: failed)."""


def task_suffix(group: ProbeGroup) -> str:
    """The sub-task a group belongs to: its probes joined by `_` (`same`, `count_describe`)."""
    return "_".join(probe.replace("-", "_") for probe in group.probes)


def family_task(family: str) -> str:
    """The group task / task name of a family in the harnesses: mmfaith_<family> (mmfaith_spd_faith)."""
    return "mmfaith_" + family.replace("-", "_")
