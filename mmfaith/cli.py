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
from mmfaith.errors import MmfaithError
from mmfaith.evaluators import run_cli, score_cli

BUILD_EXAMPLE = """example (embedded COCO sample, offline):
  mmfaith build spd-faith --out out/spd --per-tier 2 --multi 2 --controls 2 --seed 0
then look at out/spd/preview.png and out/spd/records.jsonl."""


def _add_build(subparsers: argparse._SubParsersAction) -> None:
    build = subparsers.add_parser("build", help="build a benchmark family's candidate pairs into a build dir",
                                  description="Build candidate records and images for one benchmark family.")
    families = build.add_subparsers(dest="family", required=True, metavar="FAMILY")
    spd = families.add_parser(
        "spd-faith", help="SPD-Faith image pairs (color / remove / position edits) from COCO",
        description="Plan, make and quality-gate SPD-Faith image pairs from COCO instance annotations. "
                    "With no source given, the COCO sample shipped with mmfaith is used.",
        epilog=BUILD_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = spd.add_argument_group("source")
    src.add_argument("--coco-annotations", type=Path, metavar="FILE", help="COCO instances JSON (default: embedded sample)")
    src.add_argument("--images", type=Path, metavar="DIR", help="folder of the images the annotations list")
    src.add_argument("--allow-noderivs", action="store_true",
                     help="also edit images whose license forbids derivatives (you then may not publish them)")
    src.add_argument("--max-pixels", type=int, default=None, help="refuse larger images (default 50,000,000)")
    what = spd.add_argument_group("how many pairs")
    what.add_argument("--per-tier", type=int, default=0, metavar="N", help="single-difference pairs per difficulty tier")
    what.add_argument("--multi", type=int, default=0, metavar="N", help="multi-difference pairs (2-5 edits), spread evenly")
    what.add_argument("--paper-mix", type=int, default=None, metavar="N",
                      help="N pairs in the paper's proportions (overrides --per-tier and --multi)")
    what.add_argument("--controls", type=int, default=0, metavar="N", help="control pairs with no difference")
    how = spd.add_argument_group("how")
    how.add_argument("--out", type=Path, required=True, metavar="BUILD_DIR", help="output folder (resumable)")
    how.add_argument("--seed", type=int, default=0)
    how.add_argument("--planner", choices=("rule", "llm"), default="rule")
    how.add_argument("--planner-model", help="model name for --planner llm")
    how.add_argument("--planner-base-url",
                     help="server of the planner model: an OpenAI-compatible base URL such as a vLLM server's "
                          "http://HOST:PORT/v1, or for Gemini the API root (the client adds /v1/models/...)")
    how.add_argument("--planner-timeout", type=float, default=120.0, metavar="SECONDS", help="per planner request")
    how.add_argument("--planner-max-retries", type=int, default=3, help="retries of a failed planner request")
    how.add_argument("--planner-provider", choices=("openai", "gemini"), default="openai")
    how.add_argument("--planner-api-key-env", metavar="NAME",
                     help="environment variable holding the planner's key (default OPENAI_API_KEY / GEMINI_API_KEY)")
    how.add_argument("--edit-types", default="color,remove,position", metavar="LIST",
                     help="comma-separated edit types the planner may use (default: all three)")
    how.add_argument("--inpainter", choices=("auto", "lama", "telea", "ns"), default="auto",
                     help="auto: LaMa when --lama-model/LAMA_MODEL names a checkpoint, else OpenCV Telea")
    how.add_argument("--lama-model", metavar="FILE", help="big-lama.pt TorchScript checkpoint (or set LAMA_MODEL)")
    how.add_argument("--workers", type=int, default=1, help="worker processes (one library thread each)")
    how.add_argument("--min-delta-e", type=float, default=12.0, help="visibility gate: mean delta E over the edited region")
    how.add_argument("--dilation", type=int, default=7, help="pixels the inpainting hole grows beyond the mask")
    how.add_argument("--no-progress", action="store_true", help="no progress bar")
    spd.set_defaults(handler=_run_build_spd)


def _run_build_spd(args: argparse.Namespace) -> int:
    from mmfaith.builders.inpainters import resolve_inpainter
    from mmfaith.builders.spd_faith.planners import PlannerSpec
    from mmfaith.builders.spd_faith.planning import EDIT_TYPES
    from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
    from mmfaith.clients import ModelEndpoint
    from mmfaith.images import DEFAULT_MAX_PIXELS

    edit_types = tuple(t.strip() for t in args.edit_types.split(",") if t.strip())
    unknown = [t for t in edit_types if t not in EDIT_TYPES]
    if unknown or not edit_types:
        raise MmfaithError(f"--edit-types {args.edit_types!r}: use a comma-separated subset of {', '.join(EDIT_TYPES)}.")
    edit_types = tuple(t for t in EDIT_TYPES if t in edit_types)
    planner = PlannerSpec("rule", None, edit_types)
    if args.planner == "llm":
        if not args.planner_model:
            raise MmfaithError("--planner llm needs --planner-model NAME (and --planner-base-url for a local server).")
        endpoint = ModelEndpoint(args.planner_provider, args.planner_model, args.planner_base_url,
                                 args.planner_api_key_env, args.planner_timeout, args.planner_max_retries)
        planner = PlannerSpec("llm", endpoint, edit_types)
    for name in ("per_tier", "multi", "controls", "paper_mix"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise MmfaithError(f"--{name.replace('_', '-')} must be 0 or more, not {value}.")
    if args.workers < 1:
        raise MmfaithError(f"--workers must be 1 or more, not {args.workers}.")
    request = BuildRequest(
        out=args.out, annotations=args.coco_annotations, images=args.images, seed=args.seed,
        per_tier=args.per_tier, multi=args.multi, paper_mix=args.paper_mix, controls=args.controls,
        planner=planner, inpainter=resolve_inpainter(args.inpainter, args.lama_model),
        allow_noderivs=args.allow_noderivs, workers=args.workers, dilation=args.dilation,
        min_delta_e=args.min_delta_e, max_pixels=args.max_pixels or DEFAULT_MAX_PIXELS,
        progress=not args.no_progress)
    summary = build_spd_faith(request)
    made = sum(summary.accepted.values())
    rejected = sum(summary.rejected.values())
    print(f"built {made} pairs in {summary.out} ({rejected} candidates rejected; see rejected.jsonl); "
          f"preview: {summary.out / 'preview.png'}")
    return 0


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
    args = parser().parse_args(argv)
    try:
        return args.handler(args)
    except MmfaithError as exc:
        print(f"mmfaith: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mmfaith: interrupted; re-run the same command to resume.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
