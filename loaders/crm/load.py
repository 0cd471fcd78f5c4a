"""`load_crm(source, config, revision)`: a CRM `datasets.Dataset` of one config ("{mode}-{style}"), split `test`.

`source` is a release folder (written by `mmfaith release`), a build dir or a Hub dataset repo id
`ORG/NAME[@REVISION]` (loaders/load.py says how each is read).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.loaders.load import load_config


def load_crm(source: str | Path, config: str = "specific-black", revision: str | None = None,
             split: str = "test", verify: bool = True) -> Any:
    """The `datasets.Dataset` of one variant config of a CRM release, build dir or Hub repo."""
    return load_config("crm", source, config, revision, split, verify)
