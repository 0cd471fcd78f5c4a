"""What an exported task calls at the harness's run time, and what the import reads back.

Kept light (the family's prompt and parsing code, no I/O): the lmms-eval `utils.py` and the
inspect task file that `mmfaith export` writes import this module in the harness's own
environment. A row of an export (`rows.py`) names its family, its probe group's kind, probes and
state; `round_of(row, index, earlier)` renders a round with the family's own code
(`HarnessPart.round`), so the harness sends the bytes `mmfaith run` sends.

A dependent group's final response (what lmms-eval logs as the sample's response) is a rounds
record: JSON `{"mmfaith_rounds": [{"probe", "prompt", "response", "error"}, ...]}` with every
round's text, a round not asked holding its reason in `error`; `rounds_record` writes it and
`read_rounds_record` reads it back (None for any other text).
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from mmfaith import families
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.spec import KINDS, RENDERED_KINDS, HarnessPart, Round

FAILURE_MARKERS = ("[LMMS_EVAL_REQUEST_FAILED", "[LMMS_EVAL_BUDGET_EXCEEDED]")
"""How lmms-eval's API models mark a call that failed instead of answering (its response text)."""
RECORD_KEY = "mmfaith_rounds"


@lru_cache(maxsize=None)
def harness_part(family: str) -> HarnessPart:
    """The registered family's harness part; a one-line error when it has none."""
    return families.get(family).part("harness", "harness export (FamilyParts.harness)")()


def round_of(row: Mapping[str, Any], index: int, earlier: Sequence[str | None]) -> Round:
    """Round `index` of an exported row's probe group, given its earlier rounds' responses."""
    return harness_part(row["family"]).round(row["probes"][index], json.loads(row["state"]), earlier)


def failure_of(text: str | None) -> str | None:
    """The harness's failure text when `text` is a failed call (None, or a failure marker), else None."""
    if text is None:
        return "no response"
    stripped = text.strip()
    return stripped if stripped.startswith(FAILURE_MARKERS) else None


def rounds_record(rounds: Sequence[Mapping[str, Any]]) -> str:
    """A dependent group's final response: every round's probe, prompt, response and error (module docstring)."""
    return json.dumps({RECORD_KEY: [dict(entry) for entry in rounds]}, ensure_ascii=False, sort_keys=True)


def read_rounds_record(text: str | None) -> list[dict[str, Any]] | None:
    """The rounds of a rounds record, None when `text` is not one."""
    if not text or not text.lstrip().startswith("{"):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    rounds = document.get(RECORD_KEY) if isinstance(document, dict) else None
    if not isinstance(rounds, list) or not all(isinstance(entry, dict) and "probe" in entry for entry in rounds):
        return None
    return rounds


def require_kind(kind: str, where: str, harness: str | None = None) -> None:
    """Refuse an unknown probe group kind, and (`harness` named) one that harness's export does not render
    (lmms-eval: the `tool` loop)."""
    if kind not in KINDS:
        raise MmfaithError(f"{where}: unknown probe group kind {kind!r} (kinds: {', '.join(KINDS)}).")
    if harness is not None and kind not in RENDERED_KINDS[harness]:
        raise MmfaithError(f"{where}: probe groups of kind {kind!r} (a tool loop: the model's calls and their results "
                           f"as one conversation) are not exported to {harness}, whose rounds are fresh single "
                           "messages; use `mmfaith export inspect` (docs/harnesses.md).")
