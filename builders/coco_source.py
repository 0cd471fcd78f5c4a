"""COCO instance annotations as a source of scenes: images, instances, masks and licenses.

A thin adapter in the style of pycocotools' COCO class: everything format-specific stays here.
Crowd annotations are never edited, but their masks still count as occupied space.
"""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

from mmfaith.errors import MmfaithError
from mmfaith.jsonl import read_json_object

NO_DERIVS_MARK = "NoDerivs"


def embedded_sample() -> tuple[Path, Path]:
    """(annotations file, images folder) of the COCO sample shipped inside the package."""
    root = Path(str(files("mmfaith.data").joinpath("coco_sample")))
    return root / "annotations" / "instances_train2017.json", root / "train2017"


@dataclass(frozen=True)
class Instance:
    """One annotated object of a scene (COCO annotation)."""

    ann_id: int
    category_id: int
    category: str
    bbox: tuple[float, float, float, float]
    segmentation: Any
    iscrowd: bool

    def mask(self, height: int, width: int) -> np.ndarray:
        """The instance's pixel mask as a bool HxW array (polygons and RLE alike)."""
        segm = self.segmentation
        if isinstance(segm, list):
            rle = mask_utils.merge(mask_utils.frPyObjects(segm, height, width))
        elif isinstance(segm.get("counts"), list):
            rle = mask_utils.frPyObjects(segm, height, width)
        else:
            rle = segm
        return mask_utils.decode(rle).astype(bool)


@dataclass(frozen=True)
class License:
    id: int
    name: str
    url: str

    @property
    def allows_derivatives(self) -> bool:
        return NO_DERIVS_MARK not in self.name


@dataclass(frozen=True)
class Scene:
    """One source image with all its annotations; self-contained so it can travel to a worker."""

    image_id: int
    file_name: str
    path: Path
    width: int
    height: int
    license: License
    flickr_url: str | None
    coco_url: str | None
    instances: tuple[Instance, ...] = field(default_factory=tuple)

    @property
    def editable(self) -> tuple[Instance, ...]:
        return tuple(inst for inst in self.instances if not inst.iscrowd)

    @property
    def instance_count(self) -> int:
        """Non-crowd instances: the density measure behind the difficulty tiers."""
        return len(self.editable)


def _load_json(path: Path) -> dict[str, Any]:
    data = read_json_object(path, "pass --coco-annotations FILE.")
    for key in ("images", "annotations", "categories"):
        if not isinstance(data.get(key), list):
            raise MmfaithError(f"{path}: missing the '{key}' list that COCO instance annotations have.")
    return data


class CocoSource:
    """Scenes from a COCO instances file and its image folder."""

    def __init__(self, annotations_path: Path, images_dir: Path, dataset_name: str | None = None) -> None:
        self.annotations_path = annotations_path
        self.images_dir = images_dir
        self.dataset_name = dataset_name or annotations_path.stem
        data = _load_json(annotations_path)
        self._check_references(data)
        self.coco = COCO()
        self.coco.dataset = data
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress to stdout
            self.coco.createIndex()
        self.categories = {c["id"]: c["name"] for c in data["categories"]}
        self.licenses = {
            lic["id"]: License(lic["id"], lic.get("name", "unknown"), lic.get("url", ""))
            for lic in data.get("licenses", [])
        }
        self.split = images_dir.name

    def _check_references(self, data: dict[str, Any]) -> None:
        path = self.annotations_path
        category_ids = {c.get("id") for c in data["categories"]}
        image_ids = set()
        for index, image in enumerate(data["images"]):
            missing = [k for k in ("id", "file_name", "width", "height") if k not in image]
            if missing:
                raise MmfaithError(f"{path}: images[{index}] lacks {', '.join(missing)}.")
            image_ids.add(image["id"])
        for index, ann in enumerate(data["annotations"]):
            missing = [k for k in ("id", "image_id", "category_id", "bbox", "segmentation") if k not in ann]
            if missing:
                raise MmfaithError(f"{path}: annotations[{index}] lacks {', '.join(missing)}.")
            if ann["category_id"] not in category_ids:
                raise MmfaithError(
                    f"{path}: annotation {ann['id']} has unknown category_id {ann['category_id']}; "
                    "it is not in the 'categories' list."
                )
            if ann["image_id"] not in image_ids:
                raise MmfaithError(f"{path}: annotation {ann['id']} refers to unknown image_id {ann['image_id']}.")

    def image_ids(self) -> list[int]:
        return sorted(self.coco.imgs)

    def scene(self, image_id: int) -> Scene:
        image = self.coco.imgs[image_id]
        anns = self.coco.imgToAnns.get(image_id, [])
        license = self.licenses.get(image.get("license"), License(-1, "unknown", ""))
        instances = tuple(
            Instance(
                ann_id=a["id"],
                category_id=a["category_id"],
                category=self.categories[a["category_id"]],
                bbox=tuple(float(v) for v in a["bbox"]),
                segmentation=a["segmentation"],
                iscrowd=bool(a.get("iscrowd", 0)),
            )
            for a in sorted(anns, key=lambda a: a["id"])
        )
        return Scene(
            image_id=image_id,
            file_name=image["file_name"],
            path=self.images_dir / image["file_name"],
            width=int(image["width"]),
            height=int(image["height"]),
            license=license,
            flickr_url=image.get("flickr_url"),
            coco_url=image.get("coco_url"),
            instances=instances,
        )
