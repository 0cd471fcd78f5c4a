"""Start-up stays cheap: `mmfaith --help` and each family's `run`/`score --help` build their parsers without the
heavy libraries (the OpenAI client, OpenCV, jsonschema, the run engine), checked in a fresh interpreter per
command. The timings themselves are benchmarks/startup.py's (goal: --help under 0.3 s)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mmfaith.families import all_families

HEAVY = ("openai", "cv2", "jsonschema", "mmfaith.evaluators.run_engine", "mmfaith.builders.colors")
PROBE = """
import contextlib, io, json, sys
from mmfaith.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps([name for name in {heavy!r} if name in sys.modules]))
"""


def _imported(*argv: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                          check=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_root_help_imports_nothing_heavy() -> None:
    assert _imported("--help") == []


@pytest.mark.parametrize("family", [family.name for family in all_families()])
def test_a_familys_run_and_score_help_import_nothing_heavy(family: str) -> None:
    assert _imported("run", family, "--help") == []
    assert _imported("score", family, "--help") == []
