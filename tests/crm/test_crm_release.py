"""CRM release: one config per mask mode and style, split test; plain `datasets` loads it; `load_crm`
and the evaluator's dataset opener read it back to the same records; byte-reproducible."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_file
from mmfaith.loaders import load_crm
from mmfaith.loaders.crm import open_crm_dataset


@pytest.fixture(scope="module")
def crm_release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("crm-release")
    build = root / "build"
    assert main(["build", "crm", "--out", str(build), "--max-items", "4", "--mask-style", "black,blur",
                 "--no-progress"]) == 0
    release = root / "release"
    assert main(["release", str(build), "--out", str(release), "--name", "me/crm-mini", "--version", "1.0.0",
                 "--include", "all"]) == 0
    return build, release


def test_configs_and_plain_datasets_loading(crm_release: tuple[Path, Path]) -> None:
    build, release = crm_release
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["configs"] == {"specific-black": 4, "specific-blur": 4, "random-black": 4, "random-blur": 4}
    assert manifest["family"] == "crm" and manifest["split"] == "test"
    script = ("import datasets, json, sys\n"
              "rows = datasets.load_dataset(sys.argv[1], 'random-blur', split='test')\n"
              "print(json.dumps([len(rows), rows[0]['mode'], rows[0]['style'], rows[0]['image'].size[0] > 0,"
              " sorted(rows.features)]))")
    out = subprocess.run([sys.executable, "-c", script, str(release)], capture_output=True, text=True, check=True)
    count, mode, style, has_image, columns = json.loads(out.stdout.strip().splitlines()[-1])
    assert (count, mode, style, has_image) == (4, "random", "blur", True)
    assert {"image", "image_original", "question", "options", "answer", "regions", "mask_boxes"} <= set(columns)


def test_verify_checks_a_crm_release(crm_release: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil

    from mmfaith.release.manifest import verify_release

    build, release = crm_release
    report = verify_release(release)
    assert report.problems == [] and report.rows == 16
    damaged = tmp_path / "damaged"
    shutil.copytree(release, damaged)
    shard = next((damaged / "data" / "random-blur").glob("*.parquet"))
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    assert any("differs from the manifest" in problem for problem in verify_release(damaged).problems)
    assert main(["verify", str(release)]) == 0


def test_release_reads_back_to_the_build_records(crm_release: tuple[Path, Path]) -> None:
    build, release = crm_release
    built = {item.id: item.record for item in open_crm_dataset(build).items}
    released = open_crm_dataset(release)
    assert {item.id: item.record for item in released.items} == built
    assert all(item.variants["specific-blur"].path.is_file() for item in released.items)
    from_build = load_crm(build, "specific-black")
    from_release = load_crm(release, "specific-black")
    assert from_build["id"] == from_release["id"] and from_build["record"] == from_release["record"]


def test_release_is_byte_reproducible_and_accepted_only_by_default(crm_release: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    build, release = crm_release
    again = tmp_path / "again"
    assert main(["release", str(build), "--out", str(again), "--name", "me/crm-mini", "--version", "1.0.0",
                 "--include", "all"]) == 0
    assert {p.relative_to(again): sha256_file(p) for p in again.rglob("*") if p.is_file()} == \
           {p.relative_to(release): sha256_file(p) for p in release.rglob("*") if p.is_file()}
    from mmfaith.release.declaration import declaration_of
    from mmfaith.release.writer import ReleaseRequest, write_release

    with pytest.raises(MmfaithError, match="no question is verified"):
        write_release(declaration_of("crm"), ReleaseRequest(build=build, out=tmp_path / "none", name="me/x",
                                                            version="1.0.0"))
