"""Image bytes in and out: bounded decoding, lossless deterministic PNG, content hashes."""
from __future__ import annotations

import hashlib
import io
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from mmfaith.errors import MmfaithError

DEFAULT_MAX_PIXELS = 50_000_000
"""Images larger than this are refused before decoding (decompression-bomb guard)."""


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
