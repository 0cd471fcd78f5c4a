"""`mmfaith build vfaith` on the embedded COCO sample (with the variants of its one removable scene and of its one
recolourable one that tests/conftest.py's removable_sample adds): real images, real annotations, real edits.

Every template makes pairs whose edited answer is another option and whose edited image really has
it (checked here from the pixels and the annotations, not from the builder's own claims); the gates
hold; perception items come with the pairs; the build is byte-identical with a seed, extends and
resumes, and remakes what was lost.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.colors import object_color
from mmfaith.builders.edits import dilate
from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.builders.recolour import BAND
from mmfaith.builders.vfaith.build import BuildRequest, build_vfaith
from mmfaith.cli import main
from mmfaith.errors import MmfaithError
from mmfaith.images import read_rgb, sha256_file
from mmfaith.schema import schema_errors
from tests.conftest import read_records


def _scene_of(record: dict, sample: tuple[Path, Path]) -> tuple:
    source = CocoSource(*sample)
    scene = source.scene(record["source"]["image_id"])
    return scene, {inst.ann_id: inst for inst in scene.instances}


def test_every_template_makes_pairs_whose_edit_makes_the_planned_option_correct(
        vfaith_build: Path, removable_sample: tuple[Path, Path]) -> None:
    records = read_records(vfaith_build)
    templates = {record["build"]["template"] for record in records}
    # No relation pair: the embedded sample's one movable relation (image 127's potted plant, a blur among
    # other potted plants) is refused since issue 29 (targets.nameable_reason); coco128 builds make them.
    assert templates == {"color", "count", "existence"}
    for record in records:
        assert schema_errors("vfaith_pair", record) == []
        labels = {option["label"]: option["text"] for option in record["options"]}
        assert record["answer_original"] in labels and record["answer_edited"] in labels
        assert record["answer_original"] != record["answer_edited"]
        gates = record["build"]["gates"]
        original = read_rgb(vfaith_build / record["image_original"], 10**8)
        edited = read_rgb(vfaith_build / record["image_edited"], 10**8)
        assert sha256_file(vfaith_build / record["image_edited"]) == record["image_edited_sha256"]
        scene, instances = _scene_of(record, removable_sample)
        cue = instances[int(record["edit"]["cue_id"].removeprefix("ann"))]
        mask = cue.mask(scene.height, scene.width)
        template, target = record["build"]["template"], labels[record["answer_edited"]]
        assert gates["outside_changed_pixels"] == 0
        cropped = record["edit"]["operation"] == "crop"
        if cropped:  # the made image is a rectangle of the photo without the cue (builders/vfaith/reframe.py)
            assert template in ("count", "existence")
            assert gates["delta_e"] is None and gates["kept_share"] >= gates["min_kept_share"]
            photo_rgb, made_rgb = (original, edited) if record["build"]["source_photo"] == "image_original" else \
                (edited, original)
            x, y, w, h = record["build"]["plan"]["crop"]
            assert np.array_equal(made_rgb, photo_rgb[y:y + h, x:x + w]) and not mask[y:y + h, x:x + w].any()
        else:
            assert gates["delta_e"] >= gates["min_delta_e"]
            assert gates["fill_texture"] is None or gates["fill_texture"] >= gates["min_fill_texture"]
            changed = np.any(original != edited, axis=-1)
        if template == "color":  # the object now reads as the planned colour, by the generator's own rule
            assert object_color(edited, mask).name == target != labels[record["answer_original"]]
            # The recolour follows the refined outline (builders/recolour.py): within its band around the polygon.
            assert not (changed & ~dilate(mask, BAND + 2)).any()
        elif template in ("count", "existence"):  # the cue is gone from the made image: most of its pixels changed
            assert cropped or changed[mask].mean() > 0.5
            # A reversed pair shows the removal as the original and the photo as the edited image; either way
            # the photo's answer is the annotated count and the made image's one less.
            photo = record["build"]["source_photo"]
            made = "image_edited" if photo == "image_original" else "image_original"
            answer = {side: labels[record[f"answer_{side.removeprefix('image_')}"]] for side in (photo, made)}
            count = sum(inst.category == cue.category for inst in instances.values())
            assert answer[photo] == ("yes" if template == "existence" else str(count))
            assert answer[made] == ("no" if template == "existence" else str(count - 1))
            assert sha256_file(vfaith_build / record[photo]) == sha256_file(vfaith_build / f"images/original/"
                                                                           f"{scene.image_id:012d}.png")
        else:  # relation: something moved, and the facts after the edit flip the side
            assert changed[mask].mean() > 0.3
            assert record["build"]["facts_edited"]["relation"] == target != record["build"]["facts"]["relation"]


def test_perception_items_come_with_the_pairs(vfaith_build: Path) -> None:
    records = {record["id"]: record for record in read_records(vfaith_build)}
    items = read_records(vfaith_build, "perception.jsonl")
    assert sorted(item["pair_id"] for item in items) == sorted(records)
    for item in items:
        assert schema_errors("vfaith_perception", item) == []
        pair = records[item["pair_id"]]
        assert item["image"] == pair["image_edited"] and item["image_sha256"] == pair["image_edited_sha256"]
        assert item["answers"] and set(item["answers"]) != set(item["answers_original"])
        texts = {option["label"]: option["text"] for option in item["options"]}
        assert len(set(texts.values())) == 4
        if pair["build"]["template"] == "color":
            after = {option["label"]: option["text"] for option in pair["options"]}[pair["answer_edited"]]
            assert [texts[label] for label in item["answers"]] == [f"The {pair['build']['facts']['category']} is {after}."]


def test_build_json_reports_counts_letters_and_licences(vfaith_build: Path) -> None:
    info = json.loads((vfaith_build / "build.json").read_text())
    records = read_records(vfaith_build)
    assert info["status"] == "complete" and info["family"] == "vfaith"
    assert sum(info["counts"]["accepted"].values()) == len(records)
    letters = info["gold_letter_counts"]
    assert sum(letters["original"].values()) == sum(letters["edited"].values()) == len(records)
    assert info["counts"]["skipped_images"]["noderivs"] > 0
    assert not any("NoDerivs" in record["source"]["license"]["name"] for record in records)
    rejected = read_records(vfaith_build, "rejected.jsonl")
    assert sum(info["counts"]["rejected_by_stage"].values()) == len(rejected)
    assert all(line["stage"] in ("plan", "gate", "answer", "source", "gold_balance") and line["reason"]
               for line in rejected)
    assert (vfaith_build / "preview.png").stat().st_size > 10_000


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in ("build.json", "preview.png")}


def _lines(folder: Path) -> dict[str, list[str]]:
    return {name: sorted((folder / name).read_text().splitlines())
            for name in ("records.jsonl", "perception.jsonl", "rejected.jsonl")}


def _request(sample: tuple[Path, Path], out: Path, **settings) -> BuildRequest:
    """The fixture build's recipe (tests/conftest.py vfaith_build) with `settings` changed."""
    return BuildRequest(**{"out": out, "annotations": sample[0], "images": sample[1], "per_template": 4,
                           "inpainter": InpainterSpec("patchmatch"), "progress": False, **settings})


def test_same_seed_same_bytes_with_two_workers(vfaith_build: Path, removable_sample: tuple[Path, Path],
                                               tmp_path: Path) -> None:
    again = tmp_path / "again"
    build_vfaith(_request(removable_sample, again, workers=2))
    assert _files(again) == _files(vfaith_build)


def test_a_build_extends_and_repairs(vfaith_build: Path, removable_sample: tuple[Path, Path], tmp_path: Path) -> None:
    grown = tmp_path / "grow"
    build_vfaith(_request(removable_sample, grown, per_template=1))
    assert len(read_records(grown)) < len(read_records(vfaith_build))
    # Extending to the fixture's counts makes the fixture's pairs and images (the lines in another order:
    # questions past a full quota were left for later).
    build_vfaith(_request(removable_sample, grown))
    images = {name: digest for name, digest in _files(grown).items() if name.startswith("images/")}
    assert images == {name: digest for name, digest in _files(vfaith_build).items() if name.startswith("images/")}
    assert _lines(grown) == _lines(vfaith_build)
    # A lost edited PNG and a lost perception line come back byte-identical; nothing else is added.
    before = _files(grown)
    first = read_records(grown)[0]
    (grown / first["image_edited"]).unlink()
    lines = (grown / "perception.jsonl").read_text().splitlines(keepends=True)
    (grown / "perception.jsonl").write_text("".join(line for line in lines if first["id"] not in line))
    build_vfaith(_request(removable_sample, grown))
    after = _files(grown)
    assert after.pop("perception.jsonl") != before.pop("perception.jsonl")  # the line is back, at the end
    assert after == before and _lines(grown) == _lines(vfaith_build)


def test_another_recipe_is_refused_and_the_cli_builds(vfaith_build: Path, removable_sample: tuple[Path, Path],
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(MmfaithError, match="seed differ"):
        build_vfaith(_request(removable_sample, vfaith_build, seed=1))
    out = tmp_path / "cli"
    # The removable sample, not the embedded one: no colour question of the embedded sample has a recolour target
    # since vases are not recoloured; its airplane variant has one (tests/conftest.py RECOLOUR_IMAGE).
    annotations, images = removable_sample
    assert main(["build", "vfaith", "--out", str(out), "--per-template", "1", "--templates", "color,count",
                 "--coco-annotations", str(annotations), "--images", str(images), "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "built 2 pairs (color 1, count 1)" in said and "gold letters" in said
    assert main(["build", "vfaith", "--out", str(tmp_path / "bad"), "--templates", "colour"]) == 2
    assert "--templates" in capsys.readouterr().err
