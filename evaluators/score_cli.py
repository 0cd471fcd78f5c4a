"""The `mmfaith score` and `mmfaith report` verbs: argument parsing only (mmfaith/cli.py style).

`register(subparsers)` adds both verbs to the root parser's subparsers; each handler builds the
request and calls the stage's entry function (spd_score.score_spd_faith, spd_report.compare_scores).
"""
from __future__ import annotations

import argparse
from pathlib import Path

SCORE_EXAMPLE = """example (rule judge, offline):
  mmfaith score spd-faith --dataset out/spd --predictions out/run/predictions.jsonl --from-run --out out/score
then read out/score/report.md; compare models with `mmfaith report out/score out/score2 --out out/compare`."""


def _add_score(subparsers: argparse._SubParsersAction) -> None:
    score = subparsers.add_parser("score", help="score a model's predictions on a benchmark",
                                  description="Score predictions (or a submission) against a benchmark's gold.")
    families = score.add_subparsers(dest="family", required=True, metavar="FAMILY")
    spd = families.add_parser(
        "spd-faith", help="SPD-Faith: DS, DQR, TF1, CF1, contradiction and consistency ratio, DRF",
        description="Validate predictions.jsonl, judge every answer and write metrics.json, items.jsonl, "
                    "report.md and plots. A submission holds one answer per id and probe; every bad line is "
                    "reported at once.",
        epilog=SCORE_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    spd.add_argument("--dataset", type=Path, required=True, metavar="SOURCE",
                     help="an SPD-Faith build dir, release folder, or Hub repo ORG/NAME[@REVISION]")
    spd.add_argument("--predictions", type=Path, required=True, metavar="FILE",
                     help="predictions.jsonl or a submission")
    spd.add_argument("--out", type=Path, required=True, metavar="DIR", help="score dir to write")
    spd.add_argument("--from-run", action="store_true",
                     help="predictions written by `mmfaith run`: the last answer of an (id, probe) wins "
                          "(default: a submission, where a second answer is an error)")
    judge = spd.add_argument_group("judge")
    judge.add_argument("--judge", default="rule", metavar="rule|MODEL",
                       help="rule (default: deterministic, offline) or the model name of an LLM judge")
    judge.add_argument("--judge-base-url", metavar="URL",
                       help="OpenAI-compatible base URL of the judge (e.g. http://HOST:PORT/v1)")
    judge.add_argument("--judge-provider", choices=("openai", "gemini"), default="openai")
    judge.add_argument("--judge-api-key-env", metavar="NAME",
                       help="environment variable holding the judge's key (default OPENAI_API_KEY / GEMINI_API_KEY)")
    judge.add_argument("--judge-workers", type=int, default=4, metavar="N", help="parallel judge calls (default 4)")
    judge.add_argument("--judge-agreement", action="store_true",
                       help="also report how often the rule and LLM judges extract the same claims")
    spd.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap replicates for the 95%% CIs")
    spd.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    spd.set_defaults(handler=_run_score_spd)


def _run_score_spd(args: argparse.Namespace) -> int:
    from mmfaith.clients import ModelEndpoint
    from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith

    judge = None if args.judge == "rule" else ModelEndpoint(args.judge_provider, args.judge, args.judge_base_url,
                                                            args.judge_api_key_env)
    metrics = score_spd_faith(ScoreRequest(
        dataset=args.dataset, predictions=args.predictions, out=args.out, judge=judge,
        judge_workers=args.judge_workers, judge_agreement=args.judge_agreement, from_run=args.from_run,
        n_bootstrap=args.bootstrap, seed=args.seed))
    overall = metrics["overall"]
    print(f"scored {metrics['counts']['n_items']} pairs of {metrics['provenance']['model']}: "
          + ", ".join(f"{k} {overall[k]:.3f}" for k in ("DS", "DQR", "TF1", "CF1", "DRF") if overall[k] is not None)
          + f"; see {args.out / 'report.md'}")
    return 0


def _add_report(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser("report", help="compare scored models side by side",
                                   description="Tables and plots of several score dirs, with paired bootstrap "
                                               "intervals of their differences and McNemar p-values.")
    report.add_argument("score_dirs", type=Path, nargs="+", metavar="SCORE_DIR", help="score dirs of one dataset")
    report.add_argument("--out", type=Path, required=True, metavar="DIR")
    report.add_argument("--all-pairs", action="store_true", help="compare every pair (default: each against the first)")
    report.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="paired bootstrap replicates")
    report.add_argument("--seed", type=int, default=0)
    report.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from mmfaith.evaluators.spd_faith.report import compare_scores

    comparison = compare_scores(args.score_dirs, args.out, args.bootstrap, args.seed, args.all_pairs)
    print(f"compared {len(comparison['models'])} models; see {args.out / 'report.md'}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `score` and `report` verbs to the root parser's subparsers."""
    _add_score(subparsers)
    _add_report(subparsers)
