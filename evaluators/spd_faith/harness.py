"""SPD-Faith's part for the harness exporters (evaluators/harness/spec.py).

Per pair, as `mmfaith run spd-faith` asks it with its defaults (two separate images, original
first): `same` and `different` are independent; `count` then `describe` is dependent: describe is
rendered with the count parsed from the model's own count answer (`answers.read_count`, the open
describe prompt when none is readable), and is not asked when the count call failed. The prompt
text comes from `prompts.prompt_text`, so the harness sends the bytes `mmfaith run` sends.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmfaith.evaluators.harness.spec import ProbeGroup, Round
from mmfaith.evaluators.answers import read_count
from mmfaith.evaluators.spd_faith.prompts import TEMPLATES_SHA256, prompt_text
from mmfaith.evaluators.spd_faith.run import pair_order, shown_images
from mmfaith.loaders.spd_faith import SpdPair

COUNT_FAILED = ("not asked: this pair's count probe failed and describe is asked with the model's own count; "
                "re-run to retry")


class SpdHarness:
    """SPD-Faith's probe groups and rounds (module docstring)."""

    templates_sha256 = TEMPLATES_SHA256

    def __init__(self, layout: str = "separate", order: str = "original-first", seed: int = 0) -> None:
        if layout != "separate":
            raise ValueError("the harness exports show the two stored images; the side-by-side canvas is "
                             "`mmfaith run --pair-layout side-by-side` only")
        self.settings = {"layout": layout, "order": order, "seed": seed}

    def groups(self, pair: SpdPair) -> list[ProbeGroup]:
        order = pair_order(self.settings["order"], self.settings["seed"], pair.id)
        images = shown_images(pair, order)
        state = {"order": order, "layout": self.settings["layout"]}
        return [ProbeGroup("independent", ("same",), images, state),
                ProbeGroup("independent", ("different",), images, state),
                ProbeGroup("dependent", ("count", "describe"), images, state)]

    def round(self, probe: str, state: dict[str, Any], earlier: Sequence[str | None]) -> Round:
        meta = {"order": state["order"], "layout": state["layout"], "count_asked": None}
        if probe != "describe":
            return Round(prompt_text(probe, state["layout"]), meta)
        if not earlier or earlier[0] is None:
            return Round(None, meta, not_asked=COUNT_FAILED)
        count = read_count(earlier[0])
        return Round(prompt_text("describe", state["layout"], count), {**meta, "count_asked": count})


def harness() -> SpdHarness:
    """The part `FamilyParts.harness` names: `mmfaith run spd-faith`'s defaults."""
    return SpdHarness()
