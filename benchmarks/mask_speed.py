"""Speed of the shared masking operation (builders/masks.py) on the embedded COCO sample.

What it measures, on one core (the process is pinned to one CPU where the OS allows it, and
OpenCV runs single-threaded):

1. Masked variants per second per style, in memory: every image of the sample is decoded once
   beforehand (decoding is excluded), then for each image whose scene has a non-crowd instance,
   one variant per evidence set (the largest instance's box, as a CRM colour/existence question
   has) is made with `apply_mask` and checked by both gates (`check_outside_unchanged`,
   `check_covers`), as the builder does before writing. A random placement (`random_boxes`) is
   made once per image and masked too, so each image gives two variants (specific, random).
2. Beside it, the PNG writing rate: `images.png_bytes` of the same variants (lossless, fixed
   settings), the cost a build pays per written variant.

Goal: masking (with its gates) at least 100 variants per second per core.

Run from the repository root:

    python benchmarks/mask_speed.py              # every style, 3 passes over the sample
    python benchmarks/mask_speed.py --passes 1

It prints a plain-text table, then one line `JSON {...}` holding every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import cv2
import numpy as np

from mmfaith.builders.coco_source import CocoSource, embedded_sample
from mmfaith.builders.masks import (MASK_STYLES, apply_mask, check_covers, check_outside_unchanged, pixel_box,
                                    random_boxes)
from mmfaith.images import png_bytes, read_rgb


def _cases() -> list[tuple[np.ndarray, list, list]]:
    """(decoded image, specific mask, random mask) per usable image of the sample."""
    annotations, images = embedded_sample()
    source = CocoSource(annotations, images)
    cases = []
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        if not scene.editable:
            continue
        rgb = read_rgb(scene.path)
        instance = max(scene.editable, key=lambda inst: inst.bbox[2] * inst.bbox[3])
        evidence = [pixel_box(instance.bbox, scene.width, scene.height)]
        placement = random_boxes(evidence, scene.width, scene.height, np.random.default_rng(image_id))
        cases.append((rgb, evidence, list(placement.regions or evidence)))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=3, help="passes over the sample per style")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    cv2.setNumThreads(1)
    cases = _cases()
    figures: dict[str, dict[str, float]] = {}
    print(f"{len(cases)} images of the embedded sample, 2 variants each (specific, random), {args.passes} passes")
    print(f"{'style':8} {'mask+gates variants/s':>22} {'PNG writes/s':>13}")
    for style in MASK_STYLES:
        variants, masked_images = 0, []
        start = time.process_time()
        for _ in range(args.passes):
            for rgb, evidence, placed in cases:
                for mask in (evidence, placed):
                    masked = apply_mask(rgb, mask, style, seed=0)
                    assert check_outside_unchanged(rgb, masked, mask) is None
                    if mask is evidence:
                        assert check_covers(mask, evidence, *rgb.shape[:2]) is None
                    variants += 1
                    if len(masked_images) < len(cases):
                        masked_images.append(masked)
        mask_rate = variants / (time.process_time() - start)
        start = time.process_time()
        for masked in masked_images:
            png_bytes(masked)
        png_rate = len(masked_images) / (time.process_time() - start)
        figures[style] = {"variants_per_s": round(mask_rate, 1), "png_writes_per_s": round(png_rate, 1)}
        print(f"{style:8} {mask_rate:22.1f} {png_rate:13.1f}")
    slowest = min(row["variants_per_s"] for row in figures.values())
    print(f"slowest style: {slowest:.1f} variants/s per core (goal >= 100): {'met' if slowest >= 100 else 'NOT met'}")
    print("JSON " + json.dumps({"images": len(cases), "passes": args.passes, "styles": figures,
                                "slowest_variants_per_s": slowest}, sort_keys=True))


if __name__ == "__main__":
    main()
