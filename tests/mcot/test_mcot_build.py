"""`mmfaith build mcot`: V* Bench and HR-Bench in their published layouts (small fixtures written in those
layouts: tests/mcot_fixtures.py), the offline COCO default from the shared question generator, the loader."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmfaith.cli import main
from mmfaith.loaders.mcot.dataset import open_mcot_dataset
from mmfaith.schema import schema_errors
from tests.mcot_fixtures import hrbench_rows, vstar_rows, write_hrbench, write_vstar_folder, write_vstar_parquet


def records(build: Path) -> list[dict]:
    return [json.loads(line) for line in (build / "records.jsonl").read_text().splitlines()]


def test_vstar_folder_reads_questions_options_gold_and_annotation_boxes(tmp_path: Path) -> None:
    source = write_vstar_folder(tmp_path / "vstar_bench")
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(source), "--out", str(tmp_path / "b")]) == 0
    built = records(tmp_path / "b")
    rows = vstar_rows()
    assert [r["id"] for r in built] == [f"vstar-{n}" for n in range(6)]
    for record, row in zip(built, rows):
        assert schema_errors("mcot_item", record) == []
        assert record["category"] == row["category"]
        # the gold letter names the annotation's first option (V*'s official scoring: option 0 is right)
        gold = next(o["text"] for o in record["options"] if o["label"] == record["answer"])
        assert gold == row["_annotation"]["options"][0]
        assert "Answer with" not in record["question"] and "(A)" not in record["question"]
        assert [t["bbox"] for t in record["targets"]] == row["_annotation"]["bbox"]
        assert [t["label"] for t in record["targets"]] == row["_annotation"]["target_object"]
        assert (record["width"], record["height"]) == (640, 480)
        # the image is the decoded JPEG, stored losslessly as PNG
        with Image.open(tmp_path / "b" / record["image"]) as stored, Image.open(source / row["image"]) as original:
            assert np.array_equal(np.asarray(stored), np.asarray(original.convert("RGB")))
    assert json.loads((tmp_path / "b" / "build.json").read_text())["recipe"]["family"] == "mcot"


def test_two_workers_write_the_same_build_as_one(tmp_path: Path) -> None:
    source = write_vstar_folder(tmp_path / "vstar_bench")
    for workers in ("1", "2"):
        assert main(["build", "mcot", "--source", "vstar", "--source-path", str(source), "--workers", workers,
                     "--no-progress", "--out", str(tmp_path / workers)]) == 0
    one, two = tmp_path / "1", tmp_path / "2"
    assert (two / "records.jsonl").read_bytes() == (one / "records.jsonl").read_bytes()
    assert sorted(p.name for p in (two / "images").iterdir()) == sorted(p.name for p in (one / "images").iterdir())
    assert all((two / "images" / p.name).read_bytes() == p.read_bytes() for p in (one / "images").iterdir())
    assert json.loads((two / "build.json").read_text())["executor"] == {"kind": "local", "workers": 2,
                                                                        "ray_address": None, "gpus_per_task": 0.0}


def test_vstar_parquet_mirror_with_renamed_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parquet = write_vstar_parquet(tmp_path / "vstar.parquet", rename={"text": "prompt", "label": "gold"})
    out = tmp_path / "b"
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(parquet), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "row 0" in error and "no column 'text'" in error and "--columns text=COLUMN" in error
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(parquet), "--columns", "text=prompt,label=gold",
                 "--out", str(out)]) == 0
    built = records(out)
    folder_build = tmp_path / "f"
    main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(tmp_path / "v")),
          "--out", str(folder_build)])
    # the mirror holds the same questions and images; it has no per-image annotations, so no targets
    for mirror, folder in zip(built, records(folder_build)):
        assert {k: mirror[k] for k in ("question", "options", "answer", "category", "image_sha256")} == \
               {k: folder[k] for k in ("question", "options", "answer", "category", "image_sha256")}
        assert mirror["targets"] == [] and mirror["build"]["columns"] == {"label": "gold", "text": "prompt"}
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(parquet), "--columns", "txt=prompt",
                 "--out", str(tmp_path / "c")]) == 2
    assert "txt is not a field of vstar" in capsys.readouterr().err


@pytest.mark.parametrize("tsv", [False, True])
def test_hrbench_parquet_and_tsv(tmp_path: Path, tsv: bool) -> None:
    folder = tmp_path / "HR-Bench"
    write_hrbench(folder, "8k", tsv=tsv)
    assert main(["build", "mcot", "--source", "hrbench-8k", "--source-path", str(folder), "--out", str(tmp_path / "b")]) == 0
    built = records(tmp_path / "b")
    rows = hrbench_rows()
    assert [r["category"] for r in built] == ["single", "cross", "single", "cross"]
    for record, row in zip(built, rows):
        assert record["answer"] == row["answer"] and record["source"]["cycle_category"] == row["cycle_category"]
        assert [o["label"] for o in record["options"]] == ["A", "B", "C", "D"]
        assert {o["label"]: o["text"] for o in record["options"]}[record["answer"]] == row[row["answer"]]
        assert record["targets"] == [] and record["width"] == 1600
    if tsv:  # the last row's image is row 0's, by index (VLMEvalKit's convention)
        assert built[-1]["image_sha256"] == built[0]["image_sha256"]
        assert len(list((tmp_path / "b" / "images").iterdir())) == 3
    assert main(["build", "mcot", "--source", "hrbench-4k", "--source-path", str(folder), "--out", str(tmp_path / "c")]) == 2


def test_bad_rows_name_the_file_and_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_vstar_folder(tmp_path / "v", count=2)
    lines = (source / "test_questions.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["label"] = "E"
    (source / "test_questions.jsonl").write_text(lines[0] + "\n" + json.dumps(bad) + "\n")
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(source), "--out", str(tmp_path / "b")]) == 2
    assert "test_questions.jsonl:2: the answer 'E' is not one of the option letters" in capsys.readouterr().err
    assert main(["build", "mcot", "--source", "vstar", "--out", str(tmp_path / "b")]) == 2
    assert "needs --source-path" in capsys.readouterr().err
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(tmp_path / "nope"), "--out",
                 str(tmp_path / "b")]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_coco_default_small_targets_from_the_shared_generator(tmp_path: Path) -> None:
    out = tmp_path / "coco"
    assert main(["build", "mcot", "--out", str(out)]) == 0
    built = records(out)
    assert built and {r["category"] for r in built} <= {"color", "relation"}
    for record in built:
        assert schema_errors("mcot_item", record) == []
        subject = record["targets"][0]
        _, _, w, h = subject["bbox"]
        assert w * h < 0.01 * record["width"] * record["height"]  # V*-style: the asked-about object under 1 %
        assert record["source"]["template"] == record["category"]
        if record["category"] == "relation":
            assert len(record["targets"]) == 2 and {o["text"] for o in record["options"]} == {"left", "right"}
            gold = next(o["text"] for o in record["options"] if o["label"] == record["answer"])
            assert gold == record["source"]["facts"]["relation"]
    again = tmp_path / "again"
    main(["build", "mcot", "--out", str(again)])
    assert (again / "records.jsonl").read_bytes() == (out / "records.jsonl").read_bytes()
    timeless = [{k: v for k, v in json.loads((folder / "build.json").read_text()).items()
                 if k not in ("started", "finished", "seconds")} for folder in (again, out)]
    assert timeless[0] == timeless[1] and timeless[0]["family"] == "mcot" and timeless[0]["status"] == "complete"
    dataset = open_mcot_dataset(out)
    assert [item.id for item in dataset.items] == [r["id"] for r in built]
    assert all(item.image_path.is_file() and item.source_key == item.record["image_sha256"] for item in dataset.items)


def test_preview_shows_each_question_with_its_target_boxes(tmp_path: Path) -> None:
    from mmfaith.builders.mcot.preview import CELLS_PER_ROW, TARGET_COLORS, THUMB_WIDTH
    from mmfaith.builders.preview_sheet import KEY_HEIGHT, PADDING

    source = write_vstar_folder(tmp_path / "vstar_bench")
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(source), "--no-progress",
                 "--out", str(tmp_path / "b")]) == 0
    with Image.open(tmp_path / "b" / "preview.png") as sheet:
        pixels = np.asarray(sheet.convert("RGB"))
    assert pixels.shape[1] == CELLS_PER_ROW * (THUMB_WIDTH + PADDING) + PADDING
    built = records(tmp_path / "b")
    for index, record in enumerate(built[:CELLS_PER_ROW]):  # the first row: one cell per question
        scale = THUMB_WIDTH / record["width"]
        x, y, _, _ = record["targets"][0]["bbox"]
        left, top = PADDING + index * (THUMB_WIDTH + PADDING) + x * scale, KEY_HEIGHT + PADDING + y * scale
        near = pixels[int(top) - 3:int(top) + 4, int(left) - 3:int(left) + 4]
        assert (near == TARGET_COLORS[0]).all(axis=-1).any()


def test_loader_refuses_a_broken_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(tmp_path / "v", 2)),
          "--out", str(out)])
    lines = (out / "records.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["answer"]
    (out / "records.jsonl").write_text(lines[0] + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(Exception, match=r"records.jsonl:2: not an MCoT record: .*'answer' is a required property"):
        open_mcot_dataset(out)


FROM_HUB = """
import sys
from huggingface_hub import HfApi
api = HfApi(token="tok")
for repo, folder in (("craigwu/vstar_bench", sys.argv[1]), ("DreamMr/HR-Bench", sys.argv[2])):
    api.create_repo(repo, repo_type="dataset")
    api.upload_folder(folder_path=folder, repo_id=repo, repo_type="dataset")
from mmfaith.cli import main
assert main(["build", "mcot", "--source", "vstar", "--source-path", "craigwu/vstar_bench", "--out", "hub-vstar"]) == 0
assert main(["build", "mcot", "--source", "hrbench-4k", "--source-path", "DreamMr/HR-Bench", "--out", "hub-hr"]) == 0
"""


def test_hub_ids_are_fetched_with_huggingface_hub(tmp_path: Path) -> None:
    """Both sources by Hub id through huggingface_hub against the local fake Hub (tests/hub_server.py): the same
    records as from the folders, the snapshot's commit as the revision; HR-Bench fetches only its size's file."""
    import os
    import subprocess
    import sys

    from tests.hub_server import FakeHub

    vstar = write_vstar_folder(tmp_path / "vstar")
    hr = tmp_path / "hr"
    write_hrbench(hr, "4k")
    write_hrbench(hr, "8k")
    fake = FakeHub("tok").start()
    env = {**os.environ, "HF_ENDPOINT": fake.url, "HF_TOKEN": "tok", "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HOME": str(tmp_path / "hf"),
           "PYTHONPATH": str(Path(__file__).parent.parent.parent)}
    try:
        done = subprocess.run([sys.executable, "-c", FROM_HUB, str(vstar), str(hr)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
    finally:
        fake.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    for hub_build, source, path in (("hub-vstar", "vstar", vstar), ("hub-hr", "hrbench-4k", hr)):
        local = tmp_path / f"local-{source}"
        assert main(["build", "mcot", "--source", source, "--source-path", str(path), "--out", str(local)]) == 0
        fetched = records(tmp_path / hub_build)
        assert [(r["id"], r["question"], r["answer"], r["image_sha256"], r["targets"]) for r in fetched] == \
               [(r["id"], r["question"], r["answer"], r["image_sha256"], r["targets"]) for r in records(local)]
        assert all(len(r["source"]["revision"]) == 40 for r in fetched)
    snapshots = list((tmp_path / "hf").rglob("hr_bench_*"))
    assert {p.name for p in snapshots if p.is_file() or p.is_symlink()} == {"hr_bench_4k.parquet"}
