"""The `mmfaith score` and `mmfaith report` verbs, for every registered family (argument parsing only).

`score FAMILY` has the options every family shares (dataset, predictions, out, run or submission,
bootstrap) and the family's own (its `add_score_options`, e.g. SPD-Faith's judge); the family's
`score` handler does the rest. `report` reads the family from the score dirs' metrics.json
(`--family` overrides) and calls the family's `compare`, or with `--pool` pools one model's replicate
score dirs (evaluators/pool.py).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mmfaith import families
from mmfaith.cli_help import HelpFormatter, family_parsers
from mmfaith.errors import MmfaithError

SCORE_EXAMPLE = """example (offline):
  mmfaith score {family} --dataset out/{short} --predictions runs/{model}/predictions.jsonl --from-run --out scores/{model}
then read scores/{model}/report.md; compare models with `mmfaith report scores/{model} scores/other --out compare`."""
DATASET_HELP = "a build dir, release folder, or Hub repo ORG/NAME[@REVISION]"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `score` and `report` verbs to the root parser's subparsers."""
    family_parsers(subparsers, "score", "score a model's predictions on a benchmark",
                   "Score predictions (or a submission) against a benchmark's gold.", families.all_families(),
                   help_of=lambda family: f"{family.title}: {', '.join(m.key for m in family.metrics[:8])}",
                   populate=_populate_score,
                   epilog_of=lambda family: SCORE_EXAMPLE.format(family=family.name, short=family.name.split("-")[0],
                                                                 model=family.reference_models[0][0]))
    _add_report(subparsers)


def _populate_score(family: families.Family, parser: argparse.ArgumentParser) -> None:
    from mmfaith.evaluators.answers import RULES
    from mmfaith.evaluators.coverage import COVERAGE_THRESHOLD

    alone = family.parts().scores_alone
    parser.add_argument("--dataset", metavar="SOURCE",
                        help=f"{DATASET_HELP}; optional with {alone}" if alone else f"{DATASET_HELP} (required)")
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
    parser.add_argument("--extract", choices=RULES, default="default",
                        help="how answers are read (docs/answers.md): default (every common form, the last "
                             "answer wins) or paper (the paper's own rule where it has one, e.g. the last "
                             "\\boxed{}; elsewhere default)")
    parser.add_argument("--coverage-threshold", type=float, default=COVERAGE_THRESHOLD, metavar="SHARE",
                        help="warn when fewer than this share of the expected answers were read")
    parser.add_argument("--no-explorer", action="store_true",
                        help="write no explorer (index.html) beside the scores: at 100,000 items and more it costs "
                             "more than the scoring (docs/scale.md)")
    family.parts().add_score_options(parser)
    parser.set_defaults(handler=_with_explorer(family))


def _with_explorer(family: families.Family) -> Callable[[argparse.Namespace], int]:
    """A family's score handler followed by the score dir's explorer (index.html, mmfaith/explorer); a score read
    without --dataset has no images to show, a family without an `explore` part no item views, and --no-explorer
    asks for none: those get none."""
    def scored(args: argparse.Namespace) -> int:
        status = family.parts().score(args)
        if status == 0 and args.dataset is not None and family.parts().explore is not None and not args.no_explorer:
            from mmfaith.explorer.sources import write_score_explorer

            print(f"explorer: {write_score_explorer(args.out, args.dataset, args.predictions, progress=sys.stderr.isatty())}")
        return status

    return scored


def _add_report(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser("report", help="compare scored models side by side", formatter_class=HelpFormatter,
                                   description="Tables and plots of several score dirs of one dataset, with paired "
                                               "bootstrap intervals of their differences and McNemar p-values; or of "
                                               "several profile dirs (`mmfaith evaluate`): one leaderboard per family, "
                                               "an overall view and every pair compared in each family.")
    report.add_argument("score_dirs", type=Path, nargs="+", metavar="SCORE_DIR|PROFILE_DIR",
                        help="score dirs of one dataset, or profile dirs")
    report.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for report.md and the plots")
    report.add_argument("--family", help="the family (default: the one the score dirs' metrics.json names)")
    report.add_argument("--pool", action="store_true",
                        help="the score dirs are replicates of one model (builds made with other seeds, or the "
                             "repeats of one run): write each headline metric's mean, sd and min-max over them "
                             "(pooled.json, pooled.md) instead of comparing models")
    report.add_argument("--against-first", action="store_true",
                        help="compare each model with the first only (default: every pair of models)")
    report.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="paired bootstrap replicates")
    report.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    report.add_argument("--overwrite", action="store_true",
                        help="write into a non-empty --out that is not an earlier report (default: refuse)")
    report.add_argument("--no-explorer", action="store_true",
                        help="write no explorer (index.html) of the comparison (docs/scale.md)")
    report.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from mmfaith.evaluators.score_dir import load_metrics

    _check_report_out(args.out, args.score_dirs, args.overwrite)
    from mmfaith.evaluators.profile_report import compare_profiles, is_profile_dir

    profiles = [is_profile_dir(path) for path in args.score_dirs]
    if any(profiles):
        if not all(profiles):
            raise MmfaithError("report: give score dirs (of one dataset) or profile dirs (of `mmfaith evaluate`), "
                               "not a mix.")
        from mmfaith.explorer.sources import write_profiles_explorer

        comparison = compare_profiles(args.score_dirs, args.out, args.bootstrap, args.seed)
        explorer = write_profiles_explorer(args.out, args.score_dirs, progress=sys.stderr.isatty())
        print(f"compared {len(comparison['models'])} profiles ({', '.join(comparison['models'])}) over "
              f"{', '.join(comparison['families'])}; wrote {args.out / 'report.md'}, comparison.json, overall.png "
              f"and one folder per family; explorer: {explorer}")
        for label, row in comparison["overall"].items():
            print(f"  {label}: " + ", ".join(f"{name} {'n/a' if v is None else f'{v:.3f}'}" for name, v in row.items()))
        return 0
    named = {args.family} if args.family else {families.family_of_score_dir(d) for d in args.score_dirs}
    if len(named) != 1:
        raise MmfaithError(f"the score dirs are of several families ({', '.join(sorted(named))}); "
                           "compare score dirs of one dataset.")
    family = families.get(named.pop())
    if args.pool:
        from mmfaith.evaluators.pool import pool_scores

        pooled = pool_scores(args.score_dirs, args.out, family.name)
        print(f"pooled {len(pooled['replicates'])} replicates of {pooled['model']}; see {args.out / 'pooled.md'}")
        return 0
    compare = family.part("compare", "comparison report")
    comparison = compare(args.score_dirs, args.out, args.bootstrap, args.seed, not args.against_first)
    explorer_line = ("no explorer (--no-explorer)" if args.no_explorer
                     else _report_explorer(args.out, args.score_dirs, comparison["models"]))
    n = len(comparison["models"])
    written = ", ".join(sorted(p.name for p in args.out.iterdir() if p.is_file()))
    print(f"compared {n} model{'' if n == 1 else 's'} ({family.title}); wrote {written} to {args.out}")
    for label, path in zip(comparison["models"], args.score_dirs):
        print(f"  {label}: {headline(family, load_metrics(path))} ({path})")
    print(explorer_line)
    return 0


def print_score_line(family_name: str, counted: str, metrics: dict[str, Any], out: Path, extra: str = "") -> None:
    """The line every `mmfaith score FAMILY` prints: what was scored in the family's nouns (`counted`: "12 pairs"),
    the model, its headline metrics (`headline`), the answers read, `extra` and where report.md is; then the
    answer-coverage warnings."""
    from mmfaith.evaluators import coverage

    family = families.get(family_name)
    print(f"scored {counted} of {metrics['provenance']['model']}: {headline(family, metrics)}; "
          f"{coverage.console(metrics['answers'])}{extra}; see {out / 'report.md'}")
    coverage.print_warnings(metrics["answers"])


def _report_explorer(out: Path, score_dirs: list[Path], labels: list[str]) -> str:
    """Writes the comparison's explorer from its score dirs' explorers; returns the line that says where it is, or
    the fix when a score dir has none."""
    from mmfaith.explorer.sources import write_report_explorer

    missing = [str(path) for path in score_dirs if not (path / "explorer" / "data.js").is_file()]
    if missing:
        return (f"no explorer: {', '.join(missing)} has none (scored without --dataset); write it with "
                f"`mmfaith view {missing[0]} --dataset SOURCE`, then `mmfaith view {out} --scores ...`.")
    return f"explorer: {write_report_explorer(out, score_dirs, labels, progress=sys.stderr.isatty())}"


def headline(family: families.Family, metrics: dict[str, Any]) -> str:
    """The family's first four declared metrics (`MetricInfo`, in declaration order) that a score's metrics.json
    holds as numbers, a signed one with its sign: from its `overall` block, or else from each block of `by_mode`
    ("specific: SDR 1.000, ...")."""
    blocks = ({"": metrics["overall"]} if "overall" in metrics
              else {f"{mode}: ": block.get("metrics", block) for mode, block in metrics.get("by_mode", {}).items()})
    parts = []
    for prefix, block in blocks.items():
        shown = [f"{metric.key} {block[metric.key]:{'+' if metric.kind == 'signed' else ''}.3f}"
                 for metric in family.metrics if isinstance(block.get(metric.key), (int, float))][:4]
        parts.append(prefix + (", ".join(shown) or "no metric defined"))
    return "; ".join(parts) or "no metric defined"


def _check_report_out(out: Path, score_dirs: list[Path], overwrite: bool) -> None:
    """Refuse an --out that is one of the score dirs, or a non-empty folder that is not an earlier report (it has
    no comparison.json), unless `overwrite` for the latter: as `score` refuses."""
    for score_dir in score_dirs:
        if out.resolve() == score_dir.resolve():
            raise MmfaithError(f"report --out {out}: is the score dir {score_dir}, whose report.md it would replace; "
                               "choose another --out.")
    if out.is_dir() and any(out.iterdir()) and not (out / "comparison.json").is_file() and not overwrite:
        raise MmfaithError(f"report --out {out}: not empty and not an earlier report; choose a new --out, or pass "
                           "--overwrite to write into it.")
