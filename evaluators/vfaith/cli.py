"""VFaith's own options of the shared `run` and `score` verbs, and the hooks the registry names.

The shared verbs (evaluators/run_cli.py, score_cli.py) make each family's subparser, add the
options every family has, then call these; their handlers call back here.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mmfaith.evaluators.run_engine import EvalDataset, ProbePlan, ReferenceModel

RUN_DESCRIPTION = ("Ask every VFaith pair its question on the original and on the edited image, and every perception "
                   "item its statements; zero-shot, the answer in \\boxed{}.")
SCORE_DESCRIPTION = ("Validate predictions.jsonl, read every \\boxed{} answer and write metrics.json, items.jsonl and "
                     "report.md: raw and edit accuracy and their delta by category, repeat ratios, perception "
                     "accuracy, McNemar raw vs edit, bootstrap intervals clustered by source image.")


def open_dataset(source: Path | str) -> EvalDataset:
    """A build dir, release folder or Hub id, opened for the run engine and the reference server."""
    from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset

    return open_vfaith_dataset(source)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """VFaith has no run options of its own."""
    parser.description = RUN_DESCRIPTION


def probe_plan(options: dict[str, Any]) -> ProbePlan:
    from mmfaith.evaluators.vfaith.run import VfaithProbePlan

    return VfaithProbePlan(circular=options["circular"])


def reference_model(name: str, dataset: EvalDataset) -> ReferenceModel:
    """oracle or memorizer over a VFaith dataset."""
    from mmfaith.evaluators.vfaith.reference import VfaithReference

    return VfaithReference(name, dataset)  # type: ignore[arg-type]


def add_score_options(parser: argparse.ArgumentParser) -> None:
    """The judge of free-form answers: rule (normalised text) or an LLM."""
    parser.description = SCORE_DESCRIPTION
    judge = parser.add_argument_group("judge of free-form answers")
    judge.add_argument("--judge", default="rule", metavar="rule|MODEL",
                       help="rule (normalised text, offline) or the model that decides equivalence where it fails")
    judge.add_argument("--judge-base-url", metavar="URL", help="OpenAI-compatible base URL of the judge")
    judge.add_argument("--judge-provider", choices=("openai", "gemini"), default="openai", help="protocol of the judge")
    judge.add_argument("--judge-api-key-env", metavar="NAME",
                       help="environment variable holding the judge's key (default OPENAI_API_KEY / GEMINI_API_KEY)")


def score(args: argparse.Namespace) -> int:
    """`mmfaith score vfaith`: the parsed options into a ScoreRequest; prints the headline line."""
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators import coverage
    from mmfaith.evaluators.score_cli import reader_endpoint
    from mmfaith.evaluators.vfaith.score import ScoreRequest, score_vfaith

    if not args.dataset:
        raise MmfaithError("mmfaith score vfaith needs --dataset BUILD_DIR|RELEASE|ORG/NAME.")
    from mmfaith.clients import ModelEndpoint

    judge = None if args.judge == "rule" else ModelEndpoint(args.judge_provider, args.judge, args.judge_base_url,
                                                            args.judge_api_key_env)
    metrics = score_vfaith(ScoreRequest(
        dataset=Path(args.dataset), predictions=args.predictions, out=args.out, from_run=args.from_run,
        n_bootstrap=args.bootstrap, seed=args.seed, overwrite=args.overwrite, drop_stale=args.drop_stale,
        repeat=args.repeat,
        judge=judge, extract=args.extract, coverage_threshold=args.coverage_threshold,
        reader=reader_endpoint(args, "vfaith")))
    overall, counts = metrics["overall"], metrics["counts"]
    shown = ", ".join(f"{k} {'n/a' if overall[k] is None else f'{overall[k]:.3f}'}" for k in overall)
    print(f"scored {counts['n_pairs']} pairs and {counts['n_perception']} perception items of "
          f"{metrics['provenance']['model']}: {shown}; {coverage.console(metrics['answers'])}; "
          f"see {args.out / 'report.md'}")
    coverage.print_warnings(metrics["answers"])
    return 0


def compare(score_dirs: list[Path], out: Path, n_bootstrap: int, seed: int, all_pairs: bool) -> dict[str, Any]:
    """`mmfaith report` over VFaith score dirs."""
    from mmfaith.evaluators.vfaith.report import compare_scores

    return compare_scores(score_dirs, out, n_bootstrap, seed, all_pairs)
