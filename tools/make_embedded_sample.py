"""Rebuild the embedded COCO sample (mmfaith/data/coco_sample) from a coco128 folder.

Usage: python tools/make_embedded_sample.py PATH/TO/coco128

The sample is chosen by hand so every SPD-Faith difficulty tier has images (DESIGN.md, docs/spd_faith_build.md):
all 11 derivative-friendly coco128 images with 17+ non-crowd instances (hard), 8 with 7-16 (medium),
8 with 1-6 (easy), one image with no instances (the builder must skip it), and 4 NoDerivs images
(the builder must skip them unless --allow-noderivs). Image bytes are copied unchanged.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HARD = [113, 127, 149, 164, 196, 257, 294, 315, 357, 540, 542]
MEDIUM = [49, 74, 89, 143, 260, 332, 438, 536]
EASY = [30, 92, 136, 283, 370, 443, 562, 572]
NO_INSTANCES = [250]
NO_DERIVS = [338, 446, 472, 643]
IMAGE_IDS = sorted(HARD + MEDIUM + EASY + NO_INSTANCES + NO_DERIVS)


def main(coco128: Path, out: Path) -> None:
    full = json.loads((coco128 / "annotations" / "instances_train2017.json").read_text())
    keep = set(IMAGE_IDS)
    images = [im for im in full["images"] if im["id"] in keep]
    subset = {
        "info": {**full["info"], "description": "mmfaith embedded sample of COCO 2017 train (from coco128)"},
        "licenses": full["licenses"],
        "categories": full["categories"],
        "images": images,
        "annotations": [a for a in full["annotations"] if a["image_id"] in keep],
    }
    (out / "train2017").mkdir(parents=True, exist_ok=True)
    (out / "annotations").mkdir(exist_ok=True)
    (out / "annotations" / "instances_train2017.json").write_text(json.dumps(subset, separators=(",", ":")))
    for im in images:
        shutil.copyfile(coco128 / "train2017" / im["file_name"], out / "train2017" / im["file_name"])
    licenses = {lic["id"]: lic for lic in full["licenses"]}
    rows = [
        f"| {im['id']} | {im['file_name']} | [{licenses[im['license']]['name']}]({licenses[im['license']]['url']}) "
        f"| {im['flickr_url']} | {im['coco_url']} |"
        for im in images
    ]
    (out / "LICENSES.md").write_text(
        "# Embedded COCO sample: licenses and attribution\n\n"
        "Annotations: COCO Consortium, CC BY 4.0 (https://cocodataset.org/#termsofuse).\n"
        "Images: Flickr photos, each under its own license below. Images under a NoDerivs license are\n"
        "never edited by mmfaith unless the user passes --allow-noderivs.\n\n"
        "| image id | file | license | flickr url | coco url |\n|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).resolve().parents[1] / "mmfaith" / "data" / "coco_sample")
