#!/usr/bin/env bash
# Install the inspect_ai harness (PyPI `inspect-ai`) into its own virtual environment, with this
# checkout of mmfaith beside it (the task file `mmfaith export inspect` writes imports mmfaith),
# for trying the round trip here and for tests/spd_faith/test_harness_inspect.py. `openai` is what inspect's
# openai-api provider needs, `datasets` what its hf_dataset reads the rows with. Reading .eval
# logs alone needs less: pip install 'mmfaith[inspect]'.
#
# usage: tools/install-inspect.sh [VENV_DIR]
#   VENV_DIR, else $MMFAITH_INSPECT_VENV, else <repo>/.venv-inspect
#   $MMFAITH_INSPECT_BASE_PYTHON: the interpreter that creates the venv (default python3)
# Then: $VENV_DIR/bin/inspect eval ... runs the harness ($MMFAITH_INSPECT_PYTHON names the venv's
# python for the tests).
#
# Idempotent: when the venv already has inspect-ai at the pinned version it says so and exits in
# a few seconds.
set -euo pipefail

NAME=inspect
DIST=inspect-ai
VERSION=0.3.285   # the version the test suite is checked with
MODULES="inspect_ai openai datasets"
ABSENT=""
CONSTRAINTS=""
venv="${1:-${MMFAITH_INSPECT_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv-inspect}}"
base_python="${MMFAITH_INSPECT_BASE_PYTHON:-python3}"
. "$(dirname "$0")/harness-venv.sh"

harness_venv_main "inspect-ai==$VERSION" openai datasets
