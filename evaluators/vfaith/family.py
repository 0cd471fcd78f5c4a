"""VFaith's code for the family registry (mmfaith/families.py declares the family itself).

Only light modules are imported here: each part imports its stage's code when it is called.
"""
from __future__ import annotations

from mmfaith.builders.vfaith import cli as build_cli
from mmfaith.evaluators.vfaith import cli as evaluator_cli
from mmfaith.families import FamilyParts, lazy


def parts() -> FamilyParts:
    """VFaith's builder, loader, probe plan, scorer, reference models, labeling, release and harness part."""
    return FamilyParts(
        add_build_options=build_cli.add_build_options,
        build=build_cli.run_build,
        open_dataset=evaluator_cli.open_dataset,
        add_run_options=evaluator_cli.add_run_options,
        probe_plan=evaluator_cli.probe_plan,
        add_score_options=evaluator_cli.add_score_options,
        score=evaluator_cli.score,
        compare=evaluator_cli.compare,
        reference_model=evaluator_cli.reference_model,
        labeling=lazy("mmfaith.annotation.vfaith.tasks:family"),
        release=lazy("mmfaith.release.vfaith:release_vfaith"),
        verify=lazy("mmfaith.release.vfaith:verify_vfaith_release"),
        harness=lazy("mmfaith.evaluators.vfaith.harness:harness"),
        explore=lazy("mmfaith.evaluators.vfaith.explore:item_views"),
    )
