"""VFaith's own options of the shared `run` and `score` verbs, and the hooks the registry names.

The shared verbs (evaluators/run_cli.py, score_cli.py) make each family's subparser, add the
options every family has, then call these; their handlers call back here.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmfaith.cli_options import add_judge_options, add_reader_options, judge_endpoint, reader_endpoint

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
    add_reader_options(parser)
    add_judge_options(parser, "judge of free-form answers", "the free-form answers the normalised-text rule cannot "
                      "match", agreement=None)


def score(args: argparse.Namespace) -> int:
    """`mmfaith score vfaith`: the parsed options into a ScoreRequest; prints the headline line."""
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.score_cli import print_score_line
    from mmfaith.evaluators.vfaith.score import ScoreRequest, score_vfaith

    if not args.dataset:
        raise MmfaithError("mmfaith score vfaith needs --dataset BUILD_DIR|RELEASE|ORG/NAME.")
    from mmfaith.evaluators.score_settings import shared_score_settings
    from mmfaith.nouns import counted

    judge = judge_endpoint(args)
    metrics = score_vfaith(ScoreRequest(
        **shared_score_settings(args), dataset=Path(args.dataset), judge=judge, extract=args.extract,
        reader=reader_endpoint(args)))
    counts = metrics["counts"]
    print_score_line("vfaith", f"{counted(counts['n_pairs'], 'pair')} and "
                               f"{counted(counts['n_perception'], 'perception item')}", metrics, args.out)
    return 0
