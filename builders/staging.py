"""Files a work unit writes straight into the build folder, made final by the driver.

A worker (a local process or a Ray task on another node) writes the images of its unit into
`BUILD_DIR/.staging/<unit>/` and returns only the record; the driver, which alone decides in slot
order whether the unit becomes part of the build, moves the staged files into place with a rename
(no bytes through the driver) or drops them. A unit retried after a crash rewrites its own staging
folder, so a half-written file never reaches the build; `.staging` is emptied when a build starts
and when it ends.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from mmfaith.jsonl import write_atomic

STAGING_DIR = ".staging"


def stage_files(out: Path, unit: str, files: Mapping[str, bytes]) -> dict[str, str]:
    """Write `files` (final path relative to `out` -> bytes) into the unit's staging folder.

    Returns {final path: staged path}, both relative to `out`.
    """
    folder = Path(STAGING_DIR) / hashlib.sha256(unit.encode("utf-8")).hexdigest()[:20]
    (out / folder).mkdir(parents=True, exist_ok=True)
    staged: dict[str, str] = {}
    for index, (final, data) in enumerate(sorted(files.items())):
        path = folder / f"{index}-{Path(final).name}"
        write_atomic(out / path, data)
        staged[final] = str(path)
    return staged


def commit_files(out: Path, staged: Mapping[str, str], keep_existing: frozenset[str] = frozenset()) -> None:
    """Move staged files to their final paths; a final path in `keep_existing` that exists is kept."""
    for final, path in staged.items():
        target = out / final
        if final in keep_existing and target.exists():
            (out / path).unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(out / path, target)


def discard_files(out: Path, staged: Mapping[str, str]) -> None:
    """Drop the staged files of a unit that does not become part of the build."""
    for path in staged.values():
        (out / path).unlink(missing_ok=True)


def hole_cache_dir(out: Path) -> Path:
    """Where a build's workers share their inpainted holes (inpainters.HoleCache); emptied with the staging folder."""
    return out / STAGING_DIR / "holes"


def clear_staging(out: Path) -> None:
    """Remove whatever units left in the staging folder (discarded, crashed, or still running when a build ended)."""
    shutil.rmtree(out / STAGING_DIR, ignore_errors=True)
