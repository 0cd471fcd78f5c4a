"""VFaith's balanced gold (builders/vfaith/presentation.py): reversed pairs, count ranks, letters, the cap.

A blind model must not earn VFaith's "memorisation" signature: existence originals are "no" as often
as "yes" (half the removal pairs reversed: the removal is the original, the photo the edited image),
a count's original gold sits at every rank of its numbers with the other count among them, letters
are stratified, and each template's majority gold is capped. Checked on the presenter directly
(many pairs, fast), on a real existence build of the removable sample through the real run and
score (the oracle still reads perfect; a model that always answers "yes" reads raw = edit), and on
the shared fixture build.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.builders.vfaith.build import BuildRequest, build_vfaith
from mmfaith.builders.vfaith.presentation import PairPresenter
from mmfaith.cli import main
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset
from tests.chat_server import ChatServer, request_text
from tests.conftest import read_records


def _made(template: str, count: int, index: int) -> dict:
    """A worker's pair as offline.py makes it (photo as original): count -> count - 1 by one removal."""
    if template == "existence":
        texts, gold, edited = ["yes", "no"], "yes", "no"
    else:
        texts = [str(v) for v in range(count - 1, count + 3)]
        gold, edited = str(count), str(count - 1)
    options = [{"label": label, "text": text} for label, text in zip("ABCD", texts)]
    label = {o["text"]: o["label"] for o in options}
    return {"id": f"vf-{index:016x}", "question": "q", "question_type": "multiple-choice", "options": options,
            "answer_original": label[gold], "answer_edited": label[edited],
            "image_original": "images/original/photo.png", "image_original_sha256": "a" * 64,
            "image_edited": f"images/edited/{index}.png", "image_edited_sha256": "b" * 64,
            "source": {"image_id": index}, "build": {
                "mmfaith_version": "test", "seed": 0, "slot": f"{template}:{index}", "template": template,
                "facts": {"category": "cat", "count": count}, "facts_edited": {"category": "cat", "count": count - 1}}}


def _texts(record: dict) -> tuple[str, str]:
    text = {o["label"]: o["text"] for o in record["options"]}
    return text[record["answer_original"]], text[record["answer_edited"]]


def _presented(template: str, counts: list[int]) -> list[dict]:
    presenter, kept = PairPresenter(seed=0, n_options=4), []
    for index, count in enumerate(counts):
        record, _ = presenter.present(_made(template, count, index))
        presenter.record(record)
        kept.append(record)
    return kept


def test_existence_originals_alternate_yes_and_no_with_the_photo_recorded() -> None:
    records = _presented("existence", [1] * 40)
    originals = Counter(_texts(r)[0] for r in records)
    assert originals == {"yes": 20, "no": 20}  # least used gold: exactly half of an even number
    assert Counter(r["answer_original"] for r in records) == {"A": 20, "B": 20}  # stratified letters
    for record in records:
        original, edited = _texts(record)
        assert {original, edited} == {"yes", "no"}
        reversed_pair = original == "no"
        assert record["build"]["source_photo"] == ("image_edited" if reversed_pair else "image_original")
        photo = record[record["build"]["source_photo"]]
        assert photo == "images/original/photo.png"  # the photo keeps its file, whichever side shows it
        facts = record["build"]["facts"]  # the facts follow the images: the original's count
        assert facts["count"] == (0 if reversed_pair else 1)
        statements = {o["label"]: o["text"] for o in record["build"]["perception"]["options"]}
        assert [statements[label] for label in record["build"]["perception"]["answers"]] == \
            ["There is a cat." if reversed_pair else "There is no cat."]  # true of the edited image


def test_count_originals_sit_at_every_rank_and_keep_the_other_count() -> None:
    counts = [1, 2, 1, 3, 1, 2, 4, 1, 5, 2, 3, 1, 2, 6, 1, 3, 2, 1, 4, 2] * 3  # skewed toward 1, as COCO is
    records = _presented("count", counts)
    ranks = Counter()
    for record, count in zip(records, counts):
        numbers = sorted(int(o["text"]) for o in record["options"])
        assert numbers == list(range(numbers[0], numbers[0] + 4)) and numbers[0] >= 0
        original, edited = (int(t) for t in _texts(record))
        assert {original, edited} == {count, count - 1}  # both counts are options, one removal apart
        ranks[numbers.index(original)] += 1
    assert set(ranks) == {0, 1, 2, 3}  # smallest and largest included
    letters = Counter(r["answer_original"] for r in records)
    assert set(letters) == set("ABCD") and max(letters.values()) - min(letters.values()) <= 1


def _existence_build(tmp_path_factory, sample: tuple[Path, Path]) -> Path:
    # The removable sample (tests/conftest.py): the embedded sample alone gives one existence pair since issue 29.
    out = tmp_path_factory.mktemp("vfaith-balance") / "build"
    build_vfaith(BuildRequest(out=out, annotations=sample[0], images=sample[1], per_template=4,
                              templates=("existence",), inpainter=InpainterSpec("patchmatch"), progress=False))
    return out


def _always_yes(body: dict) -> str:
    """A blind model: the letter of the option "yes" when there is one, else A; it never reads the image."""
    found = re.search(r"^([A-D])\. yes$", request_text(body), re.MULTILINE)
    return f"\\boxed{{{found.group(1) if found else 'A'}}}"


def _score(build: Path, run_dir: Path, score_dir: Path) -> list[dict]:
    assert main(["score", "vfaith", "--dataset", str(build), "--predictions", str(run_dir / "predictions.jsonl"),
                 "--out", str(score_dir), "--from-run", "--bootstrap", "200"]) == 0
    return [json.loads(line) for line in (score_dir / "items.jsonl").read_text().splitlines()]


def test_an_existence_build_is_balanced_and_a_blind_yes_reads_raw_equal_to_edit(
        tmp_path_factory, removable_sample: tuple[Path, Path], tmp_path: Path) -> None:
    build = _existence_build(tmp_path_factory, removable_sample)
    records = read_records(build)
    assert len(records) == 4
    assert Counter(_texts(r)[0] for r in records) == {"yes": 2, "no": 2}
    info = json.loads((build / "build.json").read_text())
    assert info["recipe"]["gold_margin"] == 0.1
    assert info["gold"]["existence:original"]["gold"] == {"no": 2, "yes": 2}
    assert info["gold"]["existence:original"]["majority_share"] == 0.5
    # The oracle, through the real reference server, run and score, reads every image's gold (reversed too).
    dataset = open_vfaith_dataset(build)
    with ReferenceServer(dataset, "oracle", family="vfaith") as server:
        assert main(["run", "vfaith", "--dataset", str(build), "--model", "oracle", "--base-url", server.base_url,
                     "--out", str(tmp_path / "run-oracle"), "--no-progress"]) == 0
    _score(build, tmp_path / "run-oracle", tmp_path / "score-oracle")
    oracle = json.loads((tmp_path / "score-oracle" / "metrics.json").read_text())["overall"]
    assert (oracle["raw_accuracy"], oracle["edit_accuracy"], oracle["delta"], oracle["perception_accuracy"]) == \
        (1.0, 1.0, 0.0, 1.0)
    # Always "yes": by hand, 2 of 4 originals and 2 of 4 edits are "yes", so raw 0.5 = edit 0.5, delta 0, and
    # every wrong edit answer repeats the original gold (its "yes" was right on the original): no memorisation
    # signature beyond chance.
    with ChatServer(default=_always_yes) as server:
        assert main(["run", "vfaith", "--dataset", str(build), "--model", "always-yes", "--base-url",
                     server.openai_base_url, "--out", str(tmp_path / "run-yes"), "--no-progress"]) == 0
    items = [i for i in _score(build, tmp_path / "run-yes", tmp_path / "score-yes") if i["kind"] == "pair"]
    assert sum(i["raw_correct"] for i in items) == sum(i["edit_correct"] for i in items) == 2
    blind = json.loads((tmp_path / "score-yes" / "metrics.json").read_text())["overall"]
    assert (blind["raw_accuracy"], blind["edit_accuracy"], blind["delta"]) == (0.5, 0.5, 0.0)


def test_the_fixture_build_has_reversed_pairs_and_every_template_within_the_cap(vfaith_build: Path) -> None:
    records = read_records(vfaith_build)
    assert any(r["build"]["source_photo"] == "image_edited" for r in records)  # so test_vfaith_run covers them
    assert {_texts(r)[0] for r in records if r["build"]["template"] == "existence"} == {"yes", "no"}
    info = json.loads((vfaith_build / "build.json").read_text())
    for template, summary in info["gold"].items():  # GoldCap: at most one item above chance + margin
        top = summary["majority_share"] * summary["items"]
        assert top <= (summary["chance"] + 0.1) * summary["items"] + 1 + 1e-9, template
