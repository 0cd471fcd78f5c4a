"""Bad input to `mmfaith build spd-faith` gets one clear error naming the file, line or field."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mmfaith.cli import main

from tests.conftest import read_records, write_subset_annotations


def build_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(["build", "spd-faith", "--per-tier", "1", "--no-progress", *args])
    message = capsys.readouterr().err
    assert code == 2, message
    assert message.startswith("mmfaith: error: ") and message.count("\n") == 1, message
    return message


def test_missing_annotations_file(capsys, tmp_path: Path, sample) -> None:
    missing = tmp_path / "nope.json"
    message = build_error(capsys, "--coco-annotations", str(missing), "--images", str(sample[1]), "--out", str(tmp_path / "o"))
    assert str(missing) in message and "not found" in message


def test_malformed_annotations_name_the_line(capsys, tmp_path: Path, sample) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "images": [],\n  "annotations": [,]\n}\n')
    message = build_error(capsys, "--coco-annotations", str(broken), "--images", str(sample[1]), "--out", str(tmp_path / "o"))
    assert f"{broken}:3:" in message


def test_annotations_without_coco_lists(capsys, tmp_path: Path, sample) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"images": [], "annotations": []}))
    message = build_error(capsys, "--coco-annotations", str(odd), "--images", str(sample[1]), "--out", str(tmp_path / "o"))
    assert "'categories'" in message


def test_unknown_category(capsys, tmp_path: Path, sample) -> None:
    path = write_subset_annotations(sample, tmp_path / "a.json", [30])
    data = json.loads(path.read_text())
    data["annotations"][0]["category_id"] = 999
    path.write_text(json.dumps(data))
    message = build_error(capsys, "--coco-annotations", str(path), "--images", str(sample[1]), "--out", str(tmp_path / "o"))
    assert f"annotation {data['annotations'][0]['id']} has unknown category_id 999" in message


def _copy_images(sample, tmp_path: Path, image_id: int) -> tuple[Path, Path]:
    images = tmp_path / "images"
    images.mkdir()
    name = f"{image_id:012d}.jpg"
    shutil.copyfile(sample[1] / name, images / name)
    return write_subset_annotations(sample, tmp_path / "a.json", [image_id]), images / name


def test_listed_image_missing(capsys, tmp_path: Path, sample) -> None:
    annotations, image = _copy_images(sample, tmp_path, 30)
    image.unlink()
    message = build_error(capsys, "--coco-annotations", str(annotations), "--images", str(image.parent), "--out", str(tmp_path / "o"))
    assert str(image) in message and "not found" in message
    build = json.loads((tmp_path / "o" / "build.json").read_text())
    assert build["status"] == "failed" and str(image) in build["error"]  # never left "running"


def _two_images_one_bad(sample, tmp_path: Path, spoil) -> tuple[Path, Path, Path]:
    """Annotations of a good and a bad image (spoiled by `spoil`) in one folder; returns them and the bad one."""
    images = tmp_path / "images"
    images.mkdir()
    for image_id in (30, 49):
        shutil.copyfile(sample[1] / f"{image_id:012d}.jpg", images / f"{image_id:012d}.jpg")
    bad = images / f"{30:012d}.jpg"
    spoil(bad)
    return write_subset_annotations(sample, tmp_path / "a.json", [30, 49]), images, bad


@pytest.mark.parametrize("spoil, reason", [
    (lambda p: p.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg"), "cannot decode"),
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "cannot decode"),  # truncated
])
def test_an_unreadable_source_image_is_skipped_and_the_build_goes_on(capsys, tmp_path: Path, sample, spoil,
                                                                     reason: str) -> None:
    annotations, images, bad = _two_images_one_bad(sample, tmp_path, spoil)
    args = ["build", "spd-faith", "--coco-annotations", str(annotations), "--images", str(images),
            "--controls", "2", "--no-progress", "--out", str(tmp_path / "o")]
    assert main(args) == 0, capsys.readouterr().err
    rejected = read_records(tmp_path / "o", "rejected.jsonl")
    skipped = [r for r in rejected if r["stage"] == "source"]
    assert skipped and all(str(bad) in r["reason"] and reason in r["reason"] for r in skipped)
    build = json.loads((tmp_path / "o" / "build.json").read_text())
    assert build["status"] == "complete" and build["counts"]["rejected_by_stage"]["source"] == len(skipped)
    assert len(read_records(tmp_path / "o")) == 1  # the good image's control
    assert main(args) == 0  # a resumed build does not stop on it either
    assert read_records(tmp_path / "o", "rejected.jsonl") == rejected


def test_an_image_over_the_pixel_limit_is_skipped(capsys, tmp_path: Path, sample) -> None:
    annotations, images, bad = _two_images_one_bad(sample, tmp_path, lambda p: None)
    out = tmp_path / "o"
    assert main(["build", "spd-faith", "--coco-annotations", str(annotations), "--images", str(images),
                 "--controls", "2", "--max-pixels", "10000", "--no-progress", "--out", str(out)]) == 0
    reasons = {r["file_name"]: r["reason"] for r in read_records(out, "rejected.jsonl") if r["stage"] == "source"}
    assert len(reasons) == 2 and all("exceeds the limit of 10000" in reason for reason in reasons.values())


@pytest.mark.parametrize("value", ["0", "-5"])
def test_max_pixels_must_be_positive(capsys, tmp_path: Path, value: str) -> None:
    message = build_error(capsys, "--max-pixels", value, "--out", str(tmp_path / "o"))
    assert f"--max-pixels must be 1 or more, not {value}" in message
    assert not (tmp_path / "o").exists()


def test_out_that_is_a_file(capsys, tmp_path: Path) -> None:
    (tmp_path / "o").write_text("mine")
    message = build_error(capsys, "--out", str(tmp_path / "o"))
    assert f"--out {tmp_path / 'o'}: is a file, not a folder" in message
    message = build_error(capsys, "--out", str(tmp_path / "o" / "sub"))
    assert f"{tmp_path / 'o'} is a file, not a folder" in message and "--out" in message
    assert (tmp_path / "o").read_text() == "mine"


def test_out_that_cannot_be_created(capsys) -> None:
    message = build_error(capsys, "--out", "/proc/mmfaith-no-such/o")  # /proc takes no new folders, even from root
    assert "--out /proc/mmfaith-no-such/o" in message and "choose another --out" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder: permissions cannot refuse it")
def test_out_that_is_read_only(capsys, tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir(mode=0o500)
    message = build_error(capsys, "--out", str(tmp_path / "ro"))
    assert "is not writable" in message and "--out" in message


def test_resume_into_a_folder_whose_records_are_not_mmfaiths(capsys, tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "records.jsonl").write_text('{"id": 1, "text": "my own data"}\n')
    message = build_error(capsys, "--out", str(out))
    assert f"{out / 'records.jsonl'}:1: not a line of an mmfaith SPD-Faith build" in message and "new --out" in message
    assert sorted(p.name for p in out.iterdir()) == ["records.jsonl"]  # nothing written there, not even build.json


def test_resume_after_an_edited_png_was_deleted_rebuilds_it(capsys, tmp_path: Path) -> None:
    out = tmp_path / "o"
    args = ["build", "spd-faith", "--per-tier", "1", "--multi", "1", "--controls", "1", "--no-progress",
            "--out", str(out)]
    assert main(args) == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "build.json"}
    records = read_records(out)
    (out / records[0]["image_b"]).unlink()
    (out / records[0]["image_a"]).unlink()
    (out / records[-1]["image_b"]).unlink()  # the control
    assert main(args) == 0, capsys.readouterr().err
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != "build.json"}
    assert after == before
    assert json.loads((out / "build.json").read_text())["status"] == "complete"


def test_only_one_of_annotations_and_images(capsys, tmp_path: Path, sample) -> None:
    message = build_error(capsys, "--coco-annotations", str(sample[0]), "--out", str(tmp_path / "o"))
    assert "--images" in message


def test_unknown_edit_type(capsys, tmp_path: Path) -> None:
    message = build_error(capsys, "--edit-types", "color,blur", "--out", str(tmp_path / "o"))
    assert "--edit-types" in message and "blur" in message


def test_llm_planner_needs_a_model(capsys, tmp_path: Path) -> None:
    message = build_error(capsys, "--planner", "llm", "--out", str(tmp_path / "o"))
    assert "--planner-model" in message


def test_lama_without_checkpoint(capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("LAMA_MODEL", raising=False)
    message = build_error(capsys, "--inpainter", "lama", "--out", str(tmp_path / "o"))
    assert "--lama-model" in message and "LAMA_MODEL" in message
