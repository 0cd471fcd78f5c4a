"""Child servers end with their parent: SIGTERM, SIGHUP or SIGKILL of the parent leaves no server on its port."""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mmfaith.errors import MmfaithError

from tests.conftest import free_port

PARENT = textwrap.dedent("""
    import sys, time
    from mmfaith.child_process import ended_with_parent, start_child
    child = start_child([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", sys.argv[1]])
    print(child.pid, flush=True)
    with ended_with_parent(child, grace_s=5):
        while True:
            time.sleep(0.1)
""")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_child_server_ends_with_its_parent(sig: signal.Signals) -> None:
    port = free_port()
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    child_pid = int(parent.stdout.readline())
    assert wait_for(lambda: port_open(port), 30), "the child server never listened"
    parent.send_signal(sig)
    parent.wait(timeout=30)
    if sig != signal.SIGKILL:  # handled: the parent stopped the child's group, then exited
        # SIGINT ends as KeyboardInterrupt, which Python ends by SIGINT; the others as exit 128 + signal.
        assert parent.returncode == (-sig if sig == signal.SIGINT else 128 + sig), parent.returncode
    assert wait_for(lambda: group_gone(child_pid), 15), "the child's process group outlived its parent"
    assert not port_open(port)


@pytest.mark.parametrize("sig", [signal.SIGTERM])
def test_annotate_serve_stopped_by_a_signal_frees_its_port(sig: signal.Signals, tmp_path: Path) -> None:
    """One real Label Studio (a start costs ~40 CPU-s): SIGHUP takes the same handler as SIGTERM
    (child_process.PARENT_SIGNALS), and test_a_child_server_ends_with_its_parent sends each signal; SIGINT
    (Ctrl-C) is tests/shared/test_annotate.py's serve test."""
    from mmfaith.annotation.server import find_label_studio

    try:
        find_label_studio()
    except MmfaithError as exc:
        pytest.skip(f"Label Studio server not installed: {exc}")
    port = free_port()
    env = {**os.environ, "LABEL_STUDIO_API_KEY": secrets.token_hex(20), "LABEL_STUDIO_PASSWORD": "admin-pass-1234"}
    (tmp_path / "files").mkdir()
    serve = subprocess.Popen([sys.executable, "-m", "mmfaith", "annotate", "serve", "--data-dir", str(tmp_path / "data"),
                              "--files-root", str(tmp_path / "files"), "--port", str(port),
                              "--username", "admin@example.com"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             start_new_session=True)
    try:
        line = serve.stdout.readline()
        assert "Label Studio ready" in line, (line, serve.stderr.read() if serve.poll() is not None else "")
        assert port_open(port)
        serve.send_signal(sig)
        serve.wait(timeout=60)
        assert serve.returncode == 128 + sig
        assert wait_for(lambda: not port_open(port), 15), "Label Studio still listens after its launcher ended"
        assert "Traceback" not in serve.stderr.read()
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
