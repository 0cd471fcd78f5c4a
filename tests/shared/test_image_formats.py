"""Image references carry their format: a stored JPEG or WebP goes out as it is, under its own media type,
and its size is read from its own header (mmfaith/images.py)."""
from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.image_payload import ImagePayloads
from mmfaith.images import ImageRef, data_url, image_size, media_type, read_rgb, read_rgb_kept, sha256_file


def _write(path: Path, fmt: str) -> ImageRef:
    pixels = np.random.default_rng(0).integers(0, 256, (30, 50, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format=fmt)
    return ImageRef(sha256_file(path), path)


@pytest.mark.parametrize(("fmt", "suffix", "expected"), [("PNG", "png", "image/png"), ("JPEG", "jpg", "image/jpeg"),
                                                         ("WEBP", "webp", "image/webp")])
def test_a_stored_image_is_sent_as_it_is_in_its_own_format(tmp_path: Path, fmt: str, suffix: str,
                                                           expected: str) -> None:
    image = _write(tmp_path / f"photo.{suffix}", fmt)
    assert image.media_type() == expected and image.size() == (50, 30)
    stored = image.path.read_bytes()
    assert media_type(stored) == expected and image_size(stored) == (50, 30)
    part = json.loads(asyncio.run(ImagePayloads([image]).part(image)))
    url = part["image_url"]["url"]
    assert url == data_url(stored) and url.startswith(f"data:{expected};base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == stored  # the bytes as stored, not re-encoded


def test_another_format_is_refused_naming_the_file(tmp_path: Path) -> None:
    gif = _write(tmp_path / "photo.gif", "GIF")
    with pytest.raises(MmfaithError, match="photo.gif: not a PNG, JPEG or WebP image"):
        gif.media_type()
    with pytest.raises(ValueError, match="not a PNG, JPEG or WebP image"):
        data_url(gif.path.read_bytes())


def test_kept_decoded_images_are_the_files_pixels_and_follow_a_rewrite(tmp_path: Path) -> None:
    """read_rgb_kept gives read_rgb's pixels, read-only, the same array while the file is unchanged, and the new
    pixels once the file is rewritten (the key holds its modification time and size)."""
    path = tmp_path / "photo.png"
    first = np.zeros((30, 50, 3), dtype=np.uint8)
    Image.fromarray(first).save(path)
    kept = read_rgb_kept(path)
    assert np.array_equal(kept, read_rgb(path)) and not kept.flags.writeable
    assert read_rgb_kept(path) is kept
    second = np.full((31, 50, 3), 200, dtype=np.uint8)
    Image.fromarray(second).save(path)
    assert np.array_equal(read_rgb_kept(path), second)
    with pytest.raises(MmfaithError, match="image file not found"):
        read_rgb_kept(tmp_path / "missing.png")
