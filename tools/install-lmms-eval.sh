#!/usr/bin/env bash
# Install the lmms-eval harness (PyPI `lmms-eval`) into its own virtual environment, for
# `mmfaith export lmms-eval` users who want to try the round trip here and for
# tests/test_harness_lmms_eval.py. Kept apart from the project's venv: lmms-eval brings
# accelerate, datasets, transformers and about 120 other packages that mmfaith does not need.
#
# usage: tools/install-lmms-eval.sh [VENV_DIR]
#   VENV_DIR, else $MMFAITH_LMMS_EVAL_VENV, else <repo>/.venv-lmms-eval
#   $MMFAITH_LMMS_EVAL_BASE_PYTHON: the interpreter that creates the venv (default python3)
# Then: $VENV_DIR/bin/python -m lmms_eval ... runs the harness (MMFAITH_LMMS_EVAL_PYTHON names it
# for the tests).
#
# Idempotent: when the venv already imports lmms_eval at the pinned version it says so and
# exits in a few seconds.
set -euo pipefail

LMMS_EVAL_VERSION=0.7.3   # the version the test suite is checked with
TORCH_VERSION=2.13.0      # installed first: on these machines a CPU build from local disk

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${MMFAITH_LMMS_EVAL_VENV:-$repo/.venv-lmms-eval}}"
base_python="${MMFAITH_LMMS_EVAL_BASE_PYTHON:-python3}"
py="$venv/bin/python"
t0=$SECONDS

say() { printf '[install-lmms-eval %3ds] %s\n' "$((SECONDS - t0))" "$*"; }

# Exit 0 when the venv imports lmms_eval at the pinned version and mmfaith's harness runtime.
check() {
    [ -x "$py" ] || return 1
    "$py" - "$LMMS_EVAL_VERSION" <<'PYEOF'
import importlib.metadata as md, sys
try:
    have = md.version("lmms-eval")
except md.PackageNotFoundError:
    sys.exit("lmms-eval not installed")
if have != sys.argv[1]:
    sys.exit(f"lmms-eval {have} installed, {sys.argv[1]} wanted")
import importlib.util as iu
if iu.find_spec("torchvision") is not None:
    sys.exit("torchvision present (PyPI's build breaks imports beside the CPU torch)")
import lmms_eval  # the real import, not only its presence
import mmfaith.evaluators.harness.runtime  # what the exported utils.py imports
print(f"lmms-eval {have}, mmfaith {md.version('mmfaith')}")
PYEOF
}

if out="$(check 2>&1)"; then
    say "already installed in $venv: $out"
    exit 0
fi

if [ ! -x "$py" ]; then
    say "creating venv $venv with $base_python"
    "$base_python" -m venv "$venv"
    printf '# created by tools/install-lmms-eval.sh\n*\n' > "$venv/.gitignore"
fi
pip=("$py" -m pip --disable-pip-version-check)
"${pip[@]}" install -q --upgrade pip
say "installing torch==$TORCH_VERSION first (an unpinned torch would pull a multi-GB CUDA build)"
"${pip[@]}" install -q "torch==$TORCH_VERSION"
say "installing lmms-eval==$LMMS_EVAL_VERSION and its dependencies (2 to 5 min)"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
"$py" -c 'import importlib.metadata as md; print("torch==" + md.version("torch"))' > "$constraints"
"${pip[@]}" install -q -c "$constraints" "lmms-eval==$LMMS_EVAL_VERSION"
# PyPI's torchvision is built for another torch than 2.13.0+cpu: its import fails ("operator
# torchvision::nms does not exist") and takes transformers' image utilities with it. The API
# models lmms-eval runs through (openai) need none of them.
say "removing torchvision, torchaudio, torchcodec (PyPI builds do not match the CPU torch)"
"${pip[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>&1 | grep -v 'not installed' || true
# The exported utils.py imports mmfaith (prompts and parsing): this checkout, editable.
say "installing this checkout of mmfaith (pip install -e $repo)"
"${pip[@]}" install -q -c "$constraints" -e "$repo"
if ! out="$(check 2>&1)"; then
    say "FAILED: $out"
    exit 1
fi
say "done: $out; python: $py (export MMFAITH_LMMS_EVAL_PYTHON=$py)"
