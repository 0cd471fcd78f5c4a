"""MCoT's part of the naturalness audit (builders/mcot/audit.py): keys, gate readings, review views, candidates,
and the verdict file's coverage. Expected figures are computed by hand from COCO annotation boxes (comments)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from mmfaith.builders.audit_set import REASONS, read_verdicts
from mmfaith.builders.coco_source import embedded_sample
from mmfaith.builders.mcot.audit import FULL_WIDTH, ZOOM_SIDE, audit_part, candidates, item_key
from mmfaith.builders.mcot.build import McotBuildRequest, build_mcot
from mmfaith import families
from mmfaith.jsonl import read_jsonl

REPO = Path(__file__).resolve().parents[2]
RELATION_CASES = REPO / "tests" / "shared" / "relation_cases"


def _record(category: str, targets: list[dict], gold: str, options: list[str], facts: dict) -> dict:
    letters = "ABCD"
    return {"id": f"coco-{category}:338", "category": category, "question": "?", "image": "images/338.jpg",
            "width": 640, "height": 327, "answer": letters[options.index(gold)],
            "options": [{"label": letters[i], "text": text} for i, text in enumerate(options)],
            "targets": targets, "source": {"file_name": "000000000338.jpg", "image_id": 338, "facts": facts}}


CLOCK = {"id": "ann339566", "label": "clock", "bbox": [458.17, 88.69, 23.24, 24.61]}
OVEN = {"id": "ann1123956", "label": "oven", "bbox": [24.25, 243.96, 138.88, 78.63]}


@pytest.fixture()
def hand_build(tmp_path: Path) -> Path:
    """A build dir written by hand: COCO 338's image and two records about its clock and oven."""
    (tmp_path / "images").mkdir()
    shutil.copy(embedded_sample()[1] / "000000000338.jpg", tmp_path / "images" / "338.jpg")
    records = [_record("relation", [CLOCK, OVEN], "right", ["left", "right"], {"relation": "right"}),
               _record("color", [OVEN], "black", ["gray", "black", "white", "brown"], {"color": "black"})]
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "build.json").write_text(json.dumps({"recipe": {"origin": "embedded COCO sample",
                                                                "rules": {"max_subject_area": 0.01}}}))
    return tmp_path


def test_items_keys_gates_and_views(hand_build: Path):
    relation, color = audit_part().items(hand_build)
    # the key names the objects (subject first) and the gold text, not the letters
    assert relation.key == "relation:000000000338.jpg:339566>1123956=right" and relation.kind == "relation"
    assert color.key == "color:000000000338.jpg:1123956=black" and color.kind == "color"
    gates = {g.gate: g for g in relation.gates}
    # clock box 23.24 x 24.61 = 571.94 px of 640 x 327 = 209,280: 0.0027329 (subject and smallest target)
    assert gates["subject_area"].value == pytest.approx(0.0027329, abs=1e-6) and gates["subject_area"].limit == 0.01
    assert gates["smallest_target_area"].value == pytest.approx(0.0027329, abs=1e-6)
    # clock starts at x 458.17, the oven ends at 24.25 + 138.88 = 163.13: a gap of 295.04 px, 0.46100 of the width
    assert gates["relation_gap"].value == pytest.approx(0.46100, abs=1e-5)
    # MCoT's limit is its MIN_RELATION_GAP (3 %): margin 0.461 - 0.03
    assert gates["relation_gap"].limit == 0.03
    assert gates["relation_gap"].passes == "above" and gates["relation_gap"].margin() == pytest.approx(0.431, abs=1e-3)
    share = {g.gate: g for g in color.gates}["color_share"]
    assert 0.0 <= share.value <= 1.0 and share.limit == 0.45
    captions = [caption for caption, _ in relation.images]
    assert captions == ["image, targets outlined", "zoom: clock", "zoom: oven"]
    with Image.open(relation.images[0][1]) as full, Image.open(relation.images[1][1]) as zoom:
        assert full.width == FULL_WIDTH and zoom.size == (ZOOM_SIDE, ZOOM_SIDE)
    assert relation.lines[2] == "gold: B (right)"
    stamp = relation.images[1][1].stat().st_mtime_ns
    again = next(iter(audit_part().items(hand_build)))
    assert again.images == relation.images and relation.images[1][1].stat().st_mtime_ns == stamp  # written once


def test_the_key_does_not_depend_on_the_option_order(hand_build: Path):
    flipped = _record("relation", [CLOCK, OVEN], "right", ["right", "left"], {"relation": "right"})
    assert flipped["answer"] == "A"
    assert item_key(flipped) == "relation:000000000338.jpg:339566>1123956=right"


def test_candidates_are_counted_before_any_rule(tmp_path: Path):
    # COCO 397's copied annotations: a fork 44.76 x 52.10 (0.0076 of 640 x 480), a table 503.69 x 130.91 and a
    # person 225.66 x 205.33, one of each, no crowd. Under a 1 % limit: one colour question (the fork; the
    # table is too large, people are not asked about) and two pairs with a small member (fork-table,
    # fork-person): 3. Without a limit: colour for the fork and the table, and all three pairs: 5.
    for limit, expected in ((0.01, 3), (1.0, 5)):
        (tmp_path / "build.json").write_text(json.dumps({"recipe": {
            "origin": str(RELATION_CASES / "instances_397.json"), "rules": {"max_subject_area": limit}}}))
        assert candidates(tmp_path) == expected


def test_a_real_build_becomes_audit_items(tmp_path: Path):
    build_mcot(McotBuildRequest(out=tmp_path / "b", progress=False))
    records = [record for _, record in read_jsonl(tmp_path / "b" / "records.jsonl")]
    items = list(families.get("mcot").parts().audit().items(tmp_path / "b"))
    assert [item.key for item in items] == [item_key(record) for record in records]
    assert all(path.is_file() for item in items for _, path in item.images)
    assert len(items) <= candidates(tmp_path / "b")


def test_the_verdicts_cover_both_templates_and_every_recipe_source():
    verdicts = read_verdicts(REPO / "benchmarks" / "audit" / "mcot.jsonl")
    kinds = {(v.kind, v.verdict) for v in verdicts.values()}
    assert kinds == {("color", "accept"), ("color", "reject"), ("relation", "accept"), ("relation", "reject")}
    assert all(v.key.startswith(f"{v.kind}:") and (v.reason in REASONS or v.verdict == "accept") for v in verdicts.values())
    assert sum(v.verdict == "accept" for v in verdicts.values()) >= 60
    recipes = {recipe.name: recipe.source for recipe in audit_part().recipes}
    assert {v.recipe for v in verdicts.values()} <= set(recipes) and set(recipes.values()) == {"embedded", "coco128"}
