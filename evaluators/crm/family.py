"""CRM's code for the family registry (mmfaith/families.py declares the family itself).

Only light modules are imported here: each part imports its stage's code when it is called.
"""
from __future__ import annotations

from mmfaith.builders.crm import cli as build_cli
from mmfaith.evaluators.crm import cli as evaluator_cli
from mmfaith.families import FamilyParts, lazy


def parts() -> FamilyParts:
    """CRM's builder, loader, probe plan, scorer, reference models and harness part."""
    return FamilyParts(
        add_build_options=build_cli.add_build_options,
        build=build_cli.run_build,
        open_dataset=evaluator_cli.open_dataset,
        add_run_options=evaluator_cli.add_run_options,
        probe_plan=evaluator_cli.probe_plan,
        add_score_options=evaluator_cli.add_score_options,
        score=evaluator_cli.score,
        reference_model=evaluator_cli.reference_model,
        release=lazy("mmfaith.builders.crm.release:release_crm"),
        labeling=lazy("mmfaith.annotation.crm.tasks:family"),
        verify=lazy("mmfaith.loaders.crm.rows:verify_crm_release"),
        compare=evaluator_cli.compare,
        harness=lazy("mmfaith.evaluators.crm.harness:harness"),
        explore=lazy("mmfaith.evaluators.crm.explore:item_views"),
    )
