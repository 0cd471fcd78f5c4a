"""MCoT's code for the family registry (mmfaith/families.py declares the family itself)."""
from __future__ import annotations

from mmfaith.builders.mcot import cli as build_cli
from mmfaith.evaluators.mcot import cli as evaluator_cli
from mmfaith.families import FamilyParts, lazy


def parts() -> FamilyParts:
    """MCoT's builder, loader, probe plan, scorer, reference models, labeling, release and harness part."""
    return FamilyParts(
        add_build_options=build_cli.add_build_options,
        build=build_cli.run_build,
        open_dataset=evaluator_cli.open_dataset,
        add_run_options=evaluator_cli.add_run_options,
        probe_plan=evaluator_cli.probe_plan,
        add_score_options=evaluator_cli.add_score_options,
        score=evaluator_cli.score,
        reference_model=evaluator_cli.reference_model,
        release=lazy("mmfaith.release.mcot:release_mcot"),
        labeling=lazy("mmfaith.annotation.mcot.tasks:family"),
        compare=lazy("mmfaith.evaluators.mcot.report:compare_scores"),
        verify=lazy("mmfaith.release.mcot:verify_mcot_release"),
        harness=lazy("mmfaith.evaluators.mcot.harness:harness"),
        explore=lazy("mmfaith.evaluators.mcot.explore:item_views"),
    )
