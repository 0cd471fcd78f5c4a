"""The SPD-Faith builder: COCO images and instance masks -> gated image pairs (build dir).

`build_spd_faith(BuildRequest)` is the entry (`build.py`); `cli.py` declares its CLI options for
the family registry. Everything else in this folder is SPD-Faith's own (difficulty rule, planners,
quotas, preview); image operations, inpainters, gates and the COCO adapter are shared
(`mmfaith.builders`). The entry names load on first use, so the CLI's start-up stays light.
"""
from __future__ import annotations

from typing import Any

__all__ = ["BuildRequest", "BuildSummary", "build_spd_faith"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from mmfaith.builders.spd_faith import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
