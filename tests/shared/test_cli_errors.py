"""User-caused OS errors end as one `mmfaith: error:` line; MMFAITH_DEBUG=1 shows the traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_out_is_a_file(build: Path, out: Path, debug: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MMFAITH_DEBUG": "1"} if debug else {k: v for k, v in os.environ.items()
                                                               if k != "MMFAITH_DEBUG"}
    return subprocess.run([sys.executable, "-m", "mmfaith", "run", "spd-faith", "--dataset", str(build), "--model", "m",
                           "--base-url", "http://127.0.0.1:9/v1", "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=120)


def test_an_os_error_is_one_line_and_a_traceback_only_with_mmfaith_debug(mixed_build: Path, tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.write_text("mine")
    plain = run_out_is_a_file(mixed_build, out, debug=False)
    assert plain.returncode == 2 and plain.stderr.count("\n") == 1, plain.stderr
    assert plain.stderr.startswith("mmfaith: error: ") and str(out) in plain.stderr and "Traceback" not in plain.stderr
    debug = run_out_is_a_file(mixed_build, out, debug=True)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "Error" in debug.stderr
    assert out.read_text() == "mine"
