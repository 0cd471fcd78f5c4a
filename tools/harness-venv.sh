# Shared by tools/install-lmms-eval.sh and tools/install-inspect.sh (sourced, not run): a harness in
# its own virtual environment, with this checkout of mmfaith beside it (the exported tasks import
# mmfaith for the prompts). The caller sets NAME, DIST, VERSION, MODULES (imported by the check,
# after mmfaith's harness runtime), ABSENT (distributions that must not be installed), venv and
# base_python (and CONSTRAINTS, a pip constraints file or empty), then calls harness_venv_main with
# the requirements of its harness.

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="$venv/bin/python"
pip=("$py" -m pip --disable-pip-version-check)
t0=$SECONDS

say() { printf '[install-%s %3ds] %s\n' "$NAME" "$((SECONDS - t0))" "$*"; }

# Exit 0 when the venv has DIST at VERSION, none of ABSENT, and imports MODULES and mmfaith's harness runtime.
check() {
    [ -x "$py" ] || return 1
    "$py" - "$DIST" "$VERSION" "$ABSENT" $MODULES <<'PYEOF'
import importlib, importlib.metadata as md, importlib.util as iu, sys
dist, want, absent, modules = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]
try:
    have = md.version(dist)
except md.PackageNotFoundError:
    sys.exit(f"{dist} not installed")
if have != want:
    sys.exit(f"{dist} {have} installed, {want} wanted")
present = [name for name in absent if iu.find_spec(name) is not None]
if present:
    sys.exit(f"{', '.join(present)} present (PyPI's builds do not match the CPU torch and break imports)")
for module in (*modules, "mmfaith.evaluators.harness.runtime"):  # the real imports, not only their presence
    importlib.import_module(module)
print(f"{dist} {have}, mmfaith {md.version('mmfaith')}")
PYEOF
}

# harness_venv_main REQUIREMENTS...: create or complete the venv (idempotent), install the harness's
# REQUIREMENTS and this checkout of mmfaith (editable), both under CONSTRAINTS, then remove ABSENT
# (last: a later install would bring them back as dependencies) and check.
harness_venv_main() {
    local out
    if out="$(check 2>&1)"; then
        say "already installed in $venv: $out"
        return 0
    fi
    if [ ! -x "$py" ]; then
        say "creating venv $venv with $base_python"
        "$base_python" -m venv "$venv"
        printf '# created by tools/install-%s.sh\n*\n' "$NAME" > "$venv/.gitignore"
    fi
    local constrained=()
    if [ -n "${CONSTRAINTS:-}" ]; then
        constrained=(-c "$CONSTRAINTS")
    fi
    "${pip[@]}" install -q --upgrade pip
    say "installing $DIST==$VERSION and its dependencies (1 to 7 min)"
    "${pip[@]}" install -q ${constrained[@]+"${constrained[@]}"} "$@"
    say "installing this checkout of mmfaith (pip install -e $repo)"
    # $MMFAITH_EDITABLE_LOCK (tools/test-all.sh): a file held (flock) while this checkout's egg-info is written,
    # so installs running side by side never write it at once.
    local locked=()
    if [ -n "${MMFAITH_EDITABLE_LOCK:-}" ]; then
        locked=(flock "$MMFAITH_EDITABLE_LOCK")
    fi
    ${locked[@]+"${locked[@]}"} "${pip[@]}" install -q ${constrained[@]+"${constrained[@]}"} -e "$repo"
    if [ -n "$ABSENT" ]; then
        say "removing $ABSENT"
        "${pip[@]}" uninstall -q -y $ABSENT 2>&1 | grep -v 'not installed' || true
    fi
    if ! out="$(check 2>&1)"; then
        say "FAILED: $out"
        return 1
    fi
    say "done: $out; python: $py"
}
