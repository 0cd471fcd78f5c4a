"""One launcher for the servers mmfaith starts (Label Studio, vLLM): they end with their parent.

Contract
--------
`start_child(command, env=..., log=...)` starts `command` in its own session and process group
(its pid is the group id), stdin from /dev/null, stdout and stderr to `log`. On Linux the child
asks the kernel (prctl PR_SET_PDEATHSIG, in the fork before exec) for SIGTERM when the thread that
started it dies, so even a SIGKILLed parent leaves no server behind; a child whose parent is
already gone by then exits at once. Call it from the main thread (a worker thread's exit would
count as the parent's death).

`stop_child(process, grace_s)` stops the child's whole group: SIGTERM, then SIGKILL after
`grace_s`, and returns once no process of the group is left (zombies reaped by init included, up
to 10 s). Idempotent.

`ended_with_parent(process, grace_s)` is a context manager for the parent's main thread: while it
is open, SIGINT, SIGTERM and SIGHUP stop the child's group first, then end the parent (SIGINT as
KeyboardInterrupt, the others as SystemExit(128 + signal)); leaving it stops the child and
restores the previous handlers.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import IO, Any

PR_SET_PDEATHSIG = 1
PARENT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _die_with(parent: int) -> Callable[[], None]:
    """The preexec step: ask for SIGTERM at the parent's death, and exit if it already died."""
    def setup() -> None:
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:
            os._exit(1)
    return setup


def start_child(command: Sequence[str], *, env: Mapping[str, str] | None = None,
                log: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """Start a child server in its own process group that dies with this process (module docstring)."""
    preexec = _die_with(os.getpid()) if sys.platform.startswith("linux") else None
    return subprocess.Popen(list(command), env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT if log is not None else None,
                            start_new_session=True, preexec_fn=preexec)


def group_alive(pgid: int) -> bool:
    """Whether a process other than a zombie is left in group `pgid`."""
    proc = Path("/proc")
    if proc.is_dir():
        for stat in proc.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
                return True
        return False
    return group_exists(pgid)


def group_exists(pgid: int) -> bool:
    """Whether group `pgid` has any process left, zombies included."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_child(process: subprocess.Popen[Any], grace_s: float = 15.0) -> None:
    """Stop the child's whole process group: SIGTERM, SIGKILL after `grace_s`, then wait until it is gone."""
    pgid = process.pid
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        if process.poll() is not None and not group_alive(pgid):
            break
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        # poll() reaps the leader, whose zombie would otherwise keep the group alive.
        while time.monotonic() < deadline and (process.poll() is None or group_alive(pgid)):
            time.sleep(0.1)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    # Children reparented to init stay in the group as zombies until init reaps them.
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and group_exists(pgid):
        time.sleep(0.1)


@contextmanager
def ended_with_parent(process: subprocess.Popen[Any], grace_s: float = 15.0) -> Iterator[subprocess.Popen[Any]]:
    """While open, SIGINT/SIGTERM/SIGHUP stop the child's group, then end this process; on leaving, stop it."""
    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop_child(process, grace_s)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, on_signal) for sig in PARENT_SIGNALS}
    try:
        yield process
    finally:
        try:
            stop_child(process, grace_s)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
