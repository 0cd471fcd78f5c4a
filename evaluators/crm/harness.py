"""CRM's part for the harness exporters (evaluators/harness/spec.py).

As `mmfaith run crm` asks them with its defaults (evaluators/crm/run.py): per item and per image
shown (the original, then each variant "{mode}-{style}", then the original re-sampled: the noise
floor), one dependent group of two rounds,
`{image}_cot` (the image and the question, at temperature 0.2) then `{image}_answer` (the final
answer prompt at temperature 0, in the same conversation after the model's own steps: the round
`continues`), not asked when the chain of thought failed. The texts are CRM's own
(prompts.cot_prompt / answer_prompt), rendered at export time into the group's state, so the
harness sends the words `mmfaith run` sends. The prediction lines' meta is the run's: the image
shown and the round's temperature.

Only inspect can send a continued conversation with a temperature per round; `mmfaith export
lmms-eval` refuses CRM (its agentic rounds are fresh single messages at one temperature).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mmfaith.evaluators.crm.prompts import TEMPLATES_SHA256, answer_prompt, cot_prompt, probe_names
from mmfaith.evaluators.crm.run import COT_FAILED, asked
from mmfaith.evaluators.harness.spec import ProbeGroup, Round
from mmfaith.loaders.crm import CrmItem


class CrmHarness:
    """CRM's probe groups and rounds (module docstring)."""

    templates_sha256 = TEMPLATES_SHA256

    def __init__(self, cot_temperature: float = 0.2, answer_temperature: float = 0.0) -> None:
        self.settings = {"cot_temperature": cot_temperature, "answer_temperature": answer_temperature}

    def groups(self, item: CrmItem) -> list[ProbeGroup]:
        state = {"cot": cot_prompt(item.record), "answer": answer_prompt(item.record)}
        return [ProbeGroup("dependent", probe_names(name), (image,), {**state, "image": name})
                for name, image in asked(item)]

    def round(self, probe: str, state: dict[str, Any], earlier: Sequence[str | None]) -> Round:
        cot_probe, _ = probe_names(state["image"])
        if probe == cot_probe:
            temperature = self.settings["cot_temperature"]
            return Round(state["cot"], {"image": state["image"], "temperature": temperature}, temperature)
        temperature = self.settings["answer_temperature"]
        meta = {"image": state["image"], "temperature": temperature}
        if not earlier or earlier[0] is None:
            return Round(None, meta, temperature, not_asked=COT_FAILED)
        return Round(state["answer"], meta, temperature, continues=True)


def harness() -> CrmHarness:
    """The part `FamilyParts.harness` names: `mmfaith run crm`'s defaults."""
    return CrmHarness()
