"""Thumbnails and full-size JPEGs of a page's images: content-addressed, cached, made in parallel.

`publish_images(images, folder, workers, progress)` writes, for each distinct source image (by its
sha256), `folder/t/<sha256>.jpg` (at most THUMB_SIDE pixels a side) and `folder/f/<sha256>.jpg`
(full size), and returns {sha256: (width, height)}. Each JPEG is made once per machine: it is kept
under `cache_dir()/explorer/<SPEC>/` by the source's sha256 and hard-linked (or copied) into the
folder, so score dirs of one dataset reuse each other's thumbnails. Sources are made in a thread
pool (Pillow decodes and resizes outside the GIL) with a progress bar.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mmfaith.cache import cache_dir
from mmfaith.errors import MmfaithError

THUMB_SIDE = 320
SPEC = "jpeg-t320q80-fq90-v2"
"""Names the cache: change it when the sizes or qualities change."""


def cached_jpegs(sha256: str) -> tuple[Path, Path]:
    """(thumbnail, full-size) cache paths of one source image."""
    root = cache_dir() / "explorer" / SPEC / sha256[:2]
    return root / f"{sha256}.t.jpg", root / f"{sha256}.f.jpg"


def _make(sha256: str, source: Path) -> tuple[int, int]:
    """Make the two cached JPEGs of one source unless present; its size."""
    from PIL import Image

    thumb, full = cached_jpegs(sha256)
    try:
        with Image.open(source) as opened:
            size = opened.size
            if thumb.is_file() and full.is_file():
                return size
            rgb = opened.convert("RGB")
    except OSError as exc:
        raise MmfaithError(f"{source}: cannot read the image for the explorer ({exc}); check the dataset folder.") from exc
    thumb.parent.mkdir(parents=True, exist_ok=True)
    _save(rgb, full, 90)
    rgb.thumbnail((THUMB_SIDE, THUMB_SIDE))
    _save(rgb, thumb, 80)
    return size


def _save(rgb: Any, path: Path, quality: int) -> None:
    staging = path.with_name(f".{path.name}.{os.getpid()}.{id(rgb)}")
    rgb.save(staging, "JPEG", quality=quality)
    os.replace(staging, path)


def _place(cached: Path, target: Path) -> None:
    """Hard-link the cached file into the page's folder (a copy across file systems)."""
    if target.is_file() and target.stat().st_size == cached.stat().st_size:
        return
    target.unlink(missing_ok=True)
    try:
        os.link(cached, target)
    except OSError:
        shutil.copyfile(cached, target)


def publish_images(images: Mapping[str, Path], folder: Path, workers: int = 4,
                   progress: bool = True) -> dict[str, tuple[int, int]]:
    """Thumbnails and full-size JPEGs of `images` ({sha256: source file}) into folder/t and folder/f (module docstring)."""
    (folder / "t").mkdir(parents=True, exist_ok=True)
    (folder / "f").mkdir(parents=True, exist_ok=True)
    sizes: dict[str, tuple[int, int]] = {}

    def one(entry: tuple[str, Path]) -> tuple[str, tuple[int, int]]:
        sha256, source = entry
        size = _make(sha256, source)
        thumb, full = cached_jpegs(sha256)
        _place(thumb, folder / "t" / f"{sha256}.jpg")
        _place(full, folder / "f" / f"{sha256}.jpg")
        return sha256, size

    entries: Iterable[tuple[str, Path]] = sorted(images.items())
    with ThreadPoolExecutor(max(1, workers)) as pool, \
            tqdm(total=len(images), desc="thumbnails", unit="image", disable=not progress or not images) as bar:
        for sha256, size in pool.map(one, entries):
            sizes[sha256] = size
            bar.update(1)
    return sizes
