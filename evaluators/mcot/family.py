"""MCoT's code for the family registry (mmfaith/families.py declares the family itself)."""
from __future__ import annotations

from typing import Any

from mmfaith.builders.mcot import cli as build_cli
from mmfaith.evaluators.mcot import cli as evaluator_cli
from mmfaith.families import FamilyParts


def parts() -> FamilyParts:
    """MCoT's builder, loader, probe plan, scorer, reference models, labeling and release; its harness
    part is a refusal (`_harness`)."""
    return FamilyParts(
        add_build_options=build_cli.add_build_options, build=build_cli.run_build,
        open_dataset=evaluator_cli.open_dataset, add_run_options=evaluator_cli.add_run_options,
        probe_plan=evaluator_cli.probe_plan, add_score_options=evaluator_cli.add_score_options,
        score=evaluator_cli.score, reference_model=evaluator_cli.reference_model, release=_release,
        labeling=_labeling, compare=_compare, verify=_verify, harness=_harness)


def _release(request: Any) -> Any:
    from mmfaith.release.mcot import release_mcot

    return release_mcot(request)



def _labeling() -> Any:
    from mmfaith.annotation.mcot.tasks import family

    return family()


def _compare(score_dirs: Any, out: Any, n_bootstrap: int, seed: int, all_pairs: bool) -> Any:
    from mmfaith.evaluators.mcot.report import compare_scores

    return compare_scores(score_dirs, out, n_bootstrap, seed, all_pairs)


def _verify(release_dir: Any) -> Any:
    from mmfaith.release.mcot import verify_mcot_release

    return verify_mcot_release(release_dir)


HARNESS_REFUSED = ("mcot: the zoom-in tool loop (the trace, then its replays) is not exported to lmms-eval or inspect_ai "
                   "yet (docs/harnesses.md#mcot); run it with `mmfaith run mcot` against an OpenAI-compatible server.")


def _harness() -> Any:
    """MCoT is not exported to the harnesses: `mmfaith export` and `mmfaith import` stop with HARNESS_REFUSED."""
    from mmfaith.errors import MmfaithError

    raise MmfaithError(HARNESS_REFUSED)
