"""`mmfaith release` of a VFaith build: configs `pairs` and `perception`, split `test`, loaded by plain
`datasets.load_dataset`, by `load_vfaith` and by the evaluator's opener, with every record intact."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets

from mmfaith.cli import main
from mmfaith.loaders import load_vfaith
from mmfaith.loaders.vfaith import open_vfaith_dataset
from tests.conftest import read_records


def _verified_copy(build: Path, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the build whose first pair is rejected and the others accepted; the rejected pair's id."""
    copy = tmp_path / "verified"
    shutil.copytree(build, copy)
    records = read_records(copy)
    for number, record in enumerate(records):
        record["verification"].update(status="rejected" if number == 0 else "accepted", annotators=["ann@x"])
    (copy / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return copy, records[0]["id"]


def test_a_release_loads_with_plain_datasets_and_leaves_rejected_pairs_out(vfaith_build: Path, tmp_path: Path,
                                                                         capsys) -> None:
    build, rejected_id = _verified_copy(vfaith_build, tmp_path)
    out = tmp_path / "release"
    assert main(["release", str(build), "--out", str(out), "--name", "org/vfaith-test", "--version", "1.0.0"]) == 0
    pairs = datasets.load_dataset(str(out), "pairs", split="test")
    perception = datasets.load_dataset(str(out), "perception", split="test")
    records = read_records(vfaith_build)
    assert len(pairs) == len(records) - 1 and rejected_id not in pairs["id"]
    assert len(perception) == len(records) - 1 and rejected_id not in perception["pair_id"]
    assert pairs.features["image_edited"].__class__.__name__ == "Image"
    first = pairs[0]
    assert first["answer_original"] != first["answer_edited"] and first["image_edited"].size[0] > 0
    assert set(perception[0]["answers"]) <= {"A", "B", "C", "D"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["family"] == "vfaith" and manifest["configs"] == {"pairs": len(records) - 1,
                                                                     "perception": len(records) - 1}
    assert manifest["excluded"] == {"perception_of_unreleased_pairs": 1, "rejected": 1}
    card = (out / "README.md").read_text()
    assert "config_name: perception" in card and "RWS" in card and "mmfaith-recolor" in card and "CC-BY" in card
    # The evaluator's opener reads the release back to the build's records (verification as released).
    by_id = {r["id"]: r for r in read_records(build)}
    opened = open_vfaith_dataset(out)
    assert all(pair.record == by_id[pair.id] for pair in opened.pairs)
    assert load_vfaith(out, "perception")[0]["id"] == perception[0]["id"]


def test_load_vfaith_reads_a_build_dir_as_release_rows(vfaith_build: Path) -> None:
    pairs = load_vfaith(vfaith_build, "pairs")
    assert sorted(pairs["id"]) == pairs["id"] == sorted(r["id"] for r in read_records(vfaith_build))
    assert json.loads(pairs[0]["build"])["template"] in ("color", "count", "existence", "relation")


def test_an_unverified_build_needs_include_all(vfaith_build: Path, tmp_path: Path, capsys) -> None:
    assert main(["release", str(vfaith_build), "--out", str(tmp_path / "r"), "--name", "x", "--version",
                 "1.0.0"]) == 2
    assert "--include all" in capsys.readouterr().err


def test_verify_checks_every_hash_and_row_of_a_vfaith_release(vfaith_build: Path, tmp_path: Path, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mmfaith.release.manifest import file_entry, manifest_bytes

    out = tmp_path / "release"
    assert main(["release", str(vfaith_build), "--out", str(out), "--name", "x", "--version", "1.0.0",
                 "--include", "all"]) == 0
    assert main(["verify", str(out)]) == 0
    assert "OK" in capsys.readouterr().out
    # A perception row whose answer set was changed, with the file hash in the manifest updated to match:
    # only the row's digest can tell.
    manifest = json.loads((out / "manifest.json").read_text())
    name = next(n for n in manifest["files"] if n.startswith("data/perception/"))
    table = pq.read_table(out / name)
    rows = table.to_pylist()
    rows[0]["answers"] = ["A", "B", "C", "D"]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), out / name)
    manifest["files"][name].update(file_entry(out / name))
    (out / "manifest.json").write_bytes(manifest_bytes(manifest))
    assert main(["verify", str(out)]) == 2
    assert f"{name} row 0 (id {rows[0]['id']}): record digest differs" in capsys.readouterr().err
