"""The `mmfaith` command: one verb per stage of DESIGN.md's flow.

This module only parses arguments and calls the stage's entry function; errors users can meet
(MmfaithError) print as one line and exit with status 2.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmfaith import __version__
from mmfaith.release import cli as release_cli
from mmfaith.annotation import cli as annotate_cli
from mmfaith.cli_help import HelpFormatter
from mmfaith.errors import MmfaithError
from mmfaith.families import all_families
from mmfaith.evaluators import run_cli, score_cli

def _add_build(subparsers: argparse._SubParsersAction) -> None:
    build = subparsers.add_parser("build", help="build a benchmark family's candidate records into a build dir",
                                  description="Build candidate records and images for one benchmark family. "
                                              f"Families: {_family_list('build')}.")
    families = build.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family in all_families():
        parts = family.parts()
        if parts.add_build_options is None or parts.build is None:
            continue
        parser = families.add_parser(family.name, help=f"{family.title}: {family.summary}", formatter_class=HelpFormatter)
        parts.add_build_options(parser)
        parser.set_defaults(handler=parts.build)


def _add_quickstart(subparsers: argparse._SubParsersAction) -> None:
    quick = subparsers.add_parser(
        "quickstart", help="the whole flow offline: build, run three reference models over HTTP, score, report",
        description="Build a small SPD-Faith set from the embedded COCO sample, serve the oracle, blind and "
                    "pixel-diff reference models on 127.0.0.1, run each through the real client, score them, "
                    "and write one report comparing the three.")
    quick.add_argument("--out", type=Path, required=True, metavar="DIR")
    quick.add_argument("--per-tier", type=int, default=2, metavar="N")
    quick.add_argument("--multi", type=int, default=4, metavar="N")
    quick.add_argument("--controls", type=int, default=2, metavar="N")
    quick.add_argument("--seed", type=int, default=0)
    quick.add_argument("--workers", type=int, default=1)
    quick.add_argument("--no-progress", action="store_true")
    quick.set_defaults(handler=_run_quickstart)


def _run_quickstart(args: argparse.Namespace) -> int:
    from mmfaith.evaluators.quickstart import QuickstartRequest, quickstart

    report = quickstart(QuickstartRequest(out=args.out, per_tier=args.per_tier, multi=args.multi,
                                          controls=args.controls, seed=args.seed, workers=args.workers,
                                          progress=not args.no_progress))
    print(f"report: {report / 'report.md'} (plots beside it); the pairs: {args.out / 'build' / 'preview.png'}")
    return 0


def _family_list(stage: str) -> str:
    return ", ".join(family.name for family in all_families())


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="mmfaith", description="Build, verify, release, load and score benchmarks of faithful multimodal reasoning.")
    root.add_argument("--version", action="version", version=f"mmfaith {__version__}")
    subparsers = root.add_subparsers(dest="verb", required=True, metavar="VERB")
    _add_quickstart(subparsers)
    _add_build(subparsers)
    run_cli.register(subparsers)
    score_cli.register(subparsers)
    release_cli.register(subparsers)
    annotate_cli.register(subparsers)
    return root


def main(argv: list[str] | None = None) -> int:
    """Run one verb. A user-caused error (MmfaithError, or an OSError such as a path that cannot be
    read or written) prints as one `mmfaith: error: ...` line and returns 2; with MMFAITH_DEBUG=1 in
    the environment it is re-raised with its traceback instead."""
    import os

    args = parser().parse_args(argv)
    debug = os.environ.get("MMFAITH_DEBUG") == "1"
    try:
        return args.handler(args)
    except MmfaithError as exc:
        if debug:
            raise
        print(f"mmfaith: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the user gave that the OS refuses: not a bug of mmfaith
        if debug:
            raise
        where = " -> ".join(str(name) for name in (exc.filename, exc.filename2) if name is not None)
        reason = exc.strerror or str(exc)
        print(f"mmfaith: error: {where + ': ' if where else ''}{reason}; check the path, its permissions and free "
              "space (MMFAITH_DEBUG=1 shows the traceback).", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mmfaith: interrupted; re-run the same command to resume.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
