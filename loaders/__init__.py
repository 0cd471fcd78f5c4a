"""Typed access to every family's data, imported on first use (`from mmfaith.loaders import load_crm` loads
only CRM's loader):

- `load_spd_faith`, `load_vfaith`, `load_crm`, `load_mcot`: one config of a release folder, build dir or Hub
  repo `ORG/NAME[@REVISION]` as a `datasets.Dataset` (loaders/load.py; sources resolved by loaders/source.py);
- `spd_pairs`, `PairView`, `Difference`, `official_pair_view`: SPD-Faith's typed views (PIL images, dataclasses).
"""
from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "load_spd_faith": "mmfaith.loaders.spd_faith.load", "load_vfaith": "mmfaith.loaders.vfaith.load",
    "load_crm": "mmfaith.loaders.crm.load", "load_mcot": "mmfaith.loaders.mcot.load",
    "Difference": "mmfaith.loaders.spd_faith.views", "PairView": "mmfaith.loaders.spd_faith.views",
    "official_pair_view": "mmfaith.loaders.spd_faith.views", "spd_pairs": "mmfaith.loaders.spd_faith.views",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """The public name `name`, its module imported now (module docstring)."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
