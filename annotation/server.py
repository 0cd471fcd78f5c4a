"""Start and stop a local Label Studio server: SQLite, bound to 127.0.0.1, in its own process group.

The server runs from its own virtual environment (tools/install-label-studio.sh makes
<repo>/.venv-label-studio). It is started with a fixed admin account whose API token is the one
the caller passes (taken from an environment variable, never printed), legacy tokens enabled,
and local-files serving rooted at `files_root`, the folder above the build dirs to annotate.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from mmfaith.child_process import start_child, stop_child
from mmfaith.errors import MmfaithError

BIN_ENV = "MMFAITH_LABEL_STUDIO_BIN"
INSTALL_HINT = "run tools/install-label-studio.sh (or set MMFAITH_LABEL_STUDIO_BIN / --label-studio to its bin/label-studio)"


def find_label_studio(explicit: str | None = None) -> Path:
    """The label-studio executable: `explicit`, else $MMFAITH_LABEL_STUDIO_BIN, else
    <repo>/.venv-label-studio/bin/label-studio, else `label-studio` on PATH. MmfaithError if none."""
    candidates = [explicit, os.environ.get(BIN_ENV),
                  str(Path(__file__).resolve().parents[1] / ".venv-label-studio" / "bin" / "label-studio"),
                  shutil.which("label-studio")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise MmfaithError(f"no label-studio executable found; {INSTALL_HINT}.")


@dataclass(frozen=True)
class ServerSpec:
    """How to start one server. `token` is the admin's API token (40 hex characters)."""

    executable: Path
    data_dir: Path
    files_root: Path
    port: int
    username: str
    password: str
    token: str
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://{self.host}:{self.port}"


def start_server(spec: ServerSpec, log: Path) -> subprocess.Popen:
    """Start the server (`mmfaith.child_process.start_child`: its own process group, ended with its
    parent), output to `log`; returns at once (see wait_ready)."""
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ,
           "LABEL_STUDIO_BASE_DATA_DIR": str(spec.data_dir),
           "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
           "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(spec.files_root.resolve()),
           "LABEL_STUDIO_USERNAME": spec.username,
           "LABEL_STUDIO_PASSWORD": spec.password,
           "LABEL_STUDIO_USER_TOKEN": spec.token,
           "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
           # no look-up of the newest release on pypi.org, no error reports to Sentry, no analytics
           # (label_studio/core/settings/base.py, label_studio.py): mmfaith talks only to servers the user names
           "LATEST_VERSION_CHECK": "false", "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "COLLECT_ANALYTICS": "false",
           "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": os.environ.get("LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK", "false")}
    command = [str(spec.executable), "start", "--no-browser", "--data-dir", str(spec.data_dir),
               "--internal-host", spec.host, "--host", spec.url, "--port", str(spec.port)]
    with open(log, "ab") as out:
        return start_child(command, env=env, log=out)


def wait_ready(spec: ServerSpec, process: subprocess.Popen, log: Path, timeout_s: float = 180.0) -> float:
    """Wait until GET /health answers 200; returns the seconds waited. MmfaithError (naming the log)
    if the process exits or the time runs out; the process is stopped in that case."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if process.poll() is not None:
            raise MmfaithError(f"label-studio exited with status {process.returncode} before it was ready; see {log}.")
        try:
            with urllib.request.urlopen(spec.url + "/health", timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    stop_server(process)
    raise MmfaithError(f"label-studio was not ready at {spec.url} within {timeout_s:.0f} s; see {log}.")


def stop_server(process: subprocess.Popen, grace_s: float = 15.0) -> None:
    """Stop the server's whole process group: SIGTERM, then SIGKILL after `grace_s` (`stop_child`)."""
    stop_child(process, grace_s)
