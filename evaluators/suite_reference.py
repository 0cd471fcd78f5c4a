"""One reference role across every family of a suite, for `mmfaith serve-reference --suite SUITE --model ROLE`.

Contract
--------
`suite_reference_model(suite, role)` is a `run_engine.ReferenceModel` named ROLE that answers the
probes of every family of the suite whose reference models include the role: `oracle` is each
family's good end (`Family.ceiling`: SPD-Faith's and VFaith's oracle, CRM's grounded, MCoT's
zoom-oracle), `prior` each family's prior, any other name the families' own model of that name
(`blind`: SPD-Faith and MCoT). A request goes to each family's model in the suite's order until one
resolves it (each resolves only its own dataset's probes, by images and text); a request none
resolves is refused with every family's reason. An error names the families when none has the role.

A request without images (`run --no-image`, the suite's no-image pass) that a family's model of the
role cannot resolve (it finds its item by the images) is answered by that family's `prior`: without
the image, what the question's text alone allows is all any role can know. So the oracle's
multimodal gain is the distance from the prior to the ceiling, and the prior's is 0.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mmfaith import families
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.reference_server import RequestRefused
from mmfaith.evaluators.run_engine import ReferenceModel
from mmfaith.suite import Suite, suite_dataset

ORACLE = "oracle"
PRIOR = "prior"


def role_model(family: families.Family, role: str) -> str | None:
    """The family's reference model playing `role`, None when it has none."""
    name = family.ceiling if role == ORACLE else role
    return name if name in {known for known, _ in family.reference_models} else None


def suite_roles(suite: Suite) -> list[str]:
    """Every role some family of the suite plays: oracle first, then the models' own names."""
    names = {name for family in map(families.get, suite.families()) for name, _ in family.reference_models}
    return [ORACLE, *sorted(names - {families.get(f).ceiling for f in suite.families()} - {ORACLE})]


@dataclass
class SuiteReferenceModel:
    """The role's model of each family, tried in turn (module docstring)."""

    name: str
    models: list[tuple[str, ReferenceModel]]
    blind: dict[str, ReferenceModel] = field(default_factory=dict)
    """Each family's prior, answering the requests without images its role's model cannot resolve."""

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str | dict[str, Any]:
        reasons = []
        for family, model in self.models:
            for tried in (model, *([self.blind[family]] if not images and family in self.blind else [])):
                try:
                    return tried.answer(text, images, body)
                except RequestRefused as refused:
                    reasons.append(f"{family}: {refused}")
        raise RequestRefused(400, "no family of the suite resolves this request (" + "; ".join(reasons) + ")")


def suite_reference_model(suite: Suite, role: str, progress: bool = True) -> SuiteReferenceModel:
    """The role's model over every family of the suite that has it (module docstring)."""
    models, blind = [], {}
    for name in suite.families():
        family = families.get(name)
        model = role_model(family, role)
        if model is not None:
            parts = family.parts()
            dataset = parts.open_dataset(suite_dataset(suite, name, progress))
            models.append((name, parts.reference_model(model, dataset)))
            if model != PRIOR and role_model(family, PRIOR) is not None:
                blind[name] = parts.reference_model(PRIOR, dataset)
    if not models:
        raise MmfaithError(f"--model {role}: no family of suite {suite.name} has that reference model; roles: "
                           f"{', '.join(suite_roles(suite))}.")
    return SuiteReferenceModel(role, models, blind)
