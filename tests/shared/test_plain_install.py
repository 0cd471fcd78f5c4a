"""The README's plain install (`pip install .`, no extras) runs every verb of every family.

The suite itself runs in a venv with every extra, where a stray import of an optional package
(label-studio-sdk, sentence-transformers, torch, inspect-ai, ray, google-genai) goes unnoticed.
This test installs the wheel into a fresh venv without extras (pip takes the dependencies from its
cache or the configured index), checks that none of the optional packages is there, then for each
family builds a small set, runs its reference model over HTTP on 127.0.0.1, scores, reports,
releases, verifies and loads it. CRM scoring reads the text embeddings shipped in the package for
the default suite's reference roles (its CRM build here is the suite's recipe); a text outside
every cache needs Sentence-BERT (the `crm` extra): on the plain install it is one `mmfaith: error:`
line naming the extra, leaving no score folder. A release that fails leaves no release folder
either. The README's first command, `mmfaith quickstart`, profiles all four families.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # long: the test command runs it first (tests/conftest.py)

OPTIONAL = ("label_studio_sdk", "sentence_transformers", "torch", "inspect_ai", "ray", "google.genai")
# family -> (small build options, reference model); CRM's is the default suite's recipe (mmfaith/data/suites).
FAMILIES = {
    "spd-faith": (["--per-tier", "1", "--multi", "0", "--controls", "1"], "oracle"),
    "vfaith": (["--per-template", "1", "--templates", "color,existence"], "oracle"),
    "crm": (["--max-items", "8", "--seed", "0"], "grounded"),
    "mcot": (["--limit", "4"], "blind"),
}
LOADERS = {"spd-faith": "load_spd_faith(r, config='single')", "vfaith": "load_vfaith(r)",
           "crm": "load_crm(r)", "mcot": "load_mcot(r)"}


@pytest.fixture(scope="module")
def plain(mmfaith_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """bin/ of a fresh venv holding mmfaith's wheel and its required dependencies only."""
    root = tmp_path_factory.mktemp("plain")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    bin_dir = root / "venv" / "bin"
    # --no-compile: the modules the test imports are compiled as it imports them; byte-compiling every installed
    # module at install is half the install's CPU time (25 CPU-s instead of 52 on a 2-core machine)
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-compile", str(mmfaith_wheel)],
                   check=True, cwd=root, capture_output=True)
    yield bin_dir
    shutil.rmtree(root, ignore_errors=True)


def _env(bin_dir: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}


def _mmfaith(bin_dir: Path, cwd: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(bin_dir / "mmfaith"), *args], cwd=cwd, env=_env(bin_dir), capture_output=True,
                          text=True, timeout=600)
    if ok:
        assert done.returncode == 0, f"mmfaith {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def test_plain_install_has_no_optional_package(plain: Path) -> None:
    probe = "import importlib.util as u\nfor m in %r:\n    try:\n        print(m, u.find_spec(m) is not None)\n" \
            "    except ModuleNotFoundError:\n        print(m, False)" % (OPTIONAL,)
    shown = subprocess.run([str(plain / "python"), "-c", probe], check=True, capture_output=True, text=True,
                           env=_env(plain)).stdout
    assert shown.split() == [w for m in OPTIONAL for w in (m, "False")], shown


def test_every_family_builds_runs_scores_reports_releases_verifies_and_loads(plain: Path, tmp_path: Path) -> None:
    builds = {family: subprocess.Popen([str(plain / "mmfaith"), "build", family, "--out", f"b-{family}",
                                        "--no-progress", *options], cwd=tmp_path, env=_env(plain),
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for family, (options, _) in FAMILIES.items()}
    for family, process in builds.items():
        output = process.communicate(timeout=600)[0]
        assert process.returncode == 0, f"build {family}:\n{output}"
    for family, (_, model) in FAMILIES.items():
        build = f"b-{family}"
        server = subprocess.Popen([str(plain / "mmfaith"), "serve-reference", family, "--dataset", build, "--model",
                                   model, "--port", "0"], cwd=tmp_path, env=_env(plain), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        try:
            line = server.stdout.readline()
            url = re.search(r"at (http://127\.0\.0\.1:\d+/v1)", line)
            assert url, line
            ran = _mmfaith(plain, tmp_path, "run", family, "--dataset", build, "--model", model, "--base-url",
                           url.group(1), "--out", f"r-{family}", "--no-progress")
        finally:
            server.terminate()
            server.wait(timeout=30)
        assert " 0 failed" in ran.stdout
        _mmfaith(plain, tmp_path, "score", family, "--dataset", build, "--predictions",
                 f"r-{family}/predictions.jsonl", "--from-run", "--out", f"s-{family}")
        reported = _mmfaith(plain, tmp_path, "report", f"s-{family}", "--out", f"rep-{family}")
        assert f"  {model}" in reported.stdout and (tmp_path / f"rep-{family}" / "report.md").is_file()
        if family == "crm":  # a text no cache holds needs Sentence-BERT, the crm extra: one line, no score dir
            lines = [json.loads(text) for text in (tmp_path / "r-crm" / "predictions.jsonl").read_text().splitlines()]
            cot = next(line for line in lines if line.get("probe") == "original_cot")
            cot["response"] = "1. A chain of thought that no shipped embedding holds, about a violet tram."
            (tmp_path / "changed.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
            scored = _mmfaith(plain, tmp_path, "score", family, "--dataset", build, "--predictions", "changed.jsonl",
                              "--from-run", "--out", "s-changed", ok=False)
            assert scored.returncode == 2 and scored.stdout == ""
            assert scored.stderr.count("\n") == 1 and "pip install 'mmfaith[crm]'" in scored.stderr, scored.stderr
            assert not (tmp_path / "s-changed").exists()
        _mmfaith(plain, tmp_path, "release", build, "--out", f"rel-{family}", "--name", f"org/{family}",
                 "--version", "1.0.0", "--include", "all")
        verified = _mmfaith(plain, tmp_path, "verify", f"rel-{family}")
        assert ": OK (" in verified.stdout
        loaded = subprocess.run([str(plain / "python"), "-c", f"from mmfaith.loaders import *; r = 'rel-{family}'; "
                                 f"print(len({LOADERS[family]}))"], cwd=tmp_path, env=_env(plain),
                                capture_output=True, text=True)
        assert loaded.returncode == 0 and int(loaded.stdout) > 0, loaded.stderr


def test_a_failed_release_leaves_nothing_behind(plain: Path, tmp_path: Path) -> None:
    build = tmp_path / "b"
    _mmfaith(plain, tmp_path, "build", "spd-faith", "--out", "b", "--per-tier", "1", "--multi", "0", "--no-progress")
    record = json.loads((build / "records.jsonl").read_text().splitlines()[0])
    (build / record["image_b"]).write_bytes(b"not the image the record hashed")
    failed = _mmfaith(plain, tmp_path, "release", "b", "--out", "rel", "--name", "org/x", "--version", "1.0.0",
                      "--include", "all", ok=False)
    assert failed.returncode == 2 and failed.stderr.startswith("mmfaith: error: ") and failed.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]


def test_the_readme_quickstart_profiles_all_four_families(plain: Path, tmp_path: Path) -> None:
    """`mmfaith quickstart` on the plain install: every family of the default suite scored, CRM included."""
    done = _mmfaith(plain, tmp_path, "quickstart", "--out", "q", "--no-progress")
    for role in ("oracle", "prior"):
        profile = json.loads((tmp_path / "q" / "profiles" / role / "profile.json").read_text())
        assert {name: entry["status"] for name, entry in profile["families"].items()} == {
            "spd-faith": "ok", "vfaith": "ok", "crm": "ok", "mcot": "ok"}, done.stdout
