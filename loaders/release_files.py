"""What every family's loader does with a release: recognise a Hub repo id, download it, cache its images.

- `HUB_REPO`: `ORG/NAME[@REVISION]`, a Hub dataset repo id (a path that does not exist locally).
- `download_release(source)`: a local snapshot of that repo (huggingface_hub's cache), or a one-line
  MmfaithError naming the fix.
- `cached_image(images, data, sha256, where)`: a release row's image bytes written once to
  `images/<sha256>.png` (content-addressed), after checking they hash to the record's sha256.
"""
from __future__ import annotations

import re
from pathlib import Path

from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes
from mmfaith.jsonl import write_atomic

HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[^@/]+)?$")


def cached_image(images: Path, data: bytes | None, sha256: str, where: str) -> Path:
    """The image written once to images/<sha256>.png, after checking its bytes (module docstring)."""
    if data is None or sha256_bytes(data) != sha256:
        raise MmfaithError(f"{where}: image bytes do not hash to the record's sha256; the release is damaged "
                           "(run `mmfaith verify` on it).")
    path = images / f"{sha256}.png"
    if not path.is_file():
        write_atomic(path, data)
    return path


def download_release(source: str) -> Path:
    """A local snapshot of the Hub release `ORG/NAME[@REVISION]` (huggingface_hub's cache)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    repo_id, _, revision = source.partition("@")
    try:
        return Path(snapshot_download(repo_id, repo_type="dataset", revision=revision or None,
                                      allow_patterns=["README.md", "manifest.json", "data/**"]))
    except (HfHubHTTPError, LocalEntryNotFoundError) as exc:
        raise MmfaithError(f"{source}: no local folder of that name, and no Hub dataset either ({exc.__class__.__name__}: "
                           f"{str(exc).splitlines()[0]}); check the path, or the repo id, revision and HF_TOKEN.") from exc
