"""VFaith's part for the harness exporters (evaluators/harness/spec.py).

As `mmfaith run vfaith` asks them (evaluators/vfaith/run.py): a pair gives two independent probe
groups, `original` (the question with the original image) and `edited` (the same text with the
edited image); a perception item gives one, `perception` (its statements with its one, edited,
image). One image per request, zero-shot; the text is `run.probe_text`, VFaith's own templates
(prompts.py), so the harness sends the bytes `mmfaith run` sends. The text travels in the group's
state (it is the same for both probes of a pair); the prediction lines carry no family meta.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmfaith.evaluators.harness.spec import ProbeGroup, Round
from mmfaith.evaluators.vfaith.prompts import TEMPLATES_SHA256
from mmfaith.evaluators.vfaith.run import probe_images, probe_text
from mmfaith.loaders.vfaith.dataset import VfaithItem


class VfaithHarness:
    """VFaith's probe groups and rounds (module docstring)."""

    templates_sha256 = TEMPLATES_SHA256

    def __init__(self) -> None:
        self.settings: dict[str, Any] = {}  # `mmfaith run vfaith` has no options of its own

    def groups(self, item: VfaithItem) -> list[ProbeGroup]:
        text = probe_text(item)
        return [ProbeGroup("independent", (probe,), (image,), {"text": text})
                for probe, image in probe_images(item).items()]

    def round(self, probe: str, state: dict[str, Any], earlier: Sequence[str | None]) -> Round:
        return Round(state["text"], {})


def harness() -> VfaithHarness:
    """The part `FamilyParts.harness` names."""
    return VfaithHarness()
