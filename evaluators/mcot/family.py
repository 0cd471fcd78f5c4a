"""MCoT's code for the family registry (mmfaith/families.py declares the family itself)."""
from __future__ import annotations

from typing import Any

from mmfaith.builders.mcot import cli as build_cli
from mmfaith.evaluators.mcot import cli as evaluator_cli
from mmfaith.families import FamilyParts, lazy


def parts() -> FamilyParts:
    """MCoT's builder, loader, probe plan, scorer, reference models, labeling and release; its harness
    part is a refusal (`_harness`)."""
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
        harness=_harness,
    )


HARNESS_REFUSED = ("mcot: the zoom-in tool loop (the trace, then its replays) is not exported to lmms-eval or inspect_ai "
                   "yet (docs/harnesses.md#mcot); run it with `mmfaith run mcot` against an OpenAI-compatible server.")


def _harness() -> Any:
    """MCoT is not exported to the harnesses: `mmfaith export` and `mmfaith import` stop with HARNESS_REFUSED."""
    from mmfaith.errors import MmfaithError

    raise MmfaithError(HARNESS_REFUSED)
