"""The `mmfaith release` and `mmfaith verify` verbs: argument parsing only; the family's release comes from the registry."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from mmfaith.cli_help import HelpFormatter
from mmfaith.errors import MmfaithError

if TYPE_CHECKING:
    from mmfaith.release.writer import ReleaseRequest

RELEASE_EXAMPLE = """examples:
  mmfaith release out/build --out out/release --name ORG/my-benchmark --version 1.0.0 --include all
  mmfaith release out/suite --out out/suite-release --name ORG/my-suite --version 1.0.0 --include all
  mmfaith verify out/release
  HF_TOKEN=... mmfaith release out/build --out out/release-1.1.0 --name ORG/my-benchmark --version 1.1.0 \\
      --previous ORG/my-benchmark@v1.0.0 --push --repo ORG/my-benchmark"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `release` and `verify` to the `mmfaith` parser."""
    release = subparsers.add_parser(
        "release", help="turn a build dir into a Hugging Face dataset repo (parquet, card, manifest); optionally push it",
        description="Write the Hub layout of a build's release (README.md card, data/<config>/*.parquet with "
                    "the images inside, manifest.json naming the family, with every hash) to a new folder, and "
                    "with --push upload it in one commit tagged vX.Y.Z. The family is the one the build names. "
                    "A suite gives one repo: each family's release under families/FAMILY, one card presenting the "
                    "suite, one config per family.",
        epilog=RELEASE_EXAMPLE, formatter_class=HelpFormatter)
    release.add_argument("build", metavar="BUILD_DIR|SUITE",
                         help="output of `mmfaith build FAMILY`; or a suite (`default`, a suite file, or the folder of "
                              "`mmfaith suite build`): one repo, one config per family")
    release.add_argument("--out", type=Path, required=True, metavar="RELEASE_DIR", help="new (or empty) folder")
    release.add_argument("--name", required=True, metavar="[ORG/]NAME", help="dataset name the card's examples load")
    release.add_argument("--version", required=True, metavar="X.Y.Z", help="release version; the tag is vX.Y.Z")
    release.add_argument("--include", choices=("accepted", "all"), default="accepted",
                         help="accepted: verified records only (default); all: verified and pending (the card says so)")
    release.add_argument("--allow-noderivs", action="store_true",
                         help="also release edited NoDerivs images (the card says so); you must have the right to")
    release.add_argument("--previous", metavar="RELEASE_DIR|ORG/NAME[@REV]",
                         help="the previous release, for the card's changelog (records added, removed, changed)")
    release.add_argument("--shard-rows", type=int, default=None, metavar="N",
                         help="rows per parquet shard (default 500); memory does not grow with it")
    release.add_argument("--family", metavar="NAME",
                         help="the build's family (default: the one its build.json names; see `mmfaith families`)")
    release.add_argument("--push", action="store_true", help="upload to the Hub (token from HF_TOKEN) and tag vX.Y.Z")
    release.add_argument("--repo", metavar="ORG/NAME", help="Hub dataset repo for --push")
    release.set_defaults(handler=_run_release)

    verify = subparsers.add_parser(
        "verify", help="re-check every hash of a release's manifest and the schema of every row",
        description="Re-hash every file listed in RELEASE_DIR/manifest.json and schema-check every parquet row "
                    "(a suite release: its card, and every family's release in it).")
    verify.add_argument("release", type=Path, metavar="RELEASE_DIR")
    verify.set_defaults(handler=_run_verify)


def _run_release(args: argparse.Namespace) -> int:
    from mmfaith import families
    from mmfaith.release.declaration import declaration_of
    from mmfaith.release.suite_release import is_suite_source
    from mmfaith.release.writer import SHARD_ROWS, ReleaseRequest, write_release

    if args.push and not args.repo:
        raise MmfaithError("--push needs --repo ORG/NAME (the Hub dataset repo to upload to).")
    if args.repo and not args.push:
        raise MmfaithError("--repo is only used with --push; add --push or drop --repo.")
    token = os.environ.get("HF_TOKEN") if args.push else None
    if args.push and not token:
        raise MmfaithError("--push needs a Hub token in the HF_TOKEN environment variable (write access to --repo).")
    request = ReleaseRequest(
        build=Path(args.build), out=args.out, name=args.name, version=args.version, include=args.include,
        allow_noderivs=args.allow_noderivs, previous=args.previous, shard_rows=args.shard_rows or SHARD_ROWS)
    if is_suite_source(args.build):
        _release_suite(args, request)
    else:
        declaration = declaration_of(args.family or families.family_of_dataset(request.build))
        summary = write_release(declaration, request)
        rows = ", ".join(f"{config} {n}" for config, n in summary.rows.items())
        left_out = ", ".join(f"{reason} {n}" for reason, n in summary.excluded.items()) or "none"
        print(f"released {summary.records} {summary.noun} to {summary.out} (rows per config: {rows}; left out: "
              f"{left_out}); check it with: mmfaith verify {summary.out}")
    if args.push:
        from mmfaith.release.push import push_release

        pushed = push_release(args.out, args.repo, token=token)
        print(f"pushed {args.repo} commit {pushed.commit} tagged {pushed.tag}: {pushed.url}")
    return 0


def _release_suite(args: argparse.Namespace, request: ReleaseRequest) -> None:
    """`mmfaith release SUITE`: every family of the suite into one repo (release/suite_release.py)."""
    from mmfaith.release.suite_release import write_suite_release
    from mmfaith.suite import load_suite

    if args.family:
        raise MmfaithError(f"--family is for a build dir; {args.build} is a suite, whose families it names.")
    summary = write_suite_release(load_suite(args.build), request)
    shown = "; ".join(f"{name}: {s.records} {s.noun} as config{'s' if len(summary.configs[name]) > 1 else ''} "
                      + ", ".join(f"{config} ({', '.join(splits)})" for config, splits in summary.configs[name].items())
                      for name, s in summary.released.items())
    print(f"released suite {args.build} to {summary.out} ({shown}); check it with: mmfaith verify {summary.out}")


def _run_verify(args: argparse.Namespace) -> int:
    from mmfaith.release.suite_release import verify_folder

    report = verify_folder(args.release)
    if report.problems:
        shown = "\n  ".join(report.problems[:20])
        more = f"\n  ... and {len(report.problems) - 20} more" if len(report.problems) > 20 else ""
        raise MmfaithError(f"{args.release}: {len(report.problems)} problem(s):\n  {shown}{more}")
    print(f"{args.release}: OK ({report.files} files, {report.rows} rows: every hash and row checked)")
    return 0
