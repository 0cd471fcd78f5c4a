"""Annotation is an extra: without label-studio-sdk, `mmfaith annotate push/pull` say in one line what to install.

The missing package is made real in a child interpreter (`sys.modules["label_studio_sdk"] = None`
makes every import of it fail as an uninstalled package does), so the suite's own environment keeps it.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import sys
sys.modules["label_studio_sdk"] = None
from mmfaith.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_annotate_without_the_sdk_names_the_extra(tmp_path: Path) -> None:
    for verb, extra in (("push", ["--files-root", str(tmp_path)]), ("pull", [])):
        done = subprocess.run([sys.executable, "-c", CHILD, "annotate", verb, str(tmp_path), "--url",
                               "http://127.0.0.1:9", "--project", "p", *extra],
                              capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [
            "mmfaith: error: mmfaith annotate push/pull need label-studio-sdk: pip install 'mmfaith[annotate]'"]


def test_annotate_status_needs_no_sdk(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, "annotate", "status", "--help"], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0 and "status" in done.stdout
