#!/usr/bin/env bash
# Install the inspect_ai harness (PyPI `inspect-ai`) into its own virtual environment, for
# `mmfaith export inspect` users who want to try the round trip here and for
# tests/test_harness_inspect.py. Kept apart from the project's venv, as the other servers and
# harnesses are; `pip install 'mmfaith[inspect]'` is the lighter way to read .eval logs only.
#
# usage: tools/install-inspect.sh [VENV_DIR]
#   VENV_DIR, else $MMFAITH_INSPECT_VENV, else <repo>/.venv-inspect
#   $MMFAITH_INSPECT_BASE_PYTHON: the interpreter that creates the venv (default python3)
# Then: $VENV_DIR/bin/inspect eval ... runs the harness (MMFAITH_INSPECT_PYTHON names the
# venv's python for the tests). The `openai` package is installed too: inspect's openai-api
# provider needs it.
#
# Idempotent: when the venv already imports inspect_ai at the pinned version and openai, it
# says so and exits in a few seconds.
set -euo pipefail

INSPECT_AI_VERSION=0.3.285   # the version the test suite is checked with

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${MMFAITH_INSPECT_VENV:-$repo/.venv-inspect}}"
base_python="${MMFAITH_INSPECT_BASE_PYTHON:-python3}"
py="$venv/bin/python"
t0=$SECONDS

say() { printf '[install-inspect %3ds] %s\n' "$((SECONDS - t0))" "$*"; }

# Exit 0 when the venv imports inspect_ai at the pinned version, openai, datasets and mmfaith's harness runtime.
check() {
    [ -x "$py" ] || return 1
    "$py" - "$INSPECT_AI_VERSION" <<'PYEOF'
import importlib.metadata as md, sys
try:
    have = md.version("inspect-ai")
except md.PackageNotFoundError:
    sys.exit("inspect-ai not installed")
if have != sys.argv[1]:
    sys.exit(f"inspect-ai {have} installed, {sys.argv[1]} wanted")
import inspect_ai, openai, datasets  # the real imports
import mmfaith.evaluators.harness.runtime  # what the exported task file imports
print(f"inspect-ai {have}, openai {md.version('openai')}, datasets {md.version('datasets')}, "
      f"mmfaith {md.version('mmfaith')}")
PYEOF
}

if out="$(check 2>&1)"; then
    say "already installed in $venv: $out"
    exit 0
fi

if [ ! -x "$py" ]; then
    say "creating venv $venv with $base_python"
    "$base_python" -m venv "$venv"
    printf '# created by tools/install-inspect.sh\n*\n' > "$venv/.gitignore"
fi
pip=("$py" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip
say "installing inspect-ai==$INSPECT_AI_VERSION, openai, datasets (1 to 2 min)"
# datasets: hf_dataset("parquet", ...) in the exported task file reads the rows through it.
"${pip[@]}" install -q "inspect-ai==$INSPECT_AI_VERSION" openai datasets
# The exported task file imports mmfaith (prompts and parsing): this checkout, editable.
say "installing this checkout of mmfaith (pip install -e $repo)"
"${pip[@]}" install -q -e "$repo"
if ! out="$(check 2>&1)"; then
    say "FAILED: $out"
    exit 1
fi
say "done: $out; python: $py (export MMFAITH_INSPECT_PYTHON=$py)"
