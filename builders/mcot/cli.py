"""`mmfaith build mcot`: its options and their translation into a `McotBuildRequest`."""
from __future__ import annotations

import argparse
from pathlib import Path

from mmfaith.builders.executors import add_executor_options, executor_choice
from mmfaith.gold_balance import DEFAULT_MARGIN

BUILD_EXAMPLE = """examples:
  mmfaith build mcot --out out/mcot --limit 20                 # offline: V*-style questions from the COCO sample
  mmfaith build mcot --source vstar --source-path ./vstar_bench --out out/vstar
  mmfaith build mcot --source hrbench-4k --source-path DreamMr/HR-Bench --out out/hr4k
  mmfaith build mcot --source vstar --source-path vstar.parquet --columns text=prompt,label=answer --out out/v"""


def add_build_options(parser: argparse.ArgumentParser) -> None:
    """The options of `mmfaith build mcot` (the shared CLI makes the subparser)."""
    parser.description = ("Questions about small details of one image for 'thinking with images' models: V* Bench or "
                          "HR-Bench in their published Hugging Face layouts, or (default, offline) V*-style "
                          "small-target colour and relative-position questions from COCO annotations.")
    parser.epilog = BUILD_EXAMPLE
    parser.add_argument("--source", choices=("coco", "vstar", "hrbench-4k", "hrbench-8k"), default="coco",
                        help="where the questions come from (default coco: the embedded COCO sample)")
    parser.add_argument("--source-path", metavar="FOLDER|FILE|HUB_ID",
                        help="V*/HR-Bench: a dataset folder, a parquet or TSV file, or a Hub id ORG/NAME[@REVISION]")
    parser.add_argument("--columns", metavar="NAME=COLUMN,...",
                        help="rename columns of a copy that differs from the published layout (e.g. text=prompt)")
    parser.add_argument("--coco-annotations", type=Path, metavar="FILE", help="COCO instances JSON (default: embedded sample)")
    parser.add_argument("--images", type=Path, metavar="DIR", help="folder of the images the COCO annotations list")
    parser.add_argument("--max-subject-area", type=float, default=0.01, metavar="SHARE",
                        help="COCO: the asked-about object's box covers less than this share of the image (default 0.01)")
    parser.add_argument("--gold-margin", type=float, default=DEFAULT_MARGIN, metavar="X",
                        help="COCO: cap on each template's majority gold share, chance + X (beyond: rejected.jsonl)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="keep the first N questions")
    parser.add_argument("--seed", type=int, default=0, help="seed of every choice (COCO option order)")
    parser.add_argument("--max-pixels", type=int, default=None, help="refuse larger images (default 50,000,000)")
    parser.add_argument("--out", type=Path, required=True, metavar="BUILD_DIR", help="output folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_executor_options(parser.add_argument_group("workers (decoding and writing the images)"))


def run_build(args: argparse.Namespace) -> int:
    """`mmfaith build mcot`: prints the summary."""
    from mmfaith.builders.mcot.build import McotBuildRequest, build_mcot
    from mmfaith.builders.mcot.sources import parse_columns
    from mmfaith.errors import MmfaithError
    from mmfaith.gold_balance import summary_line
    from mmfaith.images import DEFAULT_MAX_PIXELS

    if not 0 <= args.gold_margin <= 1:
        raise MmfaithError(f"--gold-margin must be in [0, 1], not {args.gold_margin}.")
    if args.source == "coco" and (args.source_path or args.columns):
        raise MmfaithError("--source-path and --columns are for --source vstar|hrbench-4k|hrbench-8k; the COCO source "
                           "takes --coco-annotations and --images.")
    request = McotBuildRequest(out=args.out, source=args.source, source_path=args.source_path,
                               columns=parse_columns(args.columns), seed=args.seed, limit=args.limit,
                               max_pixels=DEFAULT_MAX_PIXELS if args.max_pixels is None else args.max_pixels,
                               coco_annotations=args.coco_annotations, coco_images=args.images,
                               max_subject_area=args.max_subject_area, gold_margin=args.gold_margin,
                               progress=not args.no_progress, executor=executor_choice(args))
    summary = build_mcot(request)
    categories = ", ".join(f"{name} {count}" for name, count in sorted(summary.by_category.items()))
    print(f"built {summary.items} MCoT questions on {summary.images} images in {summary.out} ({categories}); preview: {summary.out / 'preview.png'}")
    print(summary_line(summary.gold))
    return 0
