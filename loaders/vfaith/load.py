"""`load_vfaith(source, config, revision)`: a VFaith `datasets.Dataset` from any of its three homes.

`source` is a release folder (written by `mmfaith release`), a build dir or a Hub dataset repo id
`ORG/NAME[@REVISION]` (loaders/load.py says how each is read). Configs `pairs` and `perception`;
the split is always `test`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.loaders.load import load_config


def load_vfaith(source: str | Path, config: str = "pairs", revision: str | None = None, split: str = "test",
                verify: bool = True) -> Any:
    """The `datasets.Dataset` of one config and split of a VFaith release, build dir or Hub repo."""
    return load_config("vfaith", source, config, revision, split, verify)
