"""`mmfaith quickstart`: the whole flow offline on the embedded COCO sample, in one command.

Without --family (`quickstart_suite`): the default suite (every family) evaluated for the `oracle`
and `prior` roles of `serve-reference --suite`, two profiles and their comparison (docs/evaluate.md),
the families' builds and evaluations side by side on worker processes (mmfaith/step_pool.py).

`--family spd-faith` (`quickstart`): build a small set -> for each reference model (pixel-diff,
oracle, blind, prior): start the reference server on 127.0.0.1, run the real client against it over
HTTP, score -> one report comparing them. The oracle reads perfect, the blind model finds nothing,
pixel-diff (a perception baseline without weights) lands in between, and the prior (the question's
template alone, leave one out) shows what a blind guess earns. The prior is also run with
`--no-image`, so the report shows MMStar's multimodal gain and leakage (docs/design.md#validity).

`--family vfaith` (`quickstart_vfaith`) runs its models with `--circular` (CircularEval:
accuracy_circular beside every first-order accuracy) and the memorizer, which never looks, also with
`--no-image`: its multimodal gain reads 0. `--family crm|mcot` (`quickstart_family`): the default
suite's recipe built into OUT/build, every reference model of the family run and scored, one report.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.builders.inpainters import resolve_inpainter
from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.spd_faith.report import compare_scores
from mmfaith.evaluators.spd_faith.run import RunRequest, run_spd_faith
from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith
from mmfaith.explorer.sources import write_profiles_explorer, write_report_explorer, write_score_explorer
from mmfaith.loaders.spd_faith.dataset import open_spd_dataset
from mmfaith.outdir import prepare_out_dir
from mmfaith.step_pool import Step, available_cores, run_steps

REFERENCE_MODELS = ("pixel-diff", "oracle", "blind", "prior")


@dataclass
class QuickstartRequest:
    out: Path
    per_tier: int = 2
    multi: int = 4
    controls: int = 2
    seed: int = 0
    workers: int = 1
    progress: bool = True


def quickstart(request: QuickstartRequest) -> Path:
    """Run the flow into request.out (build/, runs/MODEL/, scores/MODEL/, report/); returns the report dir."""
    build_dir = request.out / "build"
    build_spd_faith(BuildRequest(out=build_dir, per_tier=request.per_tier, multi=request.multi,
                                 controls=request.controls, seed=request.seed, workers=request.workers,
                                 inpainter=resolve_inpainter("auto", None), progress=request.progress))
    dataset = open_spd_dataset(build_dir)
    score_dirs = []
    for model in REFERENCE_MODELS:
        run_dir, score_dir = request.out / "runs" / model, request.out / "scores" / model
        with ReferenceServer(dataset, model, family="spd-faith") as server:
            run_spd_faith(RunRequest(dataset=build_dir, model=model, base_urls=(server.base_url,), out=run_dir,
                                     seed=request.seed, progress=request.progress))
        score_spd_faith(ScoreRequest(dataset=build_dir, predictions=run_dir / "predictions.jsonl", out=score_dir,
                                     from_run=True, seed=request.seed))
        write_score_explorer(score_dir, build_dir, run_dir / "predictions.jsonl", progress=request.progress)
        score_dirs.append(score_dir)
    blind_run, blind_score = request.out / "runs" / "prior-no-image", request.out / "scores" / "prior-no-image"
    with ReferenceServer(dataset, "prior", family="spd-faith") as server:
        run_spd_faith(RunRequest(dataset=build_dir, model="prior", base_urls=(server.base_url,), out=blind_run,
                                 seed=request.seed, progress=request.progress, no_image=True))
    score_spd_faith(ScoreRequest(dataset=build_dir, predictions=blind_run / "predictions.jsonl", out=blind_score,
                                 from_run=True, seed=request.seed))
    write_score_explorer(blind_score, build_dir, blind_run / "predictions.jsonl", progress=request.progress)
    report_dir = request.out / "report"
    comparison = compare_scores([*score_dirs, blind_score], report_dir, seed=request.seed, all_pairs=True)
    write_report_explorer(report_dir, [*score_dirs, blind_score], comparison["models"], progress=request.progress)
    return report_dir


VFAITH_REFERENCE_MODELS = ("oracle", "memorizer", "prior")


def quickstart_vfaith(out: Path, per_template: int = 2, seed: int = 0, workers: int = 1, progress: bool = True) -> Path:
    """VFaith's flow into `out` (build/, runs/MODEL/, scores/MODEL/, report/): a small offline build of the
    embedded sample, the oracle and the memorizer (the two ends of the scale) run over HTTP and scored, one
    report in the paper's Table 2 layout; returns the report dir."""
    from mmfaith.builders.vfaith.build import BuildRequest as VfaithBuildRequest, build_vfaith
    from mmfaith.evaluators.run_settings import RunSettings
    from mmfaith.evaluators.vfaith.report import compare_scores as compare_vfaith
    from mmfaith.evaluators.vfaith.run import run_vfaith
    from mmfaith.evaluators.vfaith.score import ScoreRequest as VfaithScoreRequest, score_vfaith
    from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset

    build_dir = out / "build"
    build_vfaith(VfaithBuildRequest(out=build_dir, per_template=per_template, seed=seed, workers=workers,
                                    inpainter=resolve_inpainter("auto", None), progress=progress))
    dataset = open_vfaith_dataset(build_dir)
    score_dirs = []
    for model, no_image in [(model, False) for model in VFAITH_REFERENCE_MODELS] + [("memorizer", True)]:
        name = f"{model}-no-image" if no_image else model
        run_dir, score_dir = out / "runs" / name, out / "scores" / name
        with ReferenceServer(dataset, model, family="vfaith") as server:
            run_vfaith(RunSettings(dataset=build_dir, model=model, base_urls=(server.base_url,), out=run_dir,
                                   progress=progress, no_image=no_image), circular=not no_image)
        score_vfaith(VfaithScoreRequest(dataset=build_dir, predictions=run_dir / "predictions.jsonl", out=score_dir,
                                        from_run=True, seed=seed))
        write_score_explorer(score_dir, build_dir, run_dir / "predictions.jsonl", progress=progress)
        score_dirs.append(score_dir)
    report_dir = out / "report"
    comparison = compare_vfaith(score_dirs, report_dir, seed=seed, all_pairs=True)
    write_report_explorer(report_dir, score_dirs, comparison["models"], progress=progress)
    return report_dir


QUICKSTART_ROLES = ("oracle", "prior")


def quickstart_suite(out: Path, progress: bool = True, workers: int | None = None) -> tuple[list[Path], Path]:
    """The default suite (every family, on the embedded sample; built once and cached) evaluated for the
    `oracle` and `prior` roles, each served by `serve-reference --suite`'s model on 127.0.0.1 and run over HTTP
    as `mmfaith evaluate` runs a user's model, then compared: OUT/profiles/ROLE and OUT/comparison. Returns
    (the profile dirs, the comparison dir).

    The steps run on `workers` processes (`run_steps`; default: the cores this process may use, at most one per
    family): each family's build, then its evaluation for the oracle (which scores the family's reference ends
    into the cache), then for the prior; each role's profile once its four families are evaluated; then the
    comparison. A family's evaluation is `evaluate`'s (`evaluate_family`) against the role's suite model over
    that family alone (each family's model answers only its own dataset's requests, so these are the answers of
    the whole suite's model): the files are those of `mmfaith evaluate` against `serve-reference --suite`,
    whatever order the steps end in."""
    # Every step's plots need matplotlib's figure and Agg canvas: imported here, before the workers are forked, each
    # worker inherits them instead of importing them again (~1 CPU-s apiece); this process draws the comparison.
    for module in ("matplotlib.figure", "matplotlib.backends.backend_agg"):
        importlib.import_module(module)
    from mmfaith.dirlock import hold_lock
    from mmfaith.evaluators.profile_report import compare_profiles
    from mmfaith.suite import load_suite

    prepare_out_dir(out, "quickstart")
    names = load_suite(None).families()
    profiles = {role: prepare_out_dir(out / "profiles" / role, "quickstart") for role in QUICKSTART_ROLES}
    steps = []
    for name in names:
        steps.append(Step(f"{name}: build", _build_step, (name,)))
        for before, role in zip(("build", *QUICKSTART_ROLES), QUICKSTART_ROLES):
            steps.append(Step(f"{name}: {role}", _evaluate_step, (name, role, profiles[role]), (f"{name}: {before}",)))
    for role, folder in profiles.items():
        evaluated = tuple(f"{name}: {role}" for name in names)
        steps.append(Step(f"{role}: profile", _profile_step, (role, folder), evaluated, with_results=True))
    with contextlib.ExitStack() as held:
        for folder in profiles.values():
            held.enter_context(hold_lock(folder, "quickstart"))
        run_steps(steps, workers or min(len(names), available_cores()), progress)
    compare_profiles(list(profiles.values()), out / "comparison")
    write_profiles_explorer(out / "comparison", list(profiles.values()), progress=progress)
    return list(profiles.values()), out / "comparison"


def _build_step(family: str) -> str:
    """The default suite's dataset of `family`: its recipe built into the cache (once)."""
    from mmfaith.suite import load_suite, suite_dataset

    return suite_dataset(load_suite(None), family, progress=False)


def _evaluate_args(role: str, profile_dir: Path) -> argparse.Namespace:
    """`mmfaith evaluate --model ROLE --out PROFILE_DIR --no-progress` with evaluate's defaults for the rest (the
    server's URL is given to `evaluate_family` apart)."""
    from mmfaith.cli import parser

    return parser().parse_args(["evaluate", "--model", role, "--out", str(profile_dir), "--no-progress"])


def _evaluate_step(family: str, role: str, profile_dir: Path) -> dict[str, Any]:
    """`family`'s entry of the role's profile (`evaluate_family`), the role's suite model over that family served
    on 127.0.0.1 for it."""
    from mmfaith.evaluators.evaluate import evaluate_family
    from mmfaith.evaluators.suite_reference import suite_reference_model
    from mmfaith.suite import load_suite

    suite = load_suite(None)
    alone = dataclasses.replace(suite, entries=(suite.entry(family),))
    with ReferenceServer(None, suite_reference_model(alone, role, progress=False)) as server:
        return evaluate_family(suite, family, _evaluate_args(role, profile_dir), role, (server.base_url,))


def _profile_step(role: str, profile_dir: Path, entries: dict[str, dict[str, Any]]) -> int:
    """The role's profile from its families' entries (`finish_profile`, as `evaluate` ends), keyed
    "FAMILY: ROLE"; its exit status."""
    from mmfaith.evaluators.evaluate import finish_profile
    from mmfaith.suite import load_suite

    suite = load_suite(None)
    return finish_profile(suite, _evaluate_args(role, profile_dir),
                          {name: entries[f"{name}: {role}"] for name in suite.families()})


def quickstart_family(family: str, out: Path, seed: int = 0, progress: bool = True) -> Path:
    """One family's flow into `out` with the default suite's recipe and run arguments: build/ (the recipe on the
    embedded sample), runs/MODEL and scores/MODEL for each of the family's reference models served over HTTP,
    report/ comparing every pair. Returns the report dir."""
    from mmfaith import families
    from mmfaith.cli import parser
    from mmfaith.evaluators.evaluate import run_one, score_one
    from mmfaith.suite import load_suite, run_build

    prepare_out_dir(out, "quickstart")
    entry = load_suite(None).entry(family)
    declared = families.get(family)
    build_dir = out / "build"
    assert entry.build is not None
    run_build(family, [*entry.build], build_dir, progress)
    dataset = declared.parts().open_dataset(build_dir)
    score_dirs = []
    for model, _ in declared.reference_models:
        run_dir, score_dir = out / "runs" / model, out / "scores" / model
        with ReferenceServer(dataset, model, family=family) as server:
            shared = parser().parse_args(["evaluate", "--base-url", server.base_url, "--model", model,
                                          "--out", str(out), *([] if progress else ["--no-progress"])])
            run_one(family, str(build_dir), entry.run, shared, model, (server.base_url,), run_dir)
        score_one(family, str(build_dir), run_dir, score_dir, seed)
        score_dirs.append(score_dir)
    comparison = declared.part("compare", "comparison report")(score_dirs, out / "report", 1000, seed, True)
    write_report_explorer(out / "report", score_dirs, comparison["models"], progress=progress)
    return out / "report"
