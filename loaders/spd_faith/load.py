"""`load_spd_faith(source, config, revision)`: an SPD-Faith `datasets.Dataset` from any of its three homes.

`source` is a release folder (written by `mmfaith release`), a build dir or a Hub dataset repo id
`ORG/NAME[@REVISION]` of an mmfaith release (loaders/load.py says how each is read). Configs
`single`, `multi` and `control`; the split is always `test`. The official SPD-Faith-Bench (splits
easy / medium / hard / multi_diff, no `test`) is not read here: import it with
`mmfaith build spd-faith --from-official SOURCE --out BUILD_DIR` and pass BUILD_DIR.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.loaders.load import load_config


def load_spd_faith(source: str | Path, config: str | None = "single", revision: str | None = None,
                   split: str = "test", verify: bool = True) -> Any:
    """The `datasets.Dataset` of one config and split of an SPD-Faith release, build dir or Hub repo."""
    return load_config("spd-faith", source, config, revision, split, verify)
