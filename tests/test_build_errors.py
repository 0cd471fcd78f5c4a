"""Bad input to `mmfaith build spd-faith` gets one clear error naming the file, line or field."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmfaith.cli import main

from .conftest import write_subset_annotations


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


def test_unreadable_image(capsys, tmp_path: Path, sample) -> None:
    annotations, image = _copy_images(sample, tmp_path, 30)
    image.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg")
    message = build_error(capsys, "--coco-annotations", str(annotations), "--images", str(image.parent), "--out", str(tmp_path / "o"))
    assert str(image) in message and "cannot decode" in message


def test_image_over_the_pixel_limit(capsys, tmp_path: Path, sample) -> None:
    annotations, image = _copy_images(sample, tmp_path, 30)
    message = build_error(capsys, "--coco-annotations", str(annotations), "--images", str(image.parent),
                          "--max-pixels", "10000", "--out", str(tmp_path / "o"))
    assert str(image) in message and "exceeds the limit of 10000" in message


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
