"""`mmfaith build spd-faith`: its options and their translation into a `BuildRequest`.

Found by the family registry (`conventional_parts` in mmfaith/families.py); the shared CLI makes the
subparser and calls `run_build` with the parsed options.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith.builders.executors import add_executor_options, executor_choice
from mmfaith.cli_options import add_coco_source_options, add_inpaint_options, inpainting
from mmfaith.errors import MmfaithError

BUILD_EXAMPLE = """example (embedded COCO sample, offline):
  mmfaith build spd-faith --out out/spd --per-tier 2 --multi 2 --controls 2 --seed 0
then look at out/spd/preview.png and out/spd/records.jsonl."""


def add_build_options(spd: argparse.ArgumentParser) -> None:
    """The options of `mmfaith build spd-faith` (the shared CLI makes the subparser)."""
    spd.description = ("Plan, make and quality-gate SPD-Faith image pairs from COCO instance annotations. "
                       "With no source given, the COCO sample shipped with mmfaith is used.")
    spd.epilog = BUILD_EXAMPLE
    src = spd.add_argument_group("source")
    add_coco_source_options(src, images_help="folder of the images the annotations list (with --from-official: of the "
                                             "JSONL's canvases)")
    src.add_argument("--from-official", metavar="SOURCE",
                     help="import the official SPD-Faith-Bench instead of building: a Hub snapshot folder, a Hub id "
                          "ORG/NAME[@REVISION], or a GitHub-layout JSONL (canvases cut where the halves agree best)")
    src.add_argument("--max-pixels", type=int, default=None, help="refuse larger images (default 50,000,000)")
    what = spd.add_argument_group("how many pairs")
    what.add_argument("--per-tier", type=int, default=0, metavar="N", help="single-difference pairs per difficulty tier")
    what.add_argument("--multi", type=int, default=0, metavar="N", help="multi-difference pairs (2-5 edits), spread evenly")
    what.add_argument("--paper-mix", type=int, default=None, metavar="N",
                      help="N pairs in the paper's proportions (overrides --per-tier and --multi)")
    what.add_argument("--controls", type=int, default=0, metavar="N", help="control pairs with no difference")
    how = spd.add_argument_group("how")
    how.add_argument("--out", type=Path, required=True, metavar="BUILD_DIR", help="output folder (resumable)")
    how.add_argument("--seed", type=int, default=0, help="seed of every choice (same seed and inputs: same bytes)")
    how.add_argument("--planner", choices=("rule", "llm"), default="rule",
                     help="rule: deterministic, offline; llm: a model chooses the edits (--planner-model)")
    how.add_argument("--planner-model", help="model name for --planner llm")
    how.add_argument("--planner-base-url",
                     help="server of the planner model: an OpenAI-compatible base URL such as a vLLM server's "
                          "http://HOST:PORT/v1, or for Gemini the API root (the client adds /v1/models/...)")
    how.add_argument("--planner-timeout", type=float, default=120.0, metavar="SECONDS", help="per planner request")
    how.add_argument("--planner-max-retries", type=int, default=3, help="retries of a failed planner request")
    how.add_argument("--planner-provider", choices=("openai", "gemini"), default="openai",
                     help="protocol of the planner's server: OpenAI-compatible (e.g. vLLM) or Gemini")
    how.add_argument("--planner-api-key-env", metavar="NAME",
                     help="environment variable holding the planner's key (default OPENAI_API_KEY / GEMINI_API_KEY)")
    how.add_argument("--edit-types", default="color,remove,position", metavar="LIST",
                     help="comma-separated edit types the planner may use (default: all three)")
    how.add_argument("--recolor-people", action="store_true",
                     help="allow color edits of people (off by default: a recolored person looks painted)")
    add_executor_options(how)
    add_inpaint_options(how)
    how.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_build(args: argparse.Namespace) -> int:
    """`mmfaith build spd-faith`: the parsed options into a BuildRequest (or an official import); prints the summary."""
    if args.from_official is not None:
        return _run_import(args)
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
    executor = executor_choice(args)
    inpainter, min_fill_texture = inpainting(args)
    request = BuildRequest(
        out=args.out, annotations=args.coco_annotations, images=args.images, seed=args.seed,
        per_tier=args.per_tier, multi=args.multi, paper_mix=args.paper_mix, controls=args.controls,
        planner=planner, inpainter=inpainter,
        allow_noderivs=args.allow_noderivs, recolor_people=args.recolor_people, workers=executor.workers,
        executor=executor, dilation=args.dilation,
        min_delta_e=args.min_delta_e,
        min_fill_texture=min_fill_texture,
        max_pixels=DEFAULT_MAX_PIXELS if args.max_pixels is None else args.max_pixels,
        progress=not args.no_progress)
    summary = build_spd_faith(request)
    made = sum(summary.accepted.values())
    rejected = sum(summary.rejected.values())
    print(f"built {made} pairs in {summary.out} ({rejected} candidates rejected; see rejected.jsonl); "
          f"preview: {summary.out / 'preview.png'}")
    return 0


OFFICIAL_CONFLICTS = ("coco_annotations", "allow_noderivs", "max_pixels", "per_tier", "multi", "paper_mix", "controls",
                      "planner_model", "planner_base_url", "lama_model")


def _run_import(args: argparse.Namespace) -> int:
    """`--from-official SOURCE`: import the official release (builders/spd_faith/official.py), build nothing."""
    from mmfaith.builders.spd_faith.official import import_official

    given = [name for name in OFFICIAL_CONFLICTS if getattr(args, name) not in (None, False, 0)]
    given += ["planner"] if args.planner != "rule" else []
    given += ["inpainter"] if args.inpainter != "auto" else []
    if given:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in given)
        raise MmfaithError(f"--from-official imports the official release and builds nothing: drop {flags}.")
    summary = import_official(args.from_official, args.out, args.images)
    print(f"imported {summary.accepted} official pairs ({summary.origin}, revision {summary.revision}) into "
          f"{summary.out} ({len(summary.rejected)} rows rejected; see rejected.jsonl)")
    return 0
