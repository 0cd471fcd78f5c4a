"""CRM's part of the naturalness audit (builders/crm/audit.py) and its verdicts (benchmarks/audit/crm.jsonl)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.builders.audit_set import read_verdicts
from mmfaith.builders.crm.audit import RECIPES, audit_part, item_key
from mmfaith.cli import main, parser
from tests.conftest import read_records

VERDICTS = Path(__file__).resolve().parents[2] / "benchmarks" / "audit" / "crm.jsonl"


@pytest.fixture(scope="module")
def small_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crm-audit") / "build"
    assert main(["build", "crm", "--out", str(out), "--no-progress", "--max-items", "4", "--mask-style",
                 "black,noise", "--seed", "0"]) == 0
    return out


def test_items_carry_key_kind_gates_and_views(small_build: Path) -> None:
    part = audit_part()
    items = list(part.items(small_build))
    records = read_records(small_build)
    assert [item.key for item in items] == [item_key(r) for r in records]
    first, record = items[0], records[0]
    gold = next(o["text"] for o in record["options"] if o["label"] == record["answer"])
    assert first.key == f"{record['build']['key']}={gold}|box|black+noise"
    assert first.kind == f"{record['question_type']} box"
    assert first.gates[0].gate == "mirror_score" and first.gates[0].passes == "below"
    # the original outlined, the two specific variants, one random one
    assert [caption for caption, _ in first.images] == ["original, evidence outlined", "specific-black (box)",
                                                         "specific-noise (box)", "random-black (box)"]
    assert all(path.is_file() for _, path in first.images)
    assert first.lines[0] == f"Q: {record['question']}" and f"({gold})" in first.lines[2]
    rejected = sum(1 for line in (small_build / "rejected.jsonl").read_text().splitlines() if line.strip())
    assert part.candidates(small_build) == len(records) + rejected


def test_recipes_are_valid_build_arguments() -> None:
    assert len({recipe.name for recipe in RECIPES}) == len(RECIPES)
    for recipe in RECIPES:
        args = parser().parse_args(["build", "crm", "--out", "x", *recipe.args])
        assert args.seed is not None and recipe.source in ("embedded", "coco128")


def test_verdicts_name_their_recipe_and_kind() -> None:
    verdicts = read_verdicts(VERDICTS)
    assert len(verdicts) >= 60
    names = {recipe.name for recipe in RECIPES}
    for key, verdict in verdicts.items():
        assert verdict.recipe in names, key
        template, shape = verdict.kind.split(" ")
        assert key.split(":")[1] == template and key.split("|")[1] == shape, key
        assert verdict.note, key
