"""The output folder of a verb: checked, then created, before anything is written into it.

Contract
--------
`prepare_out_dir(path, verb, flag="--out")` returns `path` as an existing folder mmfaith can write
into, creating it (and its parents) when absent. It raises MmfaithError, one sentence naming the
verb, the flag, the path and the fix, when:

- `path` (or one of its parents) exists and is not a folder (a regular file, say);
- `path`, or the nearest existing parent it would be created in, is not writable by this user;
- creating it fails for another reason (a read-only file system, a full disk).

It writes nothing into the folder: what a verb does with a folder that already holds files
(resume a build, refuse a foreign score folder) is the verb's own rule.

`staged_folder(out, verb)` is for a verb that writes a folder whole or not at all (the releases):
it checks `out` as above but creates only its parent, yields a fresh staging folder beside `out`
(`.<name>.partial`); when the block completes, the staging folder replaces `out` (which must be
empty or absent); whatever happens, no staging folder is left behind, and a failed block leaves
no `out` that was not there before.

`remove_if_made_empty(path, existed)`: after a verb failed, remove `path` when it did not exist
before the verb and is an empty folder now (what `prepare_out_dir` made before the failure).
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mmfaith.errors import MmfaithError


def prepare_out_dir(path: Path, verb: str, flag: str = "--out") -> Path:
    """`path` as a writable folder (created when absent); MmfaithError otherwise (module docstring)."""
    _check_out_dir(path, verb, flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise MmfaithError(f"{verb} {flag} {path}: cannot create the folder ({exc.strerror}); "
                           f"choose another {flag}.") from exc
    return path


def _check_out_dir(path: Path, verb: str, flag: str) -> None:
    """MmfaithError when `path` cannot be a folder this user writes into (module docstring); creates nothing."""
    where = f"{verb} {flag} {path}"
    if path.exists() and not path.is_dir():
        raise MmfaithError(f"{where}: is a file, not a folder; pass the path of a folder (it is created when absent).")
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        raise MmfaithError(f"{where}: {existing} is a file, not a folder, so the folder cannot be made there; "
                           f"choose another {flag}.")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "is not writable" if existing == path else f"cannot be created: {existing} is not writable"
        raise MmfaithError(f"{where}: {what} by this user; choose another {flag} or fix the folder's permissions.")


@contextmanager
def staged_folder(out: Path, verb: str) -> Iterator[Path]:
    """A staging folder that replaces the empty or absent `out` when the block completes (module docstring)."""
    _check_out_dir(out, verb, "--out")
    prepare_out_dir(out.parent, verb, "--out's parent")
    staging = out.parent / f".{out.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
        if out.exists():
            out.rmdir()  # empty: the caller checked it
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_if_made_empty(path: Path, existed: bool) -> None:
    """Remove `path` if it was not there before the failed verb and is an empty folder now (module docstring)."""
    if not existed and path.is_dir() and not any(path.iterdir()):
        path.rmdir()
