"""Image bytes in and out: bounded decoding, lossless deterministic PNG, content hashes, and `ImageRef`, one
stored image as every stage refers to it, with its format (PNG, JPEG or WebP: read from its bytes' signature)."""
from __future__ import annotations

import base64
import hashlib
import io
import struct
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from mmfaith.errors import MmfaithError

DEFAULT_MAX_PIXELS = 50_000_000
"""Images larger than this are refused before decoding (decompression-bomb guard)."""
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def media_type(data: bytes) -> str:
    """The media type of image bytes by their signature: image/png, image/jpeg or image/webp (the formats chat
    servers take); ValueError for anything else. The first 12 bytes suffice."""
    if data.startswith(_PNG_SIGNATURE):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise ValueError("not a PNG, JPEG or WebP image")


def data_url(data: bytes) -> str:
    """Image bytes as the data URL a chat message carries, in their own format (sent as they are)."""
    return f"data:{media_type(data)};base64,{base64.b64encode(data).decode('ascii')}"


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's header (its first 24 bytes), without decoding it."""
    if png[:8] != _PNG_SIGNATURE or png[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of image bytes of any format PIL reads: a PNG from its header, others from theirs."""
    if data.startswith(_PNG_SIGNATURE):
        return png_size(data)
    with Image.open(io.BytesIO(data)) as image:
        return image.size


@dataclass(frozen=True)
class ImageRef:
    """One stored image: its content hash (the record's image sha256) and its file, whose bytes go out as they
    are in their own format (`media_type`)."""

    sha256: str
    path: Path

    @property
    def key(self) -> str:
        """What payloads are cached by: the content hash."""
        return self.sha256

    def load(self) -> bytes:
        """The file's bytes, as stored."""
        try:
            return self.path.read_bytes()
        except OSError as exc:
            raise MmfaithError(f"{self.path}: cannot read the image ({exc.strerror}); check the dataset folder.") from exc

    def media_type(self) -> str:
        """image/png, image/jpeg or image/webp, from the file's signature (MmfaithError for another format)."""
        with open(self.path, "rb") as handle:
            head = handle.read(12)
        try:
            return media_type(head)
        except ValueError as exc:
            raise MmfaithError(f"{self.path}: {exc}; a dataset's images must be PNG, JPEG or WebP.") from exc

    def size(self) -> tuple[int, int]:
        """(width, height) from the file's header."""
        with open(self.path, "rb") as handle:
            head = handle.read(24)
        if head.startswith(_PNG_SIGNATURE):
            return png_size(head)
        with Image.open(self.path) as image:
            return image.size


class UnreadableImage(MmfaithError):
    """An image file that exists but cannot be used: not decodable, truncated, or over the pixel limit."""


def read_rgb(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Decode an image file to an HxWx3 uint8 RGB array, refusing missing, unreadable or huge files.

    A missing file raises MmfaithError; an existing one that cannot be decoded (truncated, not an
    image) or has more than `max_pixels` pixels raises its subclass UnreadableImage.
    """
    if not path.is_file():
        raise MmfaithError(f"{path}: image file not found; check --images or the annotations' file_name.")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableImage(f"{path}: cannot read image ({exc}).") from exc
    return rgb_from_bytes(data, path, max_pixels)


KEPT_DECODED_BYTES = 96 << 20
"""How many bytes of decoded pixels `read_rgb_kept` keeps per process (about a hundred 640x480 photos)."""
_KEPT: OrderedDict[tuple[str, int, int, int], np.ndarray] = OrderedDict()


def read_rgb_kept(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """`read_rgb`, keeping the most recently read images decoded in this process (KEPT_DECODED_BYTES in all;
    keyed by path, modification time and size): a build visits an image once per slot and try, thousands of
    times in all, and decoding it each time cost as much as planning. The array is read-only, like
    `read_rgb`'s."""
    try:
        status = path.stat()
    except OSError:
        return read_rgb(path, max_pixels)  # its error names what is wrong
    key = (str(path), status.st_mtime_ns, status.st_size, max_pixels)
    rgb = _KEPT.pop(key, None)
    if rgb is None:
        rgb = read_rgb(path, max_pixels)
        rgb.setflags(write=False)
    _KEPT[key] = rgb
    while len(_KEPT) > 1 and sum(kept.nbytes for kept in _KEPT.values()) > KEPT_DECODED_BYTES:
        _KEPT.popitem(last=False)
    return rgb


def rgb_from_bytes(data: bytes, where: Path | str, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """`read_rgb` of bytes already read (`where` names them in errors): UnreadableImage when they
    cannot be decoded or hold more than `max_pixels` pixels."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise UnreadableImage(
                        f"{where}: {width}x{height} = {width * height} pixels exceeds the limit of {max_pixels}; "
                        "raise --max-pixels if the image is trusted."
                    )
                return np.asarray(image.convert("RGB"))
    except MmfaithError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise UnreadableImage(f"{where}: cannot decode image ({exc}).") from exc


def png_bytes(rgb: np.ndarray) -> bytes:
    """Encode an RGB array as PNG with fixed settings, so equal pixels give equal bytes."""
    buffer = io.BytesIO()
    Image.fromarray(rgb, mode="RGB").save(buffer, format="PNG", compress_level=6, optimize=False)
    return buffer.getvalue()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def place_name(x: float, y: float, width: int, height: int) -> str:
    """Where a point lies on a 3x3 grid of the image, in words: "top left", "top", ..., "center", ...

    One vocabulary for the builder's gold descriptions and the pixel-diff reference model's claims.
    """
    row = ("top", "middle", "bottom")[min(2, int(y / height * 3))]
    column = ("left", "center", "right")[min(2, int(x / width * 3))]
    if row == "middle":
        return "center" if column == "center" else column
    return row if column == "center" else f"{row} {column}"
