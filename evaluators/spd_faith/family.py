"""SPD-Faith's code for the family registry (mmfaith/families.py declares the family itself).

Only light modules are imported here: each part imports its stage's code when it is called.
"""
from __future__ import annotations

from mmfaith.builders.spd_faith import cli as build_cli
from mmfaith.families import FamilyParts


def parts() -> FamilyParts:
    """SPD-Faith's builder, loader, probe plan, scorer, reference models and labeling."""
    from mmfaith.annotation.spd_faith.tasks import family as labeling
    from mmfaith.evaluators.spd_faith import family_hooks as hooks

    return FamilyParts(
        add_build_options=build_cli.add_build_options, build=build_cli.run_build,
        open_dataset=hooks.open_dataset, add_run_options=hooks.add_run_options, probe_plan=hooks.probe_plan,
        add_score_options=hooks.add_score_options, score=hooks.score, reference_model=hooks.reference_model,
        labeling=labeling)
