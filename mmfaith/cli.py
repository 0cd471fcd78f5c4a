"""The `mmfaith` command: one verb per stage of the flow, families dispatched from the registry.

This module only parses arguments and calls the stage's entry function; errors users can meet
(MmfaithError) print as one line and exit with status 2. Verbs that act on one family
(`build`, `run`, `score`) take it as their first word and list the registered families in their
help; `mmfaith families` describes each.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mmfaith import __version__
from mmfaith.annotation import cli as annotate_cli
from mmfaith.cli_help import HelpFormatter, HelpParser, family_parsers
from mmfaith.errors import MmfaithError
from mmfaith.evaluators import evaluate_cli, run_cli, score_cli
from mmfaith.evaluators.harness import cli as harness_cli
from mmfaith.explorer import cli as explorer_cli
from mmfaith.families import Family, all_families
from mmfaith.redact import redact
from mmfaith.release import cli as release_cli


def _add_build(subparsers: argparse._SubParsersAction) -> None:
    family_parsers(subparsers, "build", "build a benchmark family's candidate records into a build dir",
                   "Build candidate records and images for one benchmark family.",
                   [family for family in all_families() if family.builds],
                   help_of=lambda family: f"{family.title}: {family.summary}", populate=_populate_build)


def _populate_build(family: Family, parser: argparse.ArgumentParser) -> None:
    add_build_options, build = family.part("add_build_options", "builder"), family.part("build", "builder")
    add_build_options(parser)
    parser.set_defaults(handler=build)


def _add_families(subparsers: argparse._SubParsersAction) -> None:
    listing = subparsers.add_parser(
        "families", help="list the benchmark families with their records, probes, metrics and reference models",
        description="Every registered family: what its records are, which probes a run asks, which metrics a "
                    "score reports (meaning, better direction, range, definition) and its reference models.",
        formatter_class=HelpFormatter)
    listing.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    listing.set_defaults(handler=_run_families)


def _run_families(args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([_family_summary(family) for family in all_families()], indent=2))
        return 0
    for family in all_families():
        print(f"{family.name}: {family.title}, {family.summary}")
        print(f"  records: {', '.join(family.record_kinds)} (schemas/<name>.schema.json)")
        print("  probes:")
        for probe in family.probes:
            print(f"    {probe.name:<18} {probe.asks}")
        print("  metrics:")
        for metric in family.metrics:
            span = "-" if metric.range is None else f"[{metric.range[0]:g}, {metric.range[1]:g}]"
            print(f"    {metric.key:<24} {metric.better:<7} better  {span:<9} {metric.meaning}")
        print(f"  reference models: {', '.join(f'{name} ({what})' for name, what in family.reference_models)}")
    return 0


def _family_summary(family: Family) -> dict[str, object]:
    return {"name": family.name, "title": family.title, "summary": family.summary,
            "record_kinds": list(family.record_kinds),
            "probes": [{"name": probe.name, "asks": probe.asks} for probe in family.probes],
            "metrics": [{"key": m.key, "name": m.name, "meaning": m.meaning, "better": m.better,
                         "range": None if m.range is None else list(m.range), "doc": m.doc, "kind": m.kind}
                        for m in family.metrics],
            "reference_models": [{"name": name, "what": what} for name, what in family.reference_models]}


def _add_quickstart(subparsers: argparse._SubParsersAction) -> None:
    quick = subparsers.add_parser(
        "quickstart", help="the whole flow offline: every family, two reference roles over HTTP, profiles, comparison",
        description="Without --family: evaluate the default suite (all four families on the embedded COCO sample, "
                    "built once and cached) for the oracle and the prior, each served on 127.0.0.1 and run over "
                    "HTTP as `mmfaith evaluate` runs your model, and compare the two profiles. With --family F: "
                    "one family's build, every one of its reference models run and scored, one report.",
        formatter_class=HelpFormatter)
    quick.add_argument("--out", type=Path, required=True, metavar="DIR",
                       help="folder for the profiles and the comparison (or, with --family, the build, runs, "
                            "scores and report)")
    quick.add_argument("--family", choices=[family.name for family in all_families()],
                       help="one family's flow instead of the suite")
    spd = quick.add_argument_group("--family spd-faith and vfaith: the build's size")
    spd.add_argument("--per-tier", type=int, default=2, metavar="N", help="spd-faith: single-difference pairs per tier")
    spd.add_argument("--multi", type=int, default=4, metavar="N", help="spd-faith: pairs with 2-5 differences")
    spd.add_argument("--controls", type=int, default=2, metavar="N", help="spd-faith: control pairs with no difference")
    spd.add_argument("--per-template", type=int, default=2, metavar="N", help="vfaith: pairs per question template")
    quick.add_argument("--workers", type=int, metavar="N",
                       help="worker processes: without --family, for the families' builds and evaluations side by "
                            "side (default: the cores this process may use, at most one per family); with --family "
                            "spd-faith or vfaith, for the build (default 1)")
    quick.add_argument("--seed", type=int, default=0, help="build and bootstrap seed (--family)")
    quick.add_argument("--no-progress", action="store_true", help="no progress bars")
    quick.set_defaults(handler=_run_quickstart)


def _run_quickstart(args: argparse.Namespace) -> int:
    from mmfaith.evaluators.quickstart import (QuickstartRequest, quickstart, quickstart_family, quickstart_suite,
                                               quickstart_vfaith)

    progress = not args.no_progress
    if args.family is None:
        profiles, comparison = quickstart_suite(args.out, progress, args.workers)
        for name, entry in json.loads((profiles[0] / "profile.json").read_text(encoding="utf-8"))["families"].items():
            if entry["status"] != "ok":
                print(f"{name}: not scored: {entry['error']}")
        print("profiles: " + ", ".join(str(p / "profile.md") for p in profiles) + " (profile.json and profile.png "
              "beside each)")
        print(f"comparison: {comparison / 'report.md'}")
        explorer = comparison / "index.html"
        print(f"explorer: {explorer}" if explorer.is_file() else
              f"explorer: open {comparison / 'report.md'} (or `mmfaith view {comparison}` where it is installed)")
        return 0
    if args.family == "vfaith":
        report = quickstart_vfaith(args.out, args.per_template, args.seed, args.workers or 1, progress)
        print(f"report: {report / 'report.md'}; the pairs: {args.out / 'build' / 'preview.png'}; "
              f"explore the items in a browser: {report / 'index.html'}")
        return 0
    if args.family == "spd-faith":
        report = quickstart(QuickstartRequest(out=args.out, per_tier=args.per_tier, multi=args.multi,
                                              controls=args.controls, seed=args.seed, workers=args.workers or 1,
                                              progress=progress))
        print(f"report: {report / 'report.md'} (plots beside it); the pairs: {args.out / 'build' / 'preview.png'}; "
              f"explore the items in a browser: {report / 'index.html'}")
        return 0
    report = quickstart_family(args.family, args.out, args.seed, progress)
    print(f"report: {report / 'report.md'}; the build: {args.out / 'build'}; "
          f"explore the items in a browser: {report / 'index.html'}")
    return 0


def parser() -> argparse.ArgumentParser:
    root = HelpParser(
        prog="mmfaith", description="Build, verify, release, load and score benchmarks of faithful multimodal reasoning.")
    root.add_argument("--version", action="version", version=f"mmfaith {__version__}")
    root.add_argument("--debug", action="store_true",
                      help="show the traceback of an error instead of its one line (or set MMFAITH_DEBUG=1)")
    subparsers = root.add_subparsers(dest="verb", required=True, metavar="VERB")
    _add_quickstart(subparsers)
    _add_families(subparsers)
    _add_build(subparsers)
    evaluate_cli.register(subparsers)
    run_cli.register(subparsers)
    score_cli.register(subparsers)
    release_cli.register(subparsers)
    annotate_cli.register(subparsers)
    harness_cli.register(subparsers)
    explorer_cli.register(subparsers)
    return root


def _run_verb(args: argparse.Namespace) -> int:
    """The verb's handler; when it fails, an empty --out folder it made is removed (`remove_if_made_empty`)."""
    out = getattr(args, "out", None)
    existed = out is None or Path(out).exists()
    try:
        return args.handler(args)
    except BaseException:
        from mmfaith.outdir import remove_if_made_empty

        if out is not None:
            remove_if_made_empty(Path(out), existed)
        raise


def main(argv: list[str] | None = None) -> int:
    """Run one verb. A user-caused error (MmfaithError, or an OSError such as a path that cannot be
    read or written) prints as one `mmfaith: error: ...` line and returns 2; with `--debug` (or
    MMFAITH_DEBUG=1 in the environment) it is re-raised with its traceback instead."""
    import os

    args = parser().parse_args(argv)
    debug = args.debug or os.environ.get("MMFAITH_DEBUG") == "1"
    try:
        return _run_verb(args)
    except MmfaithError as exc:
        if debug:
            raise
        print(f"mmfaith: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the user gave that the OS refuses: not a bug of mmfaith
        if debug:
            raise
        where = " -> ".join(str(name) for name in (exc.filename, exc.filename2) if name is not None)
        reason = exc.strerror or str(exc)
        print(f"mmfaith: error: {redact(where + ': ' if where else '')}{reason}; check the path, its permissions and free "
              "space (--debug shows the traceback).", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mmfaith: interrupted; re-run the same command to resume.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
