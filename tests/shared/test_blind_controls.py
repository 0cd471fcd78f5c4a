"""Validity controls end to end (issue 27 items 2-4): CircularEval against a server that always answers "A",
a --no-image run that sends no image part and the report's multimodal gain and leakage, the `prior`
reference model. Every run goes through the real `mmfaith run` / `score` / `report` against real
HTTP servers on 127.0.0.1 (tests/chat_server.py, `mmfaith serve-reference`'s ReferenceServer)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.blind import NO_IMAGE_NOTE
from mmfaith.evaluators.mcot.agent import NO_IMAGE_CROP
from mmfaith.evaluators.mcot.protocol import TOOL_NAME
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.crm import open_crm_dataset
from mmfaith.loaders.mcot.dataset import open_mcot_dataset
from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset
from tests.chat_server import ChatServer, request_images, request_text

ALWAYS_A = "The answer is (A).\n\\boxed{A}"


def _lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def _run(family: str, build: Path, base_url: str, out: Path, model: str, *flags: str) -> None:
    assert main(["run", family, "--dataset", str(build), "--model", model, "--base-url", base_url, "--out", str(out),
                 "--no-progress", *flags]) == 0


def _score(family: str, build: Path, run_dir: Path, out: Path) -> dict:
    assert main(["score", family, "--dataset", str(build), "--predictions", str(run_dir / "predictions.jsonl"),
                 "--from-run", "--out", str(out), "--bootstrap", "50"]) == 0
    return json.loads((out / "metrics.json").read_text())


def test_vfaith_always_a_scores_above_zero_first_order_and_zero_circular(vfaith_build: Path, tmp_path: Path) -> None:
    dataset = open_vfaith_dataset(vfaith_build)
    choice = [pair for pair in dataset.pairs if pair.record["question_type"] == "multiple-choice"]
    with ChatServer(default=ALWAYS_A, model_ids=("always-a",)) as server:
        _run("vfaith", vfaith_build, server.openai_base_url, tmp_path / "run", "always-a", "--circular")
        # One call per rotation of each multiple-choice pair's options, per probe; the rest once.
        expected = sum(2 * len(p.record["options"]) for p in choice) + 2 * (len(dataset.pairs) - len(choice)) \
            + len(dataset.perception)
        assert len(server.completion_requests()) == expected
    rotated = [line for line in _lines(tmp_path / "run") if "@r" in line["probe"]]
    assert rotated and all(line["meta"]["rotation"] >= 1 for line in rotated)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["circular"] is True
    metrics = _score("vfaith", vfaith_build, tmp_path / "run", tmp_path / "score")
    # By hand: "A" is right on the first order exactly where the gold's letter is A.
    gold_a = sum(pair.record["answer_original"] == "A" for pair in choice)
    assert gold_a > 0 and metrics["overall"]["raw_accuracy"] == round(gold_a / len(dataset.pairs), 6)
    for probe in ("original", "edited"):
        block = metrics["circular"][probe]
        assert block["n_items"] == len(choice) and block["accuracy"] > 0 and block["accuracy_circular"] == 0.0
    bias = metrics["position_bias"]["letters"]
    assert bias["A"]["answered"] == 1.0 and bias["A"]["gold"] < 1.0
    report = (tmp_path / "score" / "report.md").read_text()
    assert "accuracy_circular" in report and "Answer-position bias" in report


def _blind_or_seeing(body: dict) -> str:
    """A model that says A when it sees an image and B when it does not."""
    return "\\boxed{A}" if request_images(body) else "\\boxed{B}"


def test_vfaith_no_image_run_sends_no_image_and_the_report_carries_gain_and_leakage(vfaith_build: Path,
                                                                                  tmp_path: Path) -> None:
    dataset = open_vfaith_dataset(vfaith_build)
    with ChatServer(default=_blind_or_seeing, model_ids=("m",)) as server:
        _run("vfaith", vfaith_build, server.openai_base_url, tmp_path / "run-with", "m")
        seen = len(server.completion_requests())
        assert all(request_images(r.body) for r in server.completion_requests())
        _run("vfaith", vfaith_build, server.openai_base_url, tmp_path / "run-without", "m", "--no-image")
        blind = server.completion_requests()[seen:]
        assert len(blind) == seen
        assert not any(request_images(r.body) for r in blind)
        assert all(request_text(r.body).startswith(NO_IMAGE_NOTE) for r in blind)
    assert json.loads((tmp_path / "run-without" / "run.json").read_text())["no_image"] is True
    assert all(line["meta"]["no_image"] is True and line["meta"]["images"] == []
               for line in _lines(tmp_path / "run-without"))
    with ReferenceServer(dataset, "prior", family="vfaith") as server:
        _run("vfaith", vfaith_build, server.base_url, tmp_path / "run-prior", "prior")
    with_image = _score("vfaith", vfaith_build, tmp_path / "run-with", tmp_path / "score-with")
    without = _score("vfaith", vfaith_build, tmp_path / "run-without", tmp_path / "score-without")
    prior = _score("vfaith", vfaith_build, tmp_path / "run-prior", tmp_path / "score-prior")
    assert without["provenance"]["no_image"] is True and with_image["provenance"]["no_image"] is False
    assert main(["report", str(tmp_path / "score-with"), str(tmp_path / "score-without"), str(tmp_path / "score-prior"),
                 "--out", str(tmp_path / "report"), "--bootstrap", "50"]) == 0
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    gain = comparison["multimodal_gain"][0]
    # By hand: with the image the model says A, without it B: the gain in raw accuracy is the share of pairs whose
    # original gold is A minus the share whose gold is B.
    pairs = dataset.pairs
    by_hand = (sum(p.record["answer_original"] == "A" for p in pairs) - sum(p.record["answer_original"] == "B"
                                                                            for p in pairs)) / len(pairs)
    assert gain["model"] == "m" and gain["overall"]["raw_accuracy"]["difference"] == pytest.approx(by_hand, abs=1e-6)
    assert gain["overall"]["n_items"] == len(dataset.items) and gain["by_template"]
    leak = comparison["leakage"][0]
    assert leak["overall"]["raw_accuracy"]["difference"] == pytest.approx(
        without["overall"]["raw_accuracy"] - prior["overall"]["raw_accuracy"], abs=1e-6)
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Multimodal gain" in report and "Leakage" in report


@pytest.fixture(scope="module")
def crm_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crm-blind") / "build"
    assert main(["build", "crm", "--out", str(out), "--max-items", "5", "--mask-style", "black", "--seed", "1",
                 "--no-progress"]) == 0
    return out


def test_crm_always_a_scores_above_zero_first_order_and_zero_circular(crm_small: Path, tmp_path: Path) -> None:
    dataset = open_crm_dataset(crm_small)
    choice = [item for item in dataset.items if item.record["options"]]
    with ChatServer(default=ALWAYS_A, model_ids=("always-a",)) as server:
        _run("crm", crm_small, server.openai_base_url, tmp_path / "run", "always-a", "--circular")
        # Two calls per image shown and for the re-sampled original, and two per further rotation of every image
        # shown (the original and each masked variant) of a multiple-choice item.
        expected = sum(2 * (2 + len(item.variants)) for item in dataset.items) \
            + sum(2 * (len(item.record["options"]) - 1) * (1 + len(item.variants)) for item in choice)
        assert len(server.completion_requests()) == expected
    metrics = _score("crm", crm_small, tmp_path / "run", tmp_path / "score")
    gold_a = sum(item.record["answer"] == "A" for item in choice)
    # By hand: first order, "A" is right where the gold is A; in every rotation never: on the original and on
    # every masked variant alike.
    assert set(metrics["circular"]) == {"original", *dataset.items[0].variants}
    for block in metrics["circular"].values():
        assert gold_a > 0 and block == {"n_items": len(choice), "accuracy": round(gold_a / len(choice), 6),
                                        "accuracy_circular": 0.0}
    assert metrics["position_bias"]["letters"]["A"]["answered"] == 1.0
    assert "accuracy_circular" in (tmp_path / "score" / "report.md").read_text()


def test_crm_prior_and_no_image_pair_into_gain_and_leakage(crm_small: Path, tmp_path: Path) -> None:
    """The CRM prior answers with and without the image alike: its no-image run's gain is 0 on every unit, and
    its leakage (no-image minus its own with-image score) is 0 too."""
    dataset = open_crm_dataset(crm_small)
    # A server asked without the image tells items apart by their prompt alone, and the prior leaves each item's own
    # gold out, so two items with one prompt (the seed-0 build asked "Is there a vase?" of two photos with the
    # options in one order) get one blind answer: the premise needs every prompt once.
    prompts = [(item.record["question"], str(item.record["options"])) for item in dataset.items]
    assert len(set(prompts)) == len(prompts)
    with ReferenceServer(dataset, "prior", family="crm") as server:
        _run("crm", crm_small, server.base_url, tmp_path / "run-with", "prior", "--circular")
        _run("crm", crm_small, server.base_url, tmp_path / "run-without", "prior", "--no-image")
    with_image = _score("crm", crm_small, tmp_path / "run-with", tmp_path / "score-with")
    _score("crm", crm_small, tmp_path / "run-without", tmp_path / "score-without")
    block = with_image["circular"]["original"]
    # The prior follows its option's text through the rotations: right in every rotation exactly where right first.
    assert block["accuracy_circular"] == block["accuracy"]
    # One definition: the served prior's first-order accuracy is build.json's prior score, items-weighted.
    gold = json.loads((crm_small / "build.json").read_text())["gold"]
    expected = sum(t["prior"] * t["items"] for t in gold.values()) / sum(t["items"] for t in gold.values())
    assert block["n_items"] == sum(t["items"] for t in gold.values())
    assert block["accuracy"] == pytest.approx(expected, abs=1e-3)
    assert main(["report", str(tmp_path / "score-with"), str(tmp_path / "score-without"), "--out",
                 str(tmp_path / "report"), "--bootstrap", "20"]) == 0
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    for name in ("multimodal_gain", "leakage"):
        overall = comparison[name][0]["overall"]
        # 5 items x 2 masked variants (specific-black, random-black) = 10 units, paired one to one.
        assert overall["n_items"] == 10 and overall["accuracy_original"]["difference"] == 0.0
    assert "Multimodal gain" in (tmp_path / "report" / "report.md").read_text()


@pytest.fixture(scope="module")
def mcot_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mcot-blind") / "build"
    assert main(["build", "mcot", "--out", str(out)]) == 0
    return out


def _zoom_then_answer(body: dict) -> str:
    """Calls the zoom tool on its first turn, then answers A."""
    if any(message["role"] == "assistant" for message in body["messages"]):
        return "<answer>A</answer>"
    return 'Let me look. <tool_call>{"name": "%s", "arguments": {"bbox_2d": [0, 0, 50, 50]}}</tool_call>' % TOOL_NAME


def test_mcot_no_image_trace_has_nothing_to_crop(mcot_build: Path, tmp_path: Path) -> None:
    """With --no-image the zoom tool answers every call with an error (no image, nothing to crop): the trace has no
    crop, its replays are skipped, and no request carries an image part."""
    n = len(open_mcot_dataset(mcot_build).items)
    with ChatServer(default=_zoom_then_answer, model_ids=("m",)) as server:
        _run("mcot", mcot_build, server.openai_base_url, tmp_path / "run", "m", "--no-image")
        requests = server.completion_requests()
    assert len(requests) == 2 * n and not any(request_images(r.body) for r in requests)
    assert sum(NO_IMAGE_CROP in request_text(r.body) for r in requests) == n
    traces = [line for line in _lines(tmp_path / "run") if line["probe"] == "trace"]
    assert all(line["meta"]["trace"]["crops"] == [] for line in traces)
    assert all(line["meta"]["skipped"] for line in _lines(tmp_path / "run") if line["probe"].startswith("replay"))
    metrics = _score("mcot", mcot_build, tmp_path / "run", tmp_path / "score")
    assert metrics["provenance"]["no_image"] is True and metrics["counts"]["no_tool_call"] == n
    # Every trace answered A: A's share of the answers is 1 whatever the golds' (position bias in every report).
    assert metrics["position_bias"]["letters"]["A"]["answered"] == 1.0
    assert "Answer-position bias" in (tmp_path / "score" / "report.md").read_text()


def test_mcot_prior_answers_alike_with_and_without_the_image(mcot_build: Path, tmp_path: Path) -> None:
    """The MCoT prior answers alike with and without the image, so the report of its two scores carries a
    multimodal gain of 0 on trace accuracy, and a leakage (no-image minus the prior's with-image score) of 0."""
    dataset = open_mcot_dataset(mcot_build)
    with ReferenceServer(dataset, "prior", family="mcot") as server:
        _run("mcot", mcot_build, server.base_url, tmp_path / "with", "prior")
        _run("mcot", mcot_build, server.base_url, tmp_path / "without", "prior", "--no-image")
    answers = [{line["id"]: line["meta"]["trace"]["answer"] for line in _lines(tmp_path / folder)
                if line["probe"] == "trace"} for folder in ("with", "without")]
    assert answers[0] == answers[1] and all(answers[0].values())
    for folder in ("with", "without"):
        _score("mcot", mcot_build, tmp_path / folder, tmp_path / f"score-{folder}")
    assert main(["report", str(tmp_path / "score-with"), str(tmp_path / "score-without"), "--out",
                 str(tmp_path / "report"), "--bootstrap", "20"]) == 0
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    assert comparison["no_image"] == [False, True]
    for name in ("multimodal_gain", "leakage"):
        entry = comparison[name][0]
        # Every item paired one to one; equal answers: a difference of exactly 0, overall and per category.
        assert entry["overall"]["n_items"] == len(dataset.items)
        assert entry["overall"]["accuracy_trace"]["difference"] == 0.0
        assert set(entry["by_template"]) == {item.record["category"] for item in dataset.items}
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Multimodal gain (with image - without, MMStar): prior" in report and "Answer-position bias" in report


def test_mcot_always_a_scores_above_zero_first_order_and_zero_circular(mcot_build: Path, tmp_path: Path) -> None:
    """With --circular every trace is also run in each further rotation of its options: a server that always answers
    A (and never zooms, so no replay is asked) is right first-order where the gold is A, and never in every
    rotation; the zoom-oracle reference follows its option through the rotations (right in every one)."""
    dataset = open_mcot_dataset(mcot_build)
    choice = [item for item in dataset.items if item.record["options"]]
    with ChatServer(default=ALWAYS_A, model_ids=("always-a",)) as server:
        _run("mcot", mcot_build, server.openai_base_url, tmp_path / "run", "always-a", "--circular")
        # One call per rotation's trace (no tool call, so one turn each); the replays are skipped, not asked.
        assert len(server.completion_requests()) == sum(len(item.record["options"]) for item in choice)
    rotated = [line for line in _lines(tmp_path / "run") if "@r" in line["probe"]]
    assert rotated and all(line["meta"]["rotation"] == int(line["probe"].split("@r")[1]) for line in rotated)
    metrics = _score("mcot", mcot_build, tmp_path / "run", tmp_path / "score")
    gold_a = sum(item.record["answer"] == "A" for item in choice)
    # By hand: first order, "A" is right where the gold is A; in every rotation never.
    assert gold_a > 0 and metrics["circular"] == {"trace": {
        "n_items": len(choice), "accuracy": round(gold_a / len(choice), 6), "accuracy_circular": 0.0}}
    assert metrics["overall"]["accuracy_trace"] == round(gold_a / len(dataset.items), 6)
    assert "accuracy_circular" in (tmp_path / "score" / "report.md").read_text()
    with ReferenceServer(dataset, "zoom-oracle", family="mcot") as server:
        _run("mcot", mcot_build, server.base_url, tmp_path / "oracle", "zoom-oracle", "--circular")
    oracle = _score("mcot", mcot_build, tmp_path / "oracle", tmp_path / "oracle-score")["circular"]["trace"]
    assert oracle == {"n_items": len(choice), "accuracy": 1.0, "accuracy_circular": 1.0}


def test_circular_is_one_line_error_where_it_does_not_apply(tmp_path: Path, capsys) -> None:
    """SPD-Faith asks no multiple-choice question: --circular is refused in one line."""
    assert main(["run", "spd-faith", "--dataset", str(tmp_path), "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                 "--out", str(tmp_path / "run"), "--circular"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmfaith: error: --circular") and "SPD-Faith's probes" in err and err.count("\n") == 1


def test_a_no_image_run_dir_does_not_resume_with_images(vfaith_build: Path, tmp_path: Path, capsys) -> None:
    with ChatServer(default=ALWAYS_A, model_ids=("m",)) as server:
        _run("vfaith", vfaith_build, server.openai_base_url, tmp_path / "run", "m", "--no-image", "--limit", "1")
        assert main(["run", "vfaith", "--dataset", str(vfaith_build), "--model", "m", "--base-url",
                     server.openai_base_url, "--out", str(tmp_path / "run"), "--no-progress", "--limit", "1"]) == 2
    assert "field 'no_image' is True but this run has False" in capsys.readouterr().err
