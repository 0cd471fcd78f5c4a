"""The images a run shows a model: serialized once per image, and the side-by-side canvas.

Contract
--------
- Stored PNG bytes go out as they are: `ImagePayloads` reads each file once, base64-encodes it
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
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from mmfaith.clients import png_data_url
from mmfaith.errors import MmfaithError
from mmfaith.images import png_bytes
from mmfaith.jsonl import canonical_json

GAP_PX = 16
"""White columns between the two pictures of a side-by-side canvas."""
_GAP_VALUE = 255
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_part(data_url: str) -> bytes:
    """One image content part of a message, serialized once for every request that shows it.

    Bodies splice these bytes in (`chat_body`): serializing ~1 MB of base64 again per request,
    with openai's parameter transform over it, was a third of the client's CPU per request
    (profiled with benchmarks/run_throughput.py).
    """
    return canonical_json({"type": "image_url", "image_url": {"url": data_url}}).encode("utf-8")


@dataclass(frozen=True)
class ImageRef:
    """One stored image: its content hash (the record's image_*_sha256) and its file."""

    sha256: str
    path: Path


@dataclass
class PayloadStats:
    """What making payloads cost: base64 encodings (one per image or canvas), CPU seconds, sizes sent ("WxH")."""

    encodings: int = 0
    cpu_s: float = 0.0
    sizes: set[str] = field(default_factory=set)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header, without decoding it."""
    if png[:8] != _PNG_SIGNATURE or png[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    width, height = struct.unpack(">II", png[16:24])
    return width, height


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

    `views` lists, once per pair the run will ask about, the (first, second) images in the order
    shown. `parts(first, second)` gives that pair's serialized image parts for the message (two
    for "separate", one canvas for "side-by-side"); `release(first, second)` says the pair is done.
    """

    def __init__(self, layout: str, views: Iterable[tuple[ImageRef, ImageRef]]) -> None:
        self.layout = layout
        self.stats = PayloadStats()
        self._uses: Counter[tuple[str, ...]] = Counter(key for view in views for key, _ in self._parts(*view))
        self._parts_made: dict[tuple[str, ...], asyncio.Future[bytes]] = {}
        self._stats_lock = threading.Lock()

    def _parts(self, first: ImageRef, second: ImageRef) -> list[tuple[tuple[str, ...], Callable[[], bytes]]]:
        """(cache key, how to make the PNG bytes) of each image in the message."""
        if self.layout == "side-by-side":
            return [((first.sha256, second.sha256), lambda: self._canvas(first, second))]
        return [((first.sha256,), lambda: _read(first)), ((second.sha256,), lambda: _read(second))]

    async def parts(self, first: ImageRef, second: ImageRef) -> list[bytes]:
        """The image parts for one pair shown in this order, made on first use.

        Made in a worker thread (a canvas costs about 0.1 s of CPU) so the event loop keeps serving
        the requests in flight; pairs that need an image being made wait for that one making.
        """
        found = []
        for key, make in self._parts(first, second):
            if key not in self._parts_made:
                self._parts_made[key] = asyncio.ensure_future(asyncio.to_thread(self._encode, make))
            found.append(await self._parts_made[key])
        return found

    def release(self, first: ImageRef, second: ImageRef) -> None:
        """One pair that shows these images is finished; drop what no later pair needs."""
        for key, _ in self._parts(first, second):
            self._uses[key] -= 1
            if self._uses[key] <= 0:
                self._parts_made.pop(key, None)

    @staticmethod
    def _canvas(first: ImageRef, second: ImageRef) -> bytes:
        try:
            return side_by_side(_read(first), _read(second))
        except ValueError as exc:
            raise MmfaithError(f"{second.path}: {exc}; use --pair-layout separate for pairs of unequal sizes.") from exc

    def _encode(self, make: Callable[[], bytes]) -> bytes:
        start = time.thread_time()
        png = make()
        part = image_part(png_data_url(png))
        width, height = png_size(png)
        with self._stats_lock:
            self.stats.encodings += 1
            self.stats.sizes.add(f"{width}x{height}")
            self.stats.cpu_s += time.thread_time() - start
        return part


def _read(ref: ImageRef) -> bytes:
    try:
        return ref.path.read_bytes()
    except OSError as exc:
        raise MmfaithError(f"{ref.path}: cannot read the image ({exc.strerror}); check the dataset folder.") from exc


def sizes_shown(layout: str, first: ImageRef, second: ImageRef) -> list[tuple[int, int]]:
    """(width, height) of each image a message of this layout shows, from the files' PNG headers."""
    sizes = []
    for ref in (first, second):
        with open(ref.path, "rb") as handle:
            sizes.append(png_size(handle.read(24)))
    if layout == "side-by-side":
        (w1, h1), (w2, h2) = sizes
        return [(w1 + GAP_PX + w2, h1)]  # side_by_side requires one size
    return sizes
