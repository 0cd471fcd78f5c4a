"""A score dir (`mmfaith score --out`), for every family: refused when foreign, replaced whole.

Contract
--------
- `check_score_dir(out, inputs, dataset, predictions_sha256, overwrite)`: a non-empty `out` is
  accepted only when it is a previous score of the same inputs (its metrics.json's provenance names
  the same `dataset` {id, revision} and `predictions_sha256`) or with `overwrite`; a folder that holds
  one of the `inputs` ((path, flag) pairs) is always refused, since a score replaces its folder whole.
- `replace_folder(out, staging)`: the staging folder takes `out`'s place, the old folder moved aside
  first and removed last, so a failed score leaves the old one intact.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError


def check_score_dir(out: Path, inputs: Sequence[tuple[Path | None, str]], dataset: dict[str, Any],
                    predictions_sha256: str, overwrite: bool) -> None:
    """Refuse a non-empty --out that is not a previous score of these inputs, unless `overwrite` (module docstring)."""
    held = sorted(p.name for p in out.iterdir())
    if not held:
        return
    for source, flag in inputs:
        if source is not None and source.exists() and source.resolve().is_relative_to(out.resolve()):
            raise MmfaithError(f"score --out {out}: holds the {flag} input {source}, and a score replaces its folder "
                               "whole; choose another --out.")
    if overwrite:
        return
    try:
        previous = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["provenance"]
        same = previous["dataset"] == dataset and previous["predictions_sha256"] == predictions_sha256
    except (OSError, ValueError, KeyError, TypeError):
        same = False
    if not same:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise MmfaithError(f"score --out {out}: not empty ({shown}) and not a score of these predictions on this "
                           "dataset; choose a new --out, or pass --overwrite to replace the folder whole.")


def replace_folder(out: Path, staging: Path) -> None:
    """Put `staging` where `out` is, whole: the old folder is moved aside first and removed last."""
    old = out.parent / f".{out.name}.replaced"
    shutil.rmtree(old, ignore_errors=True)
    os.replace(out, old)
    os.replace(staging, out)
    shutil.rmtree(old, ignore_errors=True)
