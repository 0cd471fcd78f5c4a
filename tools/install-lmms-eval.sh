#!/usr/bin/env bash
# Install the lmms-eval harness (PyPI `lmms-eval`) into its own virtual environment, with this
# checkout of mmfaith beside it (the tasks `mmfaith export lmms-eval` writes import mmfaith), for
# trying the round trip here and for tests/spd_faith/test_harness_lmms_eval.py. Kept apart from the
# project's venv: lmms-eval brings accelerate, transformers, wandb and about 150 other packages.
#
# usage: tools/install-lmms-eval.sh [VENV_DIR]
#   VENV_DIR, else $MMFAITH_LMMS_EVAL_VENV, else <repo>/.venv-lmms-eval
#   $MMFAITH_LMMS_EVAL_BASE_PYTHON: the interpreter that creates the venv (default python3)
# Then: $VENV_DIR/bin/python -m lmms_eval ... runs the harness ($MMFAITH_LMMS_EVAL_PYTHON names
# that python for the tests).
#
# torch==2.13.0 is pinned (on these machines a CPU build from local disk; an unpinned torch would
# pull a multi-GB CUDA build). PyPI's torchvision is built for another torch: its import fails
# ("operator torchvision::nms does not exist") and takes transformers' image utilities with it,
# so it is removed; the API models lmms-eval runs through (openai) need none of it.
#
# Idempotent: when the venv already has lmms-eval at the pinned version it says so and exits in a
# few seconds.
set -euo pipefail

NAME=lmms-eval
DIST=lmms-eval
VERSION=0.7.3   # the version the test suite is checked with
MODULES=lmms_eval
ABSENT="torchvision torchaudio torchcodec"
venv="${1:-${MMFAITH_LMMS_EVAL_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv-lmms-eval}}"
base_python="${MMFAITH_LMMS_EVAL_BASE_PYTHON:-python3}"
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
# filelock 4.3 dropped filelock._api, which lmms_eval/evaluator.py imports.
printf '%s\n' "torch==2.13.0" "filelock<4.3" > "$CONSTRAINTS"
. "$(dirname "$0")/harness-venv.sh"

harness_venv_main "lmms-eval==$VERSION"
