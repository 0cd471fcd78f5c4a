"""Free-form VFaith answers: compared after normalisation, and where that fails by the judge
(`--judge MODEL`, a real HTTP chat server here), whose verdicts are cached so a re-score asks nothing."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mmfaith.cli import main
from mmfaith.images import png_bytes, sha256_bytes
from tests.chat_server import ChatServer, request_text

SYNONYMS = {("sailboat", "sailing boat"), ("bus", "coach")}  # normalised golds (articles dropped)


@pytest.fixture()
def free_form_build(tmp_path: Path) -> Path:
    """Two free-form pairs (gold a sailboat -> a bus, a cat -> a dog) on distinct tiny images."""
    build = tmp_path / "build"
    (build / "images").mkdir(parents=True)
    records = []
    for number, (before, after) in enumerate((("a sailboat", "a bus"), ("a cat", "a dog"))):
        names = {}
        for side, shade in (("original", 40), ("edited", 200)):
            data = png_bytes(np.full((8, 8, 3), shade + number, dtype=np.uint8))
            names[side] = (f"images/{side}-{number}.png", sha256_bytes(data))
            (build / names[side][0]).write_bytes(data)
        record_id = f"vf-{number:016x}"
        records.append({
            "id": record_id, "category": "REA", "question": f"What vehicle or animal is shown ({number})?",
            "question_type": "free-form", "options": [], "answer_original": before, "answer_edited": after,
            "image_original": names["original"][0], "image_original_sha256": names["original"][1],
            "image_edited": names["edited"][0], "image_edited_sha256": names["edited"][1],
            "visual_cues": [{"id": "cue1", "text": "the object", "bbox": None}],
            "edit": {"cue_id": "cue1", "instruction": "swap it", "target_answer": after,
                     "editor": {"name": "openai", "model": "gpt-image-1"}, "attempts": []},
            "source": {"dataset": "toy", "split": "test", "image_id": number, "license": {"id": 0, "name": "x", "url": ""},
                       "attribution": "toy"},
            "verification": {"status": "pending"},
            "build": {"mmfaith_version": "0", "seed": 0, "slot": f"row:{number}", "template": None,
                      "gates": {"delta_e": 50.0, "outside_changed_pixels": 0, "outside_tolerance": 0.05}}})
    (build / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (build / "build.json").write_text(json.dumps({"family": "vfaith", "status": "complete"}))
    return build


def _judge(body: dict) -> str:
    text = request_text(body)
    gold = text.split("Reference answer: ")[1].split("\n")[0]
    answer = text.split("Candidate answer: ")[1].split("\n")[0]
    return "Yes." if (gold, answer) in SYNONYMS else "No."


def test_free_form_answers_go_to_the_judge_only_where_normalisation_fails(free_form_build: Path, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    predictions = tmp_path / "predictions.jsonl"
    answers = {("vf-0000000000000000", "original"): "It is \\boxed{sailing boat}",  # judge: the original gold
               ("vf-0000000000000000", "edited"): "\\boxed{Sailing boat.}",         # wrong, repeats the original
               ("vf-0000000000000001", "original"): "\\boxed{The cat}",             # normalisation alone
               ("vf-0000000000000001", "edited"): "\\boxed{a wolf}"}                # wrong, not a repeat
    predictions.write_text("".join(json.dumps({"id": i, "probe": p, "response": r, "model": "m"}) + "\n"
                                   for (i, p), r in answers.items()))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    with ChatServer(default=_judge) as server:
        args = ["score", "vfaith", "--dataset", str(free_form_build), "--predictions", str(predictions),
                "--judge", "judge-model", "--judge-base-url", server.openai_base_url, "--bootstrap", "0"]
        assert main([*args, "--out", str(tmp_path / "s1")]) == 0
        asked = len(server.completion_requests())
        assert main([*args, "--out", str(tmp_path / "s2")]) == 0
        assert len(server.completion_requests()) == asked  # the verdicts came from the cache
    # By hand: "sailing boat" vs gold_e "a bus": no; vs gold_o "a sailboat": yes (twice, cached once: 2 questions).
    # "a wolf" vs "a dog" and "a cat": no, no. "the cat" equals "cat" after normalisation: no question. So 4 asked.
    assert asked == 4
    metrics = json.loads((tmp_path / "s1" / "metrics.json").read_text())
    assert (tmp_path / "s1" / "metrics.json").read_bytes() == (tmp_path / "s2" / "metrics.json").read_bytes()
    overall = metrics["overall"]
    assert overall["raw_accuracy"] == 1.0 and overall["edit_accuracy"] == 0.0
    assert overall["repeat_ratio"] == 0.5 and overall["repeat_ratio_own"] == 0.5  # pair 0 repeats, pair 1 does not
    # The rule judge counts the paraphrase as a different answer: raw accuracy 1/2.
    assert main(["score", "vfaith", "--dataset", str(free_form_build), "--predictions", str(predictions),
                 "--out", str(tmp_path / "rule"), "--bootstrap", "0"]) == 0
    rule = json.loads((tmp_path / "rule" / "metrics.json").read_text())["overall"]
    assert rule["raw_accuracy"] == 0.5 and rule["repeat_ratio"] == 0.0
