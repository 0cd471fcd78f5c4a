"""benchmarks/naturalness_audit.py on a toy family: matching items to verdicts, the arithmetic of the reject share
and the yield, removed and unlabelled items, build reuse, review cards, the rates file and the release card's line.

Every expected figure below is counted by hand from the toy builds and verdicts written in this file (see the
comments at each assertion)."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from mmfaith import families
from mmfaith.builders.audit_set import AuditItem, AuditPart, AuditRecipe, GateReading, Verdict, write_verdicts
from mmfaith.families import Family, FamilyParts, MetricInfo, ProbeInfo
from mmfaith.release.card import audit_line

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("naturalness_audit", REPO / "benchmarks" / "naturalness_audit.py")
audit = importlib.util.module_from_spec(_spec)
sys.modules["naturalness_audit"] = audit  # dataclasses look their module up while the class is made
_spec.loader.exec_module(audit)

# What each toy recipe builds: (key, kind, fill_texture reading) per accepted item, and its candidates.
BUILDS = {
    1: ([("a", "remove", 0.2), ("b", "remove", 0.43), ("c", "color", 0.1)], 10),
    2: ([("c", "color", 0.1), ("d", "color", 0.3), ("e", "color", 0.25), ("f", "color", 0.05)], 5),
}
RECIPES = (AuditRecipe("r1", "embedded", ("--seed", "1")), AuditRecipe("r2", "embedded", ("--seed", "2")),
           AuditRecipe("r3", "coco128", ("--seed", "3")))
VERDICTS = [
    Verdict("a", "remove", "accept", "", "clean fill", "r1"),
    Verdict("b", "remove", "reject", "blotch_or_smear", "copied grass where the dog was", "r1"),
    Verdict("c", "remove", "reject", "wrong_gold", "silver car named black", "r1"),  # kind now "color": the item's counts
    Verdict("d", "color", "accept", "", "", "r2"),
    Verdict("f", "color", "accept", "", "", "r2"),
    Verdict("x", "remove", "reject", "remnant", "tail left", "r1"),       # r1 built, x not made: removed
    Verdict("y", "color", "accept", "", "", "r3"),                        # r3 skipped (no --coco): not removed
    Verdict("z", "color", "accept", "", "", "gone"),                      # recipe no longer listed: removed
]
BUILT: list[int] = []


def toy_items(build_dir: Path) -> list[AuditItem]:
    document = json.loads((build_dir / "items.json").read_text())
    return [AuditItem(key, kind, (GateReading("fill_texture", value, 0.5, "below"),),
                      (("original", build_dir / "a.png"), ("edited", build_dir / "b.png")), (f"item {key}", "gold: yes"))
            for key, kind, value in document["items"]]


def toy_part() -> AuditPart:
    return AuditPart(RECIPES, toy_items, lambda build_dir: json.loads((build_dir / "items.json").read_text())["candidates"])


def add_toy_build_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--no-progress", action="store_true")


def toy_build(args: argparse.Namespace) -> int:
    BUILT.append(args.seed)
    args.out.mkdir(parents=True)
    items, candidates = BUILDS[args.seed]
    (args.out / "items.json").write_text(json.dumps({"items": items, "candidates": candidates}))
    (args.out / "build.json").write_text("{}")
    Image.new("RGB", (64, 48), (200, 30, 30)).save(args.out / "a.png")
    Image.new("RGB", (64, 48), (30, 30, 200)).save(args.out / "b.png")
    return 0


def _unused(*args: Any) -> Any:
    raise AssertionError("not part of the audit")


TOY = Family(
    name="toy-audit", title="Toy audit", summary="items for the audit test", record_kinds=("toy",),
    probes=(ProbeInfo("look", "a look"),),
    metrics=(MetricInfo("accuracy", "accuracy", "share right", "higher", (0.0, 1.0), "this test"),),
    reference_models=(("oracle", "gold"),),
    parts_source=FamilyParts(open_dataset=_unused, add_run_options=_unused, probe_plan=_unused,
                             add_score_options=_unused, score=_unused, reference_model=_unused,
                             add_build_options=add_toy_build_options, build=toy_build, audit=toy_part))


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    """The registered toy family and its verdict folder."""
    write_verdicts(tmp_path / "verdicts" / "toy-audit.jsonl", VERDICTS)
    families.register(TOY)
    BUILT.clear()
    yield tmp_path / "verdicts"
    families.unregister("toy-audit")


def test_matching_and_arithmetic_by_hand(toy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--families", "toy-audit", "--work", str(tmp_path / "work"), "--verdicts", str(toy),
            "--cards", str(tmp_path / "cards"), "--write-rates", str(tmp_path / "rates.json")]
    assert audit.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert BUILT == [1, 2]                         # r3 (coco128) is not built without --coco
    # remove: a, b accepted; both labelled; b rejected -> 1/2 = 50.0 %
    assert any(line.split() == ["remove", "2", "2", "1", "50.0", "%"] for line in out)
    # color: c (first made by r1), d, e, f; labelled c, d, f; c rejected -> 1/3 = 33.3 %
    assert any(line.split() == ["color", "4", "3", "1", "33.3", "%"] for line in out)
    # all: 6 distinct accepted, 5 labelled, 2 rejected -> 40.0 %
    assert any(line.split() == ["all", "6", "5", "2", "40.0", "%"] for line in out)
    # yield: 3 items of r1 + 4 of r2 (c counted in both) over 10 + 5 candidates = 7/15 = 46.7 %
    assert "  yield: 7 accepted of 15 candidates = 46.7 %" in out
    # removed: x (its recipe r1 was built) and z (recipe gone); y's recipe r3 was skipped; x is a reject
    assert "  removed (labelled, no longer made): 2 (1 of them rejects)" in out
    # the rejects' gate readings: b's fill_texture 0.43 below 0.5, margin 0.5 - 0.43 = 0.07
    assert "      fill_texture: 0.43 (below 0.5), margin 0.07" in out
    # medians of margins: rejects b 0.07, c 0.4 -> 0.235; accepts a 0.3, d 0.2, f 0.45 -> 0.3
    assert "  gate fill_texture margin: rejects median 0.235 (n 2), accepts median 0.3 (n 3)" in out
    # unlabelled: e only, with its card
    listed = [json.loads(line) for line in (tmp_path / "cards" / "toy-audit" / "unlabelled.jsonl").read_text().splitlines()]
    assert [(entry["key"], entry["kind"], entry["recipe"]) for entry in listed] == [("e", "color", "r2")]
    with Image.open(listed[0]["card"]) as card:
        # two images of CARD_WIDTH side by side, CARD_PADDING between and around them
        assert card.width == 2 * audit.CARD_WIDTH + audit.CARD_PADDING + 2 * audit.CARD_PADDING
    assert out[-1] == "overall reject share of accepted items: 40.0 % (2 of 5 labelled); toy-audit 40.0 %"
    rates = json.loads((tmp_path / "rates.json").read_text())["families"]["toy-audit"]
    assert (rates["reject_share"], rates["labelled"], rates["rejected"], rates["yield"]) == (0.4, 5, 2, round(7 / 15, 4))
    line = audit_line("toy-audit", tmp_path / "rates.json")
    assert line.startswith("Before human verification, about 40 % of items are rejected by a careful annotator")
    assert "2 of 5 labelled" in line and "47 % of candidates" in line

    # a second run reuses both builds (same recipes, same builders) and prints the same figures
    assert audit.main(argv) == 0
    assert BUILT == [1, 2]
    assert capsys.readouterr().out.splitlines() == out
    # built two at a time in child processes (a fresh work folder): the same report
    assert audit.main([*argv, "--work", str(tmp_path / "work-jobs"), "--jobs", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == out
    # a changed recipe is rebuilt
    stamp = tmp_path / "work" / "toy-audit" / "r2.stamp.json"
    stamp.write_text(stamp.read_text().replace('"2"', '"9"'))
    assert audit.main(argv) == 0
    assert BUILT == [1, 2, 2]


def test_overall_line_pools_families_and_says_n_a_when_nothing_is_labelled(tmp_path: Path) -> None:
    part = toy_part()
    build_dir = tmp_path / "b1"
    toy_build(argparse.Namespace(out=build_dir, seed=1))
    first = audit.measure("one", part, [(RECIPES[0], build_dir)], {v.key: v for v in VERDICTS})
    second = audit.measure("two", part, [(RECIPES[0], build_dir)], {})
    # one: a accept, b reject, c reject of 3 labelled -> 2/3 = 66.7 %; two: nothing labelled
    assert audit.last_line([first, second]) == ("overall reject share of accepted items: 66.7 % (2 of 3 labelled); "
                                                "one 66.7 %, two n/a")


def test_release_card_line_without_a_measurement() -> None:
    assert "has not been measured" in audit_line("no-such-family")
