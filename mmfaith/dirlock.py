"""One writer per folder: the lock a run dir or a build dir takes while a process writes into it.

Contract
--------
`hold_lock(folder, verb)` is a context manager. It creates FOLDER/.mmfaith.lock atomically
with this process's pid already in it (a hard link of a written temporary file), and removes it when the block ends (normally, on an
error or on Ctrl-C). When the file exists:

- and names a live process (another run or build writing here), MmfaithError, one line naming
  the verb, the folder and the pid (and the file to delete if that process is not mmfaith's);
- and names a process that no longer exists (a `kill -9`, a power cut) or holds no pid, the
  stale lock is taken over (replaced atomically, so two processes taking over the same stale
  lock cannot both win).

The folder must exist. The lock is advisory: it keeps mmfaith's own writers apart.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mmfaith.errors import MmfaithError

LOCK_NAME = ".mmfaith.lock"


@contextmanager
def hold_lock(folder: Path, verb: str) -> Iterator[Path]:
    """Hold FOLDER/.mmfaith.lock for the block (module docstring); yields the lock file's path."""
    path = folder / LOCK_NAME
    _acquire(path, verb, folder)
    try:
        yield path
    finally:
        if _holder(path) == os.getpid():
            path.unlink(missing_ok=True)


def _acquire(path: Path, verb: str, folder: Path) -> None:
    mine = path.with_name(f"{path.name}.{os.getpid()}.new")
    mine.write_text(f"{os.getpid()}\n", encoding="ascii")
    try:
        _link(mine, path, verb, folder)
    finally:
        mine.unlink(missing_ok=True)


def _link(mine: Path, path: Path, verb: str, folder: Path) -> None:
    for _ in range(3):
        try:
            os.link(mine, path)
        except FileExistsError:
            holder = _holder(path)
            if holder is not None and holder != os.getpid() and _alive(holder):
                raise MmfaithError(f"{verb} {folder}: another mmfaith process (pid {holder}) is writing into this "
                                   f"folder; wait for it to finish, or delete {path} if pid {holder} is not mmfaith."
                                   ) from None
            stale = path.with_name(f"{path.name}.{os.getpid()}.stale")
            try:  # take the stale lock over: only one process's rename of it succeeds
                os.replace(path, stale)
                stale.unlink()
            except FileNotFoundError:
                pass
            continue
        return
    raise MmfaithError(f"{verb} {folder}: cannot take {path}: other processes keep taking it; try again.")


def _holder(path: Path) -> int | None:
    """The pid a lock file names, None when it is unreadable or holds no pid."""
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
