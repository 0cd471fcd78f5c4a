"""`mmfaith build vfaith`: its options and their translation into a `BuildRequest`.

Declared to the family registry through evaluators/vfaith/family.py; the shared CLI makes the
subparser and calls `run_build` with the parsed options.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith.builders.executors import add_executor_options, executor_choice
from mmfaith.cli_options import add_coco_source_options, add_inpaint_options, inpainting
from mmfaith.errors import MmfaithError
from mmfaith.gold_balance import DEFAULT_MARGIN

BUILD_EXAMPLE = """example (embedded COCO sample, offline):
  mmfaith build vfaith --out out/vfaith --per-template 3 --seed 0
then look at out/vfaith/preview.png, records.jsonl and perception.jsonl."""


def add_build_options(parser: argparse.ArgumentParser) -> None:
    """The options of `mmfaith build vfaith` (the shared CLI makes the subparser)."""
    parser.description = ("Make VFaith pairs offline from COCO instance annotations: questions from the shared "
                          "templates (colour, count, existence, relation), each with an edit of its one cue that makes "
                          "another option correct, quality-gated; plus the perception subset. With no source given, the "
                          "COCO sample shipped with mmfaith is used.")
    parser.epilog = BUILD_EXAMPLE
    src = parser.add_argument_group("source")
    add_coco_source_options(src)
    src.add_argument("--max-pixels", type=int, default=None, help="refuse larger images (default 50,000,000)")
    what = parser.add_argument_group("how many pairs")
    what.add_argument("--per-template", type=int, default=5, metavar="N", help="pairs per question template")
    what.add_argument("--templates", default="color,count,existence,relation", metavar="LIST",
                      help="comma-separated question templates (default: all four)")
    what.add_argument("--per-image", type=int, default=2, metavar="N",
                      help="questions of each template tried per image (a seeded choice)")
    cue = parser.add_argument_group("cue-driven, from any VQA dataset (instead of COCO; docs/vfaith.md)")
    cue.add_argument("--source", metavar="DATASET",
                     help="a Hugging Face dataset folder, parquet file(s) or Hub id with image, question, options, answer")
    cue.add_argument("--columns", metavar="MAP", help="image=COL,question=COL,options=COL,answer=COL[,category=COL]")
    cue.add_argument("--split", default="test", help="split of a Hub id (default test)")
    cue.add_argument("--limit", type=int, metavar="N", help="only the first N rows")
    for role, what in (("reasoner", "marks the visual cues <vcues_i>"), ("suggester", "proposes the cue edit"),
                       ("judge", "passes or fails a suggestion")):
        cue.add_argument(f"--{role}-model", metavar="NAME", help=f"chat model that {what}")
        cue.add_argument(f"--{role}-base-url", metavar="URL", help=f"OpenAI-compatible base URL of the {role}")
    cue.add_argument("--editor", choices=("openai", "gemini"), default="openai",
                     help="image editor protocol: OpenAI image edits (gpt-image-1) or Gemini generateContent")
    cue.add_argument("--editor-model", default="gpt-image-1", metavar="NAME", help="image editing model")
    cue.add_argument("--editor-base-url", metavar="URL", help="a server speaking the editor's protocol")
    cue.add_argument("--api-key-env", metavar="NAME",
                     help="environment variable holding the keys (default OPENAI_API_KEY / GEMINI_API_KEY)")
    cue.add_argument("--max-tries", type=int, default=5, help="suggestions per row before it is rejected")
    cue.add_argument("--outside-tolerance", type=float, default=0.05, metavar="SHARE",
                     help="share of pixels outside the cue's box a regenerating editor may change")
    cue.add_argument("--category", choices=("RWS", "REA", "PFK", "CRE", "TIF"), default="RWS",
                     help="the category of every row when --columns names no category column")
    cue.add_argument("--source-license", default="unknown", metavar="NAME", help="license of the source dataset")
    how = parser.add_argument_group("how")
    how.add_argument("--out", type=Path, required=True, metavar="BUILD_DIR", help="output folder (resumable)")
    how.add_argument("--seed", type=int, default=0, help="seed of every choice (same seed and inputs: same bytes)")
    add_executor_options(how)
    add_inpaint_options(how, edited="the edited cue")
    how.add_argument("--gold-margin", type=float, default=DEFAULT_MARGIN, metavar="X",
                     help="cap on each template's majority gold share: chance + X (candidates beyond are rejected)")
    how.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_build(args: argparse.Namespace) -> int:
    """`mmfaith build vfaith`: the parsed options into a BuildRequest; prints the summary."""
    from mmfaith.builders.vfaith.build import BuildRequest, build_vfaith
    from mmfaith.gold_balance import summary_line
    from mmfaith.images import DEFAULT_MAX_PIXELS

    if args.source is not None:
        return _run_cue_driven(args)
    templates = tuple(t.strip() for t in args.templates.split(",") if t.strip())
    if args.per_template < 0:
        raise MmfaithError(f"--per-template must be 0 or more, not {args.per_template}.")
    if not 0 <= args.gold_margin <= 1:
        raise MmfaithError(f"--gold-margin must be in [0, 1], not {args.gold_margin}.")
    inpainter, min_fill_texture = inpainting(args)
    summary = build_vfaith(BuildRequest(
        out=args.out, annotations=args.coco_annotations, images=args.images, seed=args.seed,
        per_template=args.per_template, templates=templates, per_image=args.per_image,
        inpainter=inpainter, allow_noderivs=args.allow_noderivs,
        workers=args.workers, executor=executor_choice(args), dilation=args.dilation, min_delta_e=args.min_delta_e,
        min_fill_texture=min_fill_texture,
        max_pixels=DEFAULT_MAX_PIXELS if args.max_pixels is None else args.max_pixels,
        progress=not args.no_progress, gold_margin=args.gold_margin))
    made = sum(summary.accepted.values())
    rejected = ", ".join(f"{stage} {n}" for stage, n in sorted(summary.rejected.items())) or "none"
    print(f"built {made} pairs ({', '.join(f'{t} {n}' for t, n in summary.accepted.items())}) in {summary.out}; "
          f"rejected: {rejected} (see rejected.jsonl); gold letters {summary.letters}; "
          f"preview: {summary.out / 'preview.png'}")
    print(summary_line(summary.gold))
    return 0


def _run_cue_driven(args: argparse.Namespace) -> int:
    """`--source`: the cue-driven pipeline (builders/vfaith/cue_driven.py)."""
    from mmfaith.builders.vfaith.cue_driven import CueBuildRequest, Roles, build_cue_driven, parse_columns
    from mmfaith.clients import ModelEndpoint

    if not args.columns:
        raise MmfaithError("--source needs --columns image=COL,question=COL,options=COL,answer=COL[,category=COL].")
    models = {}
    for role in ("reasoner", "suggester", "judge"):
        model = getattr(args, f"{role}_model")
        if not model:
            raise MmfaithError(f"--source needs --{role}-model NAME (and --{role}-base-url for a local server).")
        models[role] = ModelEndpoint("openai", model, getattr(args, f"{role}_base_url"), args.api_key_env)
    editor = ModelEndpoint(args.editor, args.editor_model, args.editor_base_url, args.api_key_env)
    counts = build_cue_driven(CueBuildRequest(
        out=args.out, source=args.source, columns=parse_columns(args.columns), split=args.split, limit=args.limit,
        roles=Roles(models["reasoner"], models["suggester"], models["judge"], editor), seed=args.seed,
        max_tries=args.max_tries, min_delta_e=args.min_delta_e, outside_tolerance=args.outside_tolerance,
        category=args.category, license_name=args.source_license, progress=not args.no_progress))
    print(f"built {counts['accepted']} pairs from {counts['rows']} rows of {args.source} in {args.out}; rejected: "
          f"{counts['rejected_by_stage'] or 'none'} (see rejected.jsonl)")
    return 0
