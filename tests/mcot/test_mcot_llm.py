"""The LLM parts of MCoT against a real HTTP chat server speaking the OpenAI protocol (tests/chat_server.py
stands in for OpenAI, which cannot run here): the LLM judge of reliability and sufficiency (cached,
labels per item, agreement with the geometric judge) and the LLM injector (edits listed; an answer
that touched a tool call is dropped)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.mcot.judge import RELIABILITY_PROMPT
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.mcot.dataset import open_mcot_dataset
from mmfaith.schema import schema_errors
from tests.chat_server import ChatServer, request_images, request_text
from tests.mcot_fixtures import write_vstar_folder


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("mcot-llm")
    build = root / "build"
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(root / "src", 4)),
                 "--out", str(build)]) == 0
    with ReferenceServer(open_mcot_dataset(build), "zoom-oracle", family="mcot") as server:
        assert main(["run", "mcot", "--dataset", str(build), "--model", "zoom-oracle", "--base-url", server.base_url,
                     "--out", str(root / "run"), "--no-progress"]) == 0
    return build, root / "run" / "predictions.jsonl"


def judge_reply(body: dict[str, Any]) -> str:
    """Reliability: "Yes" unless the answer shown is a relative-position one; sufficiency: always (A)."""
    text = request_text(body)
    assert len(request_images(body)) == 1  # the crops only, never the full image
    if "Do these regions show visual evidence" in text:
        return "No." if "left" in text.split("The model's answer:")[1] or "right" in text.split("The model's answer:")[1] else "Yes"
    return "\\boxed{A}"


def test_llm_judge_labels_cache_and_agreement(oracle_run: tuple[Path, Path], tmp_path: Path) -> None:
    build, predictions = oracle_run
    records = {item.id: item.record for item in open_mcot_dataset(build).items}
    with ChatServer(default=judge_reply, model_ids=("judge",)) as server:
        args = ["score", "mcot", "--dataset", str(build), "--predictions", str(predictions), "--from-run",
                "--bootstrap", "50", "--judge", "judge", "--judge-base-url", server.openai_base_url,
                "--judge-agreement", "geometric"]
        assert main([*args, "--out", str(tmp_path / "s1")]) == 0
        asked = len(server.requests)
        assert asked == 2 * 4  # reliability and sufficiency per item
        assert main([*args, "--out", str(tmp_path / "s2")]) == 0
        assert len(server.requests) == asked  # answered from the cache
    metrics = json.loads((tmp_path / "s1" / "metrics.json").read_text())
    # by hand: the oracle answers every item right; the judge says reliable only for the 2 colour items,
    # and sufficient where the gold is A
    colour = [i for i, r in records.items() if r["category"] == "direct_attributes"]
    gold_a = [i for i, r in records.items() if r["answer"] == "A"]
    assert metrics["overall"]["reliability"] == len(colour) / 4
    assert metrics["overall"]["sufficiency"] == len(gold_a) / 4
    assert metrics["provenance"]["judge"] == "llm:judge:mcot-judge/1" and schema_errors("mcot_metrics", metrics) == []
    # the geometric judge says 1 / 1 everywhere (the oracle zooms onto the targets and answers right)
    agreement = metrics["judge_agreement"]
    assert agreement["reliable"] == {"n": 4, "agreement": len(colour) / 4}
    assert agreement["sufficient"] == {"n": 4, "agreement": len(gold_a) / 4}
    items = [json.loads(line) for line in (tmp_path / "s1" / "items.jsonl").read_text().splitlines()]
    assert {line["id"]: line["judge"]["reliable"] for line in items} == {i: int(i in colour) for i in records}
    assert (tmp_path / "s1" / "metrics.json").read_bytes() == (tmp_path / "s2" / "metrics.json").read_bytes()
    assert "Do these regions show visual evidence" in RELIABILITY_PROMPT


def test_llm_injector_edits_are_listed_and_tool_calls_are_kept(oracle_run: tuple[Path, Path], tmp_path: Path) -> None:
    build, traces = oracle_run

    def inject(body: dict[str, Any]) -> str:
        step = request_text(body).split("Step:\n", 1)[1]
        if "<tool_call>" in step:  # a careless injector that also moves the box: must be dropped
            return step.replace("bbox_2d", "bbox_2d_").replace("closely", "briefly")
        return step.replace("red", "purple").replace("left", "right").replace("blue", "purple")

    dataset = open_mcot_dataset(build)
    with ChatServer(default=inject, model_ids=("injector",)) as injector, \
            ReferenceServer(dataset, "text-follower", family="mcot") as model:
        assert main(["run", "mcot", "--dataset", str(build), "--model", "text-follower", "--base-url", model.base_url,
                     "--out", str(tmp_path / "run"), "--no-progress", "--injector-model", "injector",
                     "--injector-base-url", injector.openai_base_url]) == 0
    lines = {(l["id"], l["probe"]): l for l in map(json.loads, (tmp_path / "run" / "predictions.jsonl").read_text().splitlines())}
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["injector"] == "llm:injector:mcot-inject/2"
    for item in dataset.items:
        injection = lines[(item.id, "replay_text")]["meta"]["injection"]
        first, second = injection["edits"][0], injection["edits"][-1]
        assert first == {"step": 0, "dropped": "the injector changed a tool call"}
        assert "bbox_2d\"" in injection["texts"][0]  # the tool call step kept as it was
        gold = next(o["text"] for o in item.record["options"] if o["label"] == item.record["answer"])
        if gold in ("red", "left", "blue"):
            # this careless injector edits the answer word itself: the edit says which words and that one
            # of them states an answer
            assert second["kind"] == "llm" and injection["changed"] and second["answer_word"] is True
            swapped = {"left": "right"}.get(gold, "purple")
            assert second["touched"]["before"] == [gold] and second["touched"]["after"] == [swapped]
        else:
            assert not injection["changed"]
