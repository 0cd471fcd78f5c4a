"""MCoT release: one config per source, verified by `mmfaith verify`, loaded by plain `datasets` and read back
equal by the evaluator's loader; byte-reproducible."""
from __future__ import annotations

import json
from pathlib import Path

import datasets

from mmfaith.cli import main
from mmfaith.loaders.mcot import load_mcot, open_mcot_dataset
from tests.mcot_fixtures import write_vstar_folder


def test_release_verify_and_load(tmp_path: Path, capsys) -> None:
    build = tmp_path / "build"
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(tmp_path / "v", 4)),
                 "--out", str(build)]) == 0
    assert main(["release", str(build), "--out", str(tmp_path / "r0"), "--name", "org/mcot", "--version", "1.0.0"]) == 2
    assert "no question is verified" in capsys.readouterr().err
    for name in ("r1", "r2"):
        assert main(["release", str(build), "--out", str(tmp_path / name), "--name", "org/mcot", "--version", "1.0.0",
                     "--include", "all"]) == 0
    for file in ("manifest.json", "README.md", "data/vstar/test-00000-of-00001.parquet"):
        assert (tmp_path / "r1" / file).read_bytes() == (tmp_path / "r2" / file).read_bytes()
    assert main(["verify", str(tmp_path / "r1")]) == 0
    manifest = json.loads((tmp_path / "r1" / "manifest.json").read_text())
    assert manifest["family"] == "mcot" and manifest["configs"] == {"vstar": 4}
    plain = datasets.load_dataset(str(tmp_path / "r1"), "vstar", split="test")
    built = {item.id: item.record for item in open_mcot_dataset(build).items}
    assert sorted(plain["id"]) == sorted(built)
    row = plain[0]
    assert row["options"] == built[row["id"]]["options"] and row["answer"] == built[row["id"]]["answer"]
    assert row["targets"][0]["bbox"] == built[row["id"]]["targets"][0]["bbox"]
    assert row["image"].size == (640, 480)
    released = {item.id: item.record for item in open_mcot_dataset(tmp_path / "r1").items}
    assert released == built
    assert len(load_mcot(tmp_path / "r1", "vstar")) == 4 and len(load_mcot(build)) == 4
    # a changed shard is caught
    shard = tmp_path / "r1" / "data/vstar/test-00000-of-00001.parquet"
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    assert main(["verify", str(tmp_path / "r1")]) == 2
