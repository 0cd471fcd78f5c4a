"""The `evaluate` and `suite build` verbs of the `mmfaith` command (argument parsing only).

`evaluate` takes every option `run FAMILY` shares (servers, --serve, generation, concurrency,
validity controls) plus the suite, the families and the profile folder; `evaluators/evaluate.py`
does the work. `suite build` builds a suite's recipes on a real COCO split (`mmfaith/suite.py`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith.cli_help import HelpFormatter

EVALUATE_EXAMPLE = """examples:
  mmfaith serve-reference --suite default --model oracle --port 8011 &
  mmfaith evaluate --base-url http://127.0.0.1:8011/v1 --model oracle --out profiles/oracle
  mmfaith evaluate --serve Qwen/Qwen2.5-VL-7B-Instruct --out profiles/qwen --concurrency 64
  mmfaith report profiles/oracle profiles/qwen --out compare
A killed evaluate resumes when the same command is run again."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `evaluate` and `suite build`."""
    from mmfaith.evaluators.run_cli import add_shared_run_options

    parser = subparsers.add_parser(
        "evaluate", help="run one model through every family of a suite, score it, write its profile",
        description="Run every family of a suite (default: the embedded sample's, built once and cached) through "
                    "the shared engine, score each, and write a profile: profile.json, profile.md and profile.png "
                    "(each headline metric between the family's prior and oracle). Resumable; a family that fails "
                    "is recorded and the others go on; exit status 1 unless every family succeeded.",
        epilog=EVALUATE_EXAMPLE, formatter_class=HelpFormatter)
    suite = parser.add_argument_group("suite and profile")
    suite.add_argument("--suite", default="default", metavar="SUITE",
                       help="`default` (the embedded sample) or a suite file (docs/evaluate.md)")
    suite.add_argument("--families", metavar="LIST", help="comma-separated families of the suite (default: all)")
    suite.add_argument("--out", type=Path, required=True, metavar="PROFILE_DIR",
                       help="folder for profile.json/.md/.png, runs/FAMILY and scores/FAMILY (resumable)")
    suite.add_argument("--seed", type=int, default=0, help="bootstrap seed of the scores")
    add_shared_run_options(parser, dataset_and_out=False)
    parser.set_defaults(handler=_evaluate)

    suite_verb = subparsers.add_parser("suite", help="build a suite's datasets", formatter_class=HelpFormatter,
                                       description="Work with suites (docs/evaluate.md).")
    actions = suite_verb.add_subparsers(dest="suite_action", required=True, metavar="ACTION")
    build = actions.add_parser(
        "build", help="build every recipe of a suite on a COCO split", formatter_class=HelpFormatter,
        description="Build each family's dataset of a suite with the suite's recipes on a real COCO split into "
                    "OUT/FAMILY, and write OUT/suite.json: a suite file naming them, for `evaluate --suite`.")
    build.add_argument("--suite", default="default", metavar="SUITE", help="the suite whose recipes to build")
    build.add_argument("--coco-annotations", type=Path, required=True, metavar="FILE", help="COCO instances JSON")
    build.add_argument("--images", type=Path, required=True, metavar="DIR", help="folder of the images it lists")
    build.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for the datasets and suite.json")
    build.add_argument("--no-progress", action="store_true", help="no progress bars")
    build.set_defaults(handler=_suite_build)


def _evaluate(args: argparse.Namespace) -> int:
    from mmfaith.evaluators.evaluate import evaluate

    return evaluate(args)


def _suite_build(args: argparse.Namespace) -> int:
    from mmfaith.suite import build_suite, load_suite

    written = build_suite(load_suite(args.suite), args.out, args.coco_annotations, args.images,
                          progress=not args.no_progress)
    print(f"built suite into {args.out}; evaluate with: mmfaith evaluate --suite {written} ...")
    return 0
