"""Hub dataset ids and release downloads, for every family's loader and source adapter.

`HUB_REPO` matches `ORG/NAME[@REVISION]`; `download_release(source)` is a local snapshot of an mmfaith
release on the Hub (README, manifest and data only), from huggingface_hub's cache.
"""
from __future__ import annotations

import re
from pathlib import Path

from mmfaith.errors import MmfaithError

HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[^@/]+)?$")


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
