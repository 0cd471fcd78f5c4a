"""`mmfaith build crm`: its options and their translation into a `CrmBuildRequest`."""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith.builders.executors import add_executor_options, executor_choice
from mmfaith.cli_options import add_coco_source_options
from mmfaith.errors import MmfaithError
from mmfaith.gold_balance import DEFAULT_MARGIN

BUILD_EXAMPLE = """example (embedded COCO sample, offline):
  mmfaith build crm --out out/crm --max-items 20 --mask-style black,blur --seed 0
then look at out/crm/records.jsonl and out/crm/variants/."""


def _listed(text: str, allowed: tuple[str, ...], flag: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [part for part in chosen if part not in allowed]
    if unknown or not chosen:
        raise MmfaithError(f"{flag} {text!r}: use a comma-separated subset of {', '.join(allowed)}.")
    return tuple(part for part in allowed if part in chosen)


def add_build_options(parser: argparse.ArgumentParser) -> None:
    """The options of `mmfaith build crm` (the shared CLI makes the subparser)."""
    parser.description = ("Mask the evidence regions of questions (specific) and regions of the same sizes elsewhere "
                          "(random), in one or several styles, and gate every variant. With no source given, "
                          "questions come from the COCO sample shipped with mmfaith.")
    parser.epilog = BUILD_EXAMPLE
    src = parser.add_argument_group("source (default: the embedded COCO sample)")
    add_coco_source_options(src, images_help="its images folder (with --visargs: where the row's images are, default "
                                             "FOLDER/images)", edits="mask")
    src.add_argument("--visargs", type=Path, metavar="PATH",
                     help="VisArgs-style data: a folder with annotation.json/.jsonl or a .parquet file")
    src.add_argument("--columns", metavar="MAP",
                     help="column mapping for --visargs, e.g. image=url,premises=visual_premises,boxes=b_box,"
                          "answer=conclusion,id=row_id (these are the defaults, id: the row number)")
    src.add_argument("--question-template", metavar="TEXT", help="the question asked of --visargs rows")
    src.add_argument("--license", default="unknown", metavar="NAME", dest="license_name",
                     help="license name of --visargs images (one containing NoDerivs is refused)")
    src.add_argument("--templates", default=",".join(("color", "count", "existence", "relation")), metavar="LIST",
                     help="COCO question templates to use")
    src.add_argument("--per-image", type=int, default=2, metavar="N", help="COCO questions per image at most")
    how = parser.add_argument_group("how")
    how.add_argument("--out", type=Path, required=True, metavar="BUILD_DIR", help="output folder (resumable)")
    how.add_argument("--max-items", type=int, default=50, metavar="N", help="items to make")
    how.add_argument("--seed", type=int, default=0, help="seed of questions, random placements and noise")
    how.add_argument("--mask-mode", default="specific,random", metavar="LIST", help="specific, random or both")
    how.add_argument("--mask-style", default="black", metavar="LIST",
                     help="one or several of black, gray, mean, blur, noise (each makes its own variants)")
    how.add_argument("--mask-shape", choices=("box", "segment"), default="box",
                     help="mask the evidence's box, or its instance mask (COCO only)")
    how.add_argument("--margin", type=int, default=8, metavar="PX", help="random boxes stay this far from the evidence")
    how.add_argument("--max-tries", type=int, default=2000, help="random placement draws per item before rejecting it")
    how.add_argument("--gold-margin", type=float, default=DEFAULT_MARGIN, metavar="X",
                     help="cap on each template's majority gold share: chance + X (candidates beyond are rejected)")
    how.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_executor_options(how)


def run_build(args: argparse.Namespace) -> int:
    """`mmfaith build crm`: the parsed options into a CrmBuildRequest; prints the summary."""
    from mmfaith.builders.coco_questions import TEMPLATES
    from mmfaith.builders.crm.build import CrmBuildRequest, build_crm
    from mmfaith.builders.crm.sources import ColumnMap
    from mmfaith.builders.crm.variants import MODES, MaskSettings
    from mmfaith.builders.masks import MASK_STYLES
    from mmfaith.gold_balance import summary_line

    if not 0 <= args.gold_margin <= 1:
        raise MmfaithError(f"--gold-margin must be in [0, 1], not {args.gold_margin}.")
    if args.per_image < 1 or args.margin < 0 or args.max_tries < 1:
        raise MmfaithError("--per-image and --max-tries must be 1 or more, --margin 0 or more.")
    mask = MaskSettings(seed=args.seed, styles=_listed(args.mask_style, MASK_STYLES, "--mask-style"),
                        modes=_listed(args.mask_mode, MODES, "--mask-mode"), shape=args.mask_shape,
                        margin=args.margin, max_tries=args.max_tries)
    summary = build_crm(CrmBuildRequest(
        out=args.out, annotations=args.coco_annotations, images=args.images, visargs=args.visargs,
        columns=ColumnMap.parse(args.columns), question_template=args.question_template,
        license_name=args.license_name, templates=_listed(args.templates, TEMPLATES, "--templates"),
        per_image=args.per_image, max_items=args.max_items, allow_noderivs=args.allow_noderivs, mask=mask,
        gold_margin=args.gold_margin, progress=not args.no_progress, workers=args.workers,
        executor=executor_choice(args)))
    rejected = sum(summary.rejected.values())
    remade = f"; variants remade for {len(summary.regenerated)} corrected items" if summary.regenerated else ""
    print(f"built {summary.accepted} CRM items in {summary.out} ({rejected} candidates rejected; see "
          f"rejected.jsonl){remade}; preview: {summary.out / 'preview.png'}")
    print(summary_line(summary.gold))
    return 0
