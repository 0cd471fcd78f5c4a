"""`mmfaith build vfaith`: its options and their translation into a `BuildRequest`.

Declared to the family registry through evaluators/vfaith/family.py; the shared CLI makes the
subparser and calls `run_build` with the parsed options.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith.errors import MmfaithError

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
    src.add_argument("--coco-annotations", type=Path, metavar="FILE", help="COCO instances JSON (default: embedded sample)")
    src.add_argument("--images", type=Path, metavar="DIR", help="folder of the images the annotations list")
    src.add_argument("--allow-noderivs", action="store_true",
                     help="also edit images whose license forbids derivatives (you then may not publish them)")
    src.add_argument("--max-pixels", type=int, default=None, help="refuse larger images (default 50,000,000)")
    what = parser.add_argument_group("how many pairs")
    what.add_argument("--per-template", type=int, default=5, metavar="N", help="pairs per question template")
    what.add_argument("--templates", default="color,count,existence,relation", metavar="LIST",
                      help="comma-separated question templates (default: all four)")
    what.add_argument("--per-image", type=int, default=2, metavar="N",
                      help="questions of each template tried per image (a seeded choice)")
    how = parser.add_argument_group("how")
    how.add_argument("--out", type=Path, required=True, metavar="BUILD_DIR", help="output folder (resumable)")
    how.add_argument("--seed", type=int, default=0, help="seed of every choice (same seed and inputs: same bytes)")
    how.add_argument("--inpainter", choices=("auto", "lama", "patchmatch", "telea", "ns"), default="auto",
                     help="auto: LaMa when --lama-model/LAMA_MODEL names a checkpoint, else PatchMatch, else Telea")
    how.add_argument("--lama-model", metavar="FILE", help="big-lama.pt TorchScript checkpoint (or set LAMA_MODEL)")
    how.add_argument("--workers", type=int, default=1, help="worker processes (one library thread each)")
    how.add_argument("--min-delta-e", type=float, default=12.0, help="visibility gate: mean delta E over the edited cue")
    how.add_argument("--min-fill-texture", type=float, default=None, metavar="RATIO",
                     help="fill gate: texture inside a filled hole over its surround (default 0.3; 0 turns it off)")
    how.add_argument("--dilation", type=int, default=7, help="pixels the inpainting hole grows beyond the mask")
    how.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_build(args: argparse.Namespace) -> int:
    """`mmfaith build vfaith`: the parsed options into a BuildRequest; prints the summary."""
    from mmfaith.builders.gates import MIN_FILL_TEXTURE
    from mmfaith.builders.inpainters import resolve_inpainter
    from mmfaith.builders.vfaith.build import BuildRequest, build_vfaith
    from mmfaith.images import DEFAULT_MAX_PIXELS

    templates = tuple(t.strip() for t in args.templates.split(",") if t.strip())
    if args.per_template < 0:
        raise MmfaithError(f"--per-template must be 0 or more, not {args.per_template}.")
    summary = build_vfaith(BuildRequest(
        out=args.out, annotations=args.coco_annotations, images=args.images, seed=args.seed,
        per_template=args.per_template, templates=templates, per_image=args.per_image,
        inpainter=resolve_inpainter(args.inpainter, args.lama_model), allow_noderivs=args.allow_noderivs,
        workers=args.workers, dilation=args.dilation, min_delta_e=args.min_delta_e,
        min_fill_texture=MIN_FILL_TEXTURE if args.min_fill_texture is None else args.min_fill_texture,
        max_pixels=DEFAULT_MAX_PIXELS if args.max_pixels is None else args.max_pixels,
        progress=not args.no_progress))
    made = sum(summary.accepted.values())
    rejected = ", ".join(f"{stage} {n}" for stage, n in sorted(summary.rejected.items())) or "none"
    print(f"built {made} pairs ({', '.join(f'{t} {n}' for t, n in summary.accepted.items())}) in {summary.out}; "
          f"rejected: {rejected} (see rejected.jsonl); gold letters {summary.letters}; "
          f"preview: {summary.out / 'preview.png'}")
    return 0
