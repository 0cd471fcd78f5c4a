#!/usr/bin/env bash
# Install a real Label Studio server (PyPI `label-studio`) into its own virtual environment,
# for `mmfaith annotate serve` and for tests/shared/test_annotate.py. Kept apart from the project's
# venv: label-studio pins Django, openai<2 and about 80 other packages. The project itself only
# needs `label-studio-sdk` (the client).
#
# usage: tools/install-label-studio.sh [VENV_DIR]
#   VENV_DIR, else $MMFAITH_LABEL_STUDIO_VENV, else <repo>/.venv-label-studio
#   $MMFAITH_LABEL_STUDIO_BASE_PYTHON: the interpreter that creates the venv (default python3)
# Then: $VENV_DIR/bin/label-studio is what `mmfaith annotate serve --label-studio PATH` and
# $MMFAITH_LABEL_STUDIO_BIN name.
#
# Idempotent: when the venv already has label-studio at the pinned version, it says so and
# exits in about a second. Never runs `label-studio --version` (that starts a server on
# 0.0.0.0:8080).
set -euo pipefail

LABEL_STUDIO_VERSION=1.23.2   # the version the test suite is checked with

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${MMFAITH_LABEL_STUDIO_VENV:-$repo/.venv-label-studio}}"
base_python="${MMFAITH_LABEL_STUDIO_BASE_PYTHON:-python3}"
py="$venv/bin/python"
t0=$SECONDS

say() { printf '[install-label-studio %3ds] %s\n' "$((SECONDS - t0))" "$*"; }

# Exit 0 when the venv holds label-studio at the pinned version and its entry point.
check() {
    [ -x "$py" ] && [ -x "$venv/bin/label-studio" ] || return 1
    "$py" - "$LABEL_STUDIO_VERSION" <<'PYEOF'
import importlib.metadata as md, sys
try:
    have = md.version("label-studio")
except md.PackageNotFoundError:
    sys.exit("label-studio not installed")
if have != sys.argv[1]:
    sys.exit(f"label-studio {have} installed, {sys.argv[1]} wanted")
PYEOF
}

if check 2>/dev/null; then
    say "label-studio $LABEL_STUDIO_VERSION already installed in $venv"
    exit 0
fi

say "creating $venv"
"$base_python" -m venv "$venv"
"$py" -m pip install -q --upgrade pip
say "installing label-studio==$LABEL_STUDIO_VERSION (about 1.6 min, about 1 GB)"
"$py" -m pip install -q "label-studio==$LABEL_STUDIO_VERSION"
check
say "done: $venv/bin/label-studio"
