"""Determinism and resume of `mmfaith build spd-faith`: same inputs and seed, same bytes."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.errors import MmfaithError

from tests.conftest import kill_after_lines, read_records

BUILD_ARGS = ["--per-tier", "3", "--multi", "4", "--controls", "1", "--seed", "5", "--no-progress"]


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under root by relative path, except build.json (the one file allowed a time)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "build.json"}


def run_cli(out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mmfaith", "build", "spd-faith", "--out", str(out), *BUILD_ARGS, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def test_workers_do_not_change_a_single_byte(mixed_build: Path, tmp_path: Path) -> None:
    build_spd_faith(BuildRequest(out=tmp_path, per_tier=2, multi=4, controls=2, seed=0, progress=False, workers=2))
    reference, parallel = tree_bytes(mixed_build), tree_bytes(tmp_path)
    assert reference.keys() == parallel.keys()
    assert [k for k in reference if reference[k] != parallel[k]] == []


def test_a_killed_build_resumes_to_the_same_bytes(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert run_cli(reference).wait(timeout=300) == 0
    interrupted = tmp_path / "interrupted"
    records = interrupted / "records.jsonl"
    lines_before = kill_after_lines(run_cli(interrupted), records, 3)
    with open(records, "ab") as handle:  # a crash in the middle of a write leaves a torn line
        handle.write(b'{"id": "spdf-torn", "subset": "sin')
    resumed = run_cli(interrupted)
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr.decode()
    assert 3 <= lines_before < len(read_records(reference))
    expected, got = tree_bytes(reference), tree_bytes(interrupted)
    assert expected.keys() == got.keys()
    assert [k for k in expected if expected[k] != got[k]] == []


def test_a_finished_build_rerun_adds_nothing(mixed_build: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(mixed_build, copy)
    before = tree_bytes(copy)
    build_spd_faith(BuildRequest(out=copy, per_tier=2, multi=4, controls=2, seed=0, progress=False))
    assert tree_bytes(copy) == before


def test_resuming_with_other_settings_is_refused(mixed_build: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(mixed_build, copy)
    with pytest.raises(MmfaithError, match="other settings.*seed"):
        build_spd_faith(BuildRequest(out=copy, per_tier=2, multi=4, controls=2, seed=1, progress=False))


def test_larger_counts_extend_a_build(mixed_build: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(mixed_build, copy)
    before = read_records(copy)
    build_spd_faith(BuildRequest(out=copy, per_tier=3, multi=4, controls=2, seed=0, progress=False))
    after = read_records(copy)
    assert after[:len(before)] == before, "extending appends; nothing made before changes"
    fresh = tmp_path / "fresh"
    build_spd_faith(BuildRequest(out=fresh, per_tier=3, multi=4, controls=2, seed=0, progress=False))
    # The same pairs as a fresh build with the larger counts, in another order.
    assert sorted(r["id"] for r in after) == sorted(r["id"] for r in read_records(fresh))


def test_other_seeds_give_other_pairs(mixed_build: Path, tmp_path: Path) -> None:
    build_spd_faith(BuildRequest(out=tmp_path, per_tier=2, multi=4, controls=2, seed=1, progress=False))
    assert {r["id"] for r in read_records(tmp_path)} != {r["id"] for r in read_records(mixed_build)}
