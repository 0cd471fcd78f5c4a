"""SPD-Faith's own options of the shared `run` and `score` verbs, and the hooks the registry names.

The shared verbs (evaluators/run_cli.py, score_cli.py) make each family's subparser, add the
options every family has, then call these to add SPD-Faith's; their handlers call back here.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmfaith.cli_options import add_judge_options, add_workers_option, judge_endpoint
from mmfaith.evaluators.spd_faith.prompts import LAYOUTS, ORDER_CHOICES

if TYPE_CHECKING:  # the stage modules load when a hook runs
    from mmfaith.evaluators.run_engine import EvalDataset, ProbePlan, ReferenceModel

RUN_DESCRIPTION = "Ask every SPD-Faith pair's four probes; describe is asked with the model's own count."
SCORE_DESCRIPTION = ("Validate predictions.jsonl, judge every answer and write metrics.json, items.jsonl, report.md "
                     "and plots: DS, DQR, TF1, CF1, contradiction and consistency ratio, DRF. A submission holds one "
                     "answer per id and probe; every bad line is reported at once.")


def open_dataset(source: Path | str) -> EvalDataset:
    """A build dir, release folder or Hub id, opened for the run engine and the reference server."""
    from mmfaith.loaders.spd_faith import open_spd_dataset

    return open_spd_dataset(Path(source))


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """How the pairs are shown: layout, order, seed."""
    parser.description = RUN_DESCRIPTION
    how = parser.add_argument_group("how the pairs are shown")
    how.add_argument("--pair-layout", choices=LAYOUTS, default="separate", dest="layout",
                     help="two images in one message, or one canvas with both side by side")
    how.add_argument("--order", choices=ORDER_CHOICES, default="original-first",
                     help="which image comes first; random is fixed by --seed and the pair id")
    how.add_argument("--seed", type=int, default=0, help="seed of --order random and of --perturb's blocks")
    how.add_argument("--perturb", type=_blocks_ratio, metavar="blocks:RATIO",
                     help="show both images with the same seeded blocks masked: RATIO (0 to 1) of an 8x8 grid, "
                          "e.g. blocks:0.5 (one run dir per ratio; `mmfaith report` plots DS and DQR against it)")


def _blocks_ratio(text: str) -> float:
    """`blocks:RATIO` -> RATIO, a number in [0, 1]."""
    kind, _, value = text.partition(":")
    try:
        ratio = float(value)
    except ValueError:
        ratio = -1.0
    if kind != "blocks" or not 0.0 <= ratio <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: use blocks:RATIO with RATIO from 0 to 1, e.g. blocks:0.5")
    return ratio


def probe_plan(options: dict[str, Any]) -> ProbePlan:
    """The plan for the parsed run options (`layout`, `order`, `seed`)."""
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.spd_faith.run import SpdProbePlan

    options = dict(options)
    if options.pop("circular"):
        raise MmfaithError("--circular rotates multiple-choice options; SPD-Faith's probes (yes/no, a count, a "
                           "description) have none.")
    return SpdProbePlan(**options)


def reference_model(name: str, dataset: EvalDataset) -> ReferenceModel:
    """oracle, blind or pixel-diff over an SPD-Faith dataset."""
    from mmfaith.evaluators.spd_faith.reference import SpdReference

    return SpdReference(name, dataset)  # type: ignore[arg-type]


def add_score_options(parser: argparse.ArgumentParser) -> None:
    """The judge of the claims: the rule judge, or an LLM over the OpenAI protocol or Gemini."""
    parser.description = SCORE_DESCRIPTION
    parser.add_argument("--format", choices=("auto", "predictions", "official"), default="auto",
                        help="predictions.jsonl / a submission, or an official SPD-Faith-Bench response file "
                             "(JSON with a responses list; auto detects it by shape; --dataset is then the build "
                             "imported with `mmfaith build spd-faith --from-official`)")
    add_judge_options(parser, "judge", "the claims", "how often the rule and LLM judges extract the same claims")
    add_workers_option(parser, "the pairs with the rule judge", "; an LLM judge runs --judge-workers threads instead")


def score(args: argparse.Namespace) -> int:
    """`mmfaith score spd-faith`: the parsed options into a ScoreRequest; prints the headline line."""
    from mmfaith.evaluators.score_cli import print_score_line
    from mmfaith.evaluators.score_settings import shared_score_settings
    from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith
    from mmfaith.nouns import counted

    judge = judge_endpoint(args)
    metrics = score_spd_faith(ScoreRequest(
        **shared_score_settings(args), dataset=Path(args.dataset) if args.dataset else None, judge=judge,
        judge_workers=args.judge_workers, judge_agreement=args.judge_agreement, format=args.format,
        workers=args.workers))
    counts = metrics["counts"]
    stale = f"; {counts['n_stale']} stale lines dropped" if counts.get("n_stale") else ""
    print_score_line("spd-faith", counted(counts["n_items"], "pair"), metrics, args.out, stale)
    return 0
