"""The images a run shows a model: serialized once per image, and the side-by-side canvas.

Contract
--------
- Stored image bytes go out as they are, in their own format (`mmfaith.images.ImageRef`, `data_url`): `ImagePayloads` reads each file once, base64-encodes it
  once per run into a serialized message part (`image_part`), reused by every probe
  and pair that shows it, and drops it after the last pair that shows it, so memory holds the
  images of the pairs in flight and the originals that pairs still to come share.
- `side_by_side(left_png, right_png)` is the one merged canvas: both images decoded (same size
  required), pasted left | GAP_PX white columns | right, encoded with `png_bytes`; equal inputs
  give equal bytes. `split_side_by_side` inverts it: each half re-encoded with `png_bytes`, so for
  images written by `png_bytes` (every build image) a half's sha256 is its file's sha256. The
  reference server recognises a canvas that way.
- `PayloadStats` counts base64 encodings and the CPU time spent making payloads, so
  runs and benchmarks can show that images are not re-encoded in the request path.
"""
from __future__ import annotations

import asyncio
import io
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from mmfaith.images import ImageRef, data_url, image_size, png_bytes, sha256_bytes
from mmfaith.jsonl import canonical_json

GAP_PX = 16
"""White columns between the two pictures of a side-by-side canvas."""
_GAP_VALUE = 255


def image_part(data_url: str) -> bytes:
    """One image content part of a message, serialized once for every request that shows it.

    Bodies splice these bytes in (`chat_body`): serializing ~1 MB of base64 again per request,
    with openai's parameter transform over it, was a third of the client's CPU per request
    (profiled with benchmarks/run_throughput.py).
    """
    return canonical_json({"type": "image_url", "image_url": {"url": data_url}}).encode("utf-8")


@dataclass(frozen=True)
class DerivedImage:
    """An image made from stored ones (a side-by-side canvas, a crop, a perturbed copy) as PNG bytes.

    `key` names it for the payload cache (equal keys, equal bytes); `sources` are the stored images
    it is made from and `transform` says how (recorded with what a request showed); `make()`
    returns its PNG bytes; `size()` its (width, height) without making it where possible.
    """

    key: str
    sources: tuple[ImageRef, ...]
    transform: str
    make: Callable[[], bytes] = field(compare=False)
    size: Callable[[], tuple[int, int]] = field(compare=False)

    def load(self) -> bytes:
        return self.make()


Shown = ImageRef | DerivedImage
"""An image a message shows."""


@dataclass
class PayloadStats:
    """What making payloads cost: base64 encodings (one per image or canvas), CPU seconds, sizes sent ("WxH")."""

    encodings: int = 0
    cpu_s: float = 0.0
    sizes: set[str] = field(default_factory=set)


def decode_png(png: bytes) -> np.ndarray:
    """PNG bytes to an HxWx3 uint8 RGB array."""
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGB"))


def side_by_side(left_png: bytes, right_png: bytes) -> bytes:
    """The merged canvas: left | GAP_PX white columns | right, as deterministic PNG bytes."""
    left, right = decode_png(left_png), decode_png(right_png)
    if left.shape != right.shape:
        raise ValueError(f"side-by-side needs two images of one size, got {left.shape[1]}x{left.shape[0]} "
                         f"and {right.shape[1]}x{right.shape[0]}")
    gap = np.full((left.shape[0], GAP_PX, 3), _GAP_VALUE, dtype=np.uint8)
    return png_bytes(np.concatenate([left, gap, right], axis=1))


def split_side_by_side(canvas_png: bytes) -> tuple[bytes, bytes] | None:
    """The two pictures of a canvas made by `side_by_side`, re-encoded; None if it is not one."""
    canvas = decode_png(canvas_png)
    width = (canvas.shape[1] - GAP_PX) // 2
    if width < 1 or 2 * width + GAP_PX != canvas.shape[1]:
        return None
    if not (canvas[:, width:width + GAP_PX] == _GAP_VALUE).all():
        return None
    left, right = canvas[:, :width], canvas[:, width + GAP_PX:]
    return png_bytes(np.ascontiguousarray(left)), png_bytes(np.ascontiguousarray(right))


class ImagePayloads:
    """The serialized image parts a run shows, each made once and dropped after its last use.

    `uses` lists every image once per item that will show it; `part(image)` gives its serialized
    message part, made on first use; `release(images)` says an item that showed them is finished, and
    drops what no later item needs. Images not listed in `uses` (made from answers, e.g. crops)
    are made when asked and kept until released. Stored and derived images are cached apart
    (`_slot`): a derived image may have a stored one's bytes (a crop of the whole image) and still
    needs its own provenance.
    """

    def __init__(self, uses: Iterable[Shown]) -> None:
        self.stats = PayloadStats()
        self._uses: Counter[str] = Counter(_slot(image) for image in uses)
        self._parts_made: dict[str, asyncio.Future[bytes]] = {}
        self._made_sha256: dict[str, str] = {}
        self._stats_lock = threading.Lock()

    async def part(self, image: Shown) -> bytes:
        """The image's serialized part, made on first use.

        Made in a worker thread (a canvas costs about 0.1 s of CPU) so the event loop keeps serving
        the requests in flight; items that need an image being made wait for that one making.
        """
        slot = _slot(image)
        if slot not in self._parts_made:
            self._parts_made[slot] = asyncio.ensure_future(asyncio.to_thread(self._encode, image))
        return await self._parts_made[slot]

    def provenance(self, image: Shown) -> dict[str, Any]:
        """What a request showed, for its prediction line: the sha256 of the bytes sent and, for a
        derived image, the hashes of its sources and its transform (after `part` made it)."""
        if isinstance(image, ImageRef):
            return {"sha256": image.sha256}
        return {"sha256": self._made_sha256[image.key], "sources": [source.sha256 for source in image.sources],
                "transform": image.transform}

    def release(self, images: Iterable[Shown]) -> None:
        """One item that shows these images is finished; drop what no later item needs."""
        for image in images:
            slot = _slot(image)
            self._uses[slot] -= 1
            if self._uses[slot] <= 0:
                self._parts_made.pop(slot, None)

    def _encode(self, image: Shown) -> bytes:
        start = time.thread_time()
        data = image.load()
        part = image_part(data_url(data))
        width, height = image_size(data)
        if isinstance(image, DerivedImage):
            self._made_sha256[image.key] = sha256_bytes(data)
        with self._stats_lock:
            self.stats.encodings += 1
            self.stats.sizes.add(f"{width}x{height}")
            self.stats.cpu_s += time.thread_time() - start
        return part


def _slot(image: Shown) -> str:
    """The payload cache's name of an image: stored and derived images never share one."""
    return image.key if isinstance(image, ImageRef) else f"derived:{image.key}"
