"""`load_mcot(source, config, revision)`: an MCoT `datasets.Dataset` from a release folder, build dir or Hub repo.

Configs are the sources (`coco`, `vstar`, `hrbench-4k`, `hrbench-8k`); None is the release's default
(a build's first source). loaders/load.py says how each home is read; the split is always `test`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.loaders.load import load_config


def load_mcot(source: str | Path, config: str | None = None, revision: str | None = None, split: str = "test",
              verify: bool = True) -> Any:
    """The `datasets.Dataset` of one config (default: the release's default; a build dir's first source)."""
    return load_config("mcot", source, config, revision, split, verify)
