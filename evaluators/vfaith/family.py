"""VFaith's code for the family registry (mmfaith/families.py declares the family itself).

Only light modules are imported here: each part imports its stage's code when it is called.
"""
from __future__ import annotations

from typing import Any

from mmfaith.builders.vfaith import cli as build_cli
from mmfaith.evaluators.vfaith import cli as evaluator_cli
from mmfaith.families import FamilyParts


def parts() -> FamilyParts:
    """VFaith's builder, loader, probe plan, scorer, reference models, labeling, release and harness part."""
    return FamilyParts(
        add_build_options=build_cli.add_build_options, build=build_cli.run_build,
        open_dataset=evaluator_cli.open_dataset, add_run_options=evaluator_cli.add_run_options,
        probe_plan=evaluator_cli.probe_plan, add_score_options=evaluator_cli.add_score_options,
        score=evaluator_cli.score, compare=evaluator_cli.compare, reference_model=evaluator_cli.reference_model,
        labeling=_labeling, release=_release, verify=_verify, harness=_harness)


def _labeling() -> Any:
    from mmfaith.annotation.vfaith.tasks import family

    return family()


def _release(request: Any) -> Any:
    from mmfaith.release.vfaith import release_vfaith

    return release_vfaith(request)


def _verify(release_dir: Any) -> Any:
    from mmfaith.release.vfaith import verify_vfaith_release

    return verify_vfaith_release(release_dir)


def _harness() -> Any:
    from mmfaith.evaluators.vfaith.harness import harness

    return harness()
