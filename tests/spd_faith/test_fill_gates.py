"""Issue 29: the fill-surround, fill-blotch and ground gates (builders/gates.py) on edits a careful annotator judged.

Held-out cases from the embedded sample, each labelled by looking at it (benchmarks/audit/spd-faith.jsonl): the
PatchMatch fill of the hole (mask grown by the default 7 px) is read by the three fill gates. The fills a person
rejected as blotches passed the texture gate alone; the fills a person accepted pass all three.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmfaith.builders.coco_source import CocoSource
from mmfaith.builders.edits import dilate, shift
from mmfaith.builders.gates import (MAX_FILL_BLOTCH, MAX_GROUND_DELTA_E, MIN_FILL_SURROUND, MIN_FILL_TEXTURE, fill_reading,
                                   ground_delta_e)
from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.images import read_rgb


def _photo_and_mask(sample: tuple[Path, Path], image_id: int, ann_id: int) -> tuple[np.ndarray, np.ndarray]:
    scene = CocoSource(*sample).scene(image_id)
    instance = next(i for i in scene.editable if i.ann_id == ann_id)
    return read_rgb(scene.path, 10**8), instance.mask(scene.height, scene.width)


def _patchmatch_reading(sample: tuple[Path, Path], image_id: int, ann_id: int):
    rgb, mask = _photo_and_mask(sample, image_id, ann_id)
    hole = dilate(mask, 7)
    return fill_reading(InpainterSpec("patchmatch").build().fill(rgb, hole), hole)


def test_the_dog_of_coco_74_is_no_longer_accepted(sample) -> None:
    # The sleeping dog on the pavement: PatchMatch pastes a block of wall and blurred street into the hole.
    # The texture gate passed it (0.43 >= 0.3); the blotch gate does not (measured 15.5 > 8).
    reading = _patchmatch_reading(sample, 74, 1774)
    assert reading.texture is not None and reading.texture >= MIN_FILL_TEXTURE
    assert reading.blotch is not None and reading.blotch > MAX_FILL_BLOTCH
    assert any("blotch" in problem for problem in reading.problems(MIN_FILL_TEXTURE))


def test_a_giraffe_pattern_copied_into_the_hole_is_a_blotch(sample) -> None:
    # Image 136: the removed giraffe's hole is filled with the other giraffe's pattern (texture 1.13, blotch 20.1).
    reading = _patchmatch_reading(sample, 136, 597046)
    assert reading.texture >= MIN_FILL_TEXTURE and reading.blotch > MAX_FILL_BLOTCH


def test_a_hole_across_several_surfaces_is_refused(sample) -> None:
    # Image 315: a bag on the sand between legs and a deck chair; skin is copied onto the sand (surround 0.49).
    reading = _patchmatch_reading(sample, 315, 1433880)
    assert reading.texture >= MIN_FILL_TEXTURE and reading.surround < MIN_FILL_SURROUND
    assert any("several surfaces" in problem for problem in reading.problems(MIN_FILL_TEXTURE))


@pytest.mark.parametrize("image_id, ann_id", [(49, 1609247), (149, 1465587)])
def test_clean_fills_on_a_lawn_pass_every_fill_gate(sample, image_id: int, ann_id: int) -> None:
    # A flower planter and a kite on grass, removed without a trace (accepted by the annotator).
    reading = _patchmatch_reading(sample, image_id, ann_id)
    assert reading.problems(MIN_FILL_TEXTURE) == []
    assert reading.surround >= MIN_FILL_SURROUND and reading.blotch <= MAX_FILL_BLOTCH


@pytest.mark.parametrize("image_id, ann_id, offset, same_ground", [
    (49, 1609247, (-186, -9), True),    # the planter moved along the lawn (accepted; measured 9.5)
    (127, 24327, (285, -37), False),    # a potted plant from the pavement into the hedge (measured 34.0)
    (74, 1733076, (51, -15), False),    # a seated man lifted into a doorway, sitting on nothing (measured 23.4)
])
def test_a_moved_object_stands_on_the_same_ground(sample, image_id: int, ann_id: int, offset: tuple[int, int],
                                                  same_ground: bool) -> None:
    rgb, mask = _photo_and_mask(sample, image_id, ann_id)
    value = ground_delta_e(rgb, mask, shift(mask, *offset), dilate(mask, 7))
    assert (value <= MAX_GROUND_DELTA_E) == same_ground


def test_an_uninformative_hole_is_not_judged() -> None:
    # Fewer than FILL_MIN_PIXELS pixels inside the hole: no surround or blotch figure, nothing fails.
    image = np.full((40, 40, 3), 120, dtype=np.uint8)
    hole = np.zeros((40, 40), dtype=bool)
    hole[18:22, 18:22] = True
    reading = fill_reading(image, hole)
    assert (reading.surround, reading.blotch) == (None, None) and reading.problems(MIN_FILL_TEXTURE) == []


def test_accepted_pairs_record_every_fill_gate_within_its_limit(builds_by_type: dict[str, Path]) -> None:
    for kind in ("remove", "position"):
        out = builds_by_type[kind]
        records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
        for record in records:
            gates = record["build"]["gates"]
            assert all(value is None or value >= MIN_FILL_SURROUND for value in gates["fill_surround"])
            assert all(value is None or value <= MAX_FILL_BLOTCH for value in gates["fill_blotch"])
            assert (gates["min_fill_surround"], gates["max_fill_blotch"]) == (MIN_FILL_SURROUND, MAX_FILL_BLOTCH)
            assert all(value is None or value <= MAX_GROUND_DELTA_E for value in gates["ground_delta_e"])
    rejected = [json.loads(line) for line in (builds_by_type["remove"] / "rejected.jsonl").read_text().splitlines()]
    assert any("several surfaces" in r.get("reason", "") or "blotch" in r.get("reason", "") for r in rejected)
