"""The `mmfaith score` and `mmfaith report` verbs, for every registered family (argument parsing only).

`score FAMILY` has the options every family shares (dataset, predictions, out, run or submission,
bootstrap) and the family's own (its `add_score_options`, e.g. SPD-Faith's judge); the family's
`score` handler does the rest. `report` reads the family from the score dirs' metrics.json
(`--family` overrides) and calls the family's `compare`, or with `--pool` pools one model's replicate
score dirs (evaluators/pool.py).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith import families
from mmfaith.cli_help import HelpFormatter, family_parsers
from mmfaith.errors import MmfaithError

SCORE_EXAMPLE = """example (offline):
  mmfaith score {family} --dataset out/{short} --predictions runs/oracle/predictions.jsonl --from-run --out scores/oracle
then read scores/oracle/report.md; compare models with `mmfaith report scores/oracle scores/other --out compare`."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `score` and `report` verbs to the root parser's subparsers."""
    for family, parser in family_parsers(
            subparsers, "score", "score a model's predictions on a benchmark",
            "Score predictions (or a submission) against a benchmark's gold.", families.all_families(),
            help_of=lambda family: f"{family.title}: {', '.join(m.key for m in family.metrics[:8])}",
            epilog_of=lambda family: SCORE_EXAMPLE.format(family=family.name, short=family.name.split("-")[0])):
        parser.add_argument("--dataset", metavar="SOURCE",
                            help="a build dir, release folder, or Hub repo ORG/NAME[@REVISION]; needed unless the "
                                 "family scores a file alone (SPD-Faith: an official response file)")
        parser.add_argument("--predictions", type=Path, required=True, metavar="FILE",
                            help="predictions.jsonl or a submission")
        parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="score dir to write")
        parser.add_argument("--from-run", action="store_true",
                            help="predictions written by `mmfaith run`: the last answer of an (id, probe) wins "
                                 "(default: a submission, where a second answer is an error)")
        parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                            help="bootstrap replicates for the 95%% CIs")
        parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
        parser.add_argument("--repeat", type=int, default=0, metavar="R",
                            help="score the lines of repeat R of a `run --repeats N` (default 0); pool the repeats' "
                                 "score dirs with `report --pool`")
        parser.add_argument("--overwrite", action="store_true",
                            help="replace a non-empty --out that is not a score of the same inputs (default: refuse)")
        parser.add_argument("--drop-stale", action="store_true",
                            help="drop (and count) prediction lines that showed other images than the dataset's "
                                 "(default: refuse them: the dataset was rebuilt after the run)")
        family.parts().add_score_options(parser)
        parser.set_defaults(handler=family.parts().score)
    _add_report(subparsers)


def _add_report(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser("report", help="compare scored models side by side", formatter_class=HelpFormatter,
                                   description="Tables and plots of several score dirs of one dataset, with paired "
                                               "bootstrap intervals of their differences and McNemar p-values.")
    report.add_argument("score_dirs", type=Path, nargs="+", metavar="SCORE_DIR", help="score dirs of one dataset")
    report.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for report.md and the plots")
    report.add_argument("--family", help="the family (default: the one the score dirs' metrics.json names)")
    report.add_argument("--pool", action="store_true",
                        help="the score dirs are replicates of one model (builds made with other seeds, or the "
                             "repeats of one run): write each headline metric's mean, sd and min-max over them "
                             "(pooled.json, pooled.md) instead of comparing models")
    report.add_argument("--all-pairs", action="store_true", help="compare every pair (default: each against the first)")
    report.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="paired bootstrap replicates")
    report.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    report.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    named = {args.family} if args.family else {families.family_of_score_dir(d) for d in args.score_dirs}
    if len(named) != 1:
        raise MmfaithError(f"the score dirs are of several families ({', '.join(sorted(named))}); "
                           "compare score dirs of one dataset.")
    family = named.pop()
    if args.pool:
        from mmfaith.evaluators.pool import pool_scores

        pooled = pool_scores(args.score_dirs, args.out, family)
        print(f"pooled {len(pooled['replicates'])} replicates of {pooled['model']}; see {args.out / 'pooled.md'}")
        return 0
    compare = families.get(family).part("compare", "comparison report")
    comparison = compare(args.score_dirs, args.out, args.bootstrap, args.seed, args.all_pairs)
    print(f"compared {len(comparison['models'])} models; see {args.out / 'report.md'}")
    return 0
