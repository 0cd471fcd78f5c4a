"""The one rule for failed, missing, empty and unparsed answers (docs/answers.md), end to end: the real
`mmfaith run` and `mmfaith score` against local OpenAI-protocol servers (tests/chat_server.py)."""
from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.mcot.protocol import TOOL_NAME
from tests.chat_server import ChatServer


@pytest.fixture(scope="module")
def mcot_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mcot-rules") / "build"
    assert main(["build", "mcot", "--out", str(out), "--no-progress"]) == 0
    return out


def whole_image_zoomer_failing_every_third_call() -> Any:
    """A model that ignores what it is shown: it zooms to the whole image (normalized 0-1000 box), then
    answers A whatever the crop; every third call is a 500."""
    counter, lock = itertools.count(1), threading.Lock()

    def reply(body: dict[str, Any]) -> str | int:
        with lock:
            number = next(counter)
        if number % 3 == 0:
            return 500
        if not any(message.get("role") == "assistant" for message in body["messages"]):
            call = {"name": TOOL_NAME, "arguments": {"bbox_2d": [0, 0, 1000, 1000], "label": "everything"}}
            return f"Let me look at everything. <tool_call>{json.dumps(call)}</tool_call>"
        return "I looked. <answer>A</answer>"

    return reply


def test_mcot_whole_image_crops_and_failed_calls(mcot_build: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A whole-image crop neither crashes the run nor earns sufficiency; failed replays are left out of ATE,
    never counted as a change: a model whose answer never depends on what it is shown has ATE 0 or n/a."""
    with ChatServer(default=whole_image_zoomer_failing_every_third_call()) as server:
        # exit status 1: some calls failed (the run says so and how to retry); no traceback, every item written
        assert main(["run", "mcot", "--dataset", str(mcot_build), "--model", "test-model", "--base-url",
                     server.openai_base_url, "--out", str(tmp_path / "run"), "--coords", "normalized",
                     "--concurrency", "1", "--max-attempts", "1", "--limit", "9", "--no-progress"]) == 1
    lines = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    traces = [line for line in lines if line["probe"] == "trace" and line["response"] is not None]
    assert traces and all(t["meta"]["trace"]["crops"] for t in traces if t["meta"]["trace"]["stopped"] == "answer")
    assert any(line["response"] is None for line in lines)  # the failures are recorded
    capsys.readouterr()
    assert main(["score", "mcot", "--dataset", str(mcot_build), "--predictions", str(tmp_path / "run" /
                 "predictions.jsonl"), "--from-run", "--out", str(tmp_path / "score"), "--bootstrap", "20"]) == 0
    printed = capsys.readouterr()
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    overall = metrics["overall"]
    assert overall["ATE_visual"] in (0.0, None) and overall["ATE_text"] in (0.0, None)
    assert overall["ate"]["visual"]["left_out"] > 0  # failed replays: out of the pairs, and counted
    assert overall["sufficiency"] in (0.0, None) and overall["target_hit_rate"] in (0.0, None)
    answers = metrics["answers"]
    assert answers["failed"] > 0 and answers["answered"] + answers["failed"] + answers["missing"] + \
        answers["empty"] + answers["unparsed"] == answers["expected"]
    assert "failed" in printed.out and "parse rate" in printed.out
    assert "mmfaith: warning:" in printed.err and "Answers read" in (tmp_path / "score" / "report.md").read_text()


def test_crm_empty_answers_give_no_afr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A model that says nothing (every reply empty): no AFR (an empty answer is never equal to another),
    every answer counted as empty, and a coverage warning."""
    build = tmp_path / "build"
    assert main(["build", "crm", "--out", str(build), "--max-items", "2", "--mask-style", "black",
                 "--no-progress"]) == 0
    with ChatServer(default="") as server:
        assert main(["run", "crm", "--dataset", str(build), "--model", "test-model", "--base-url", server.openai_base_url,
                     "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["score", "crm", "--dataset", str(build), "--predictions", str(tmp_path / "run" / "predictions.jsonl"),
                 "--from-run", "--out", str(tmp_path / "score"), "--bootstrap", "10"]) == 0
    printed = capsys.readouterr()
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    for block in metrics["by_mode"].values():
        assert block["metrics"]["AFR"] is None and block["n_afr_left_out"] == block["n_units"]
    assert metrics["answers"]["empty"] == metrics["answers"]["expected"] and metrics["answers"]["answered"] == 0
    assert "mmfaith: warning:" in printed.err


def test_the_llm_reader_fills_what_the_rules_leave_and_reports_agreement(tmp_path: Path) -> None:
    """`score vfaith --reader-model` against a local OpenAI-protocol server acting as the reader: the replies
    the rules read keep the rules' reading; a reply they leave ("It is the colour of the sky") is read by the
    model; its agreement with the rules is reported, and a second score asks nothing (cached)."""
    from mmfaith.evaluators.vfaith.run import VfaithProbePlan
    from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset

    build = tmp_path / "build"
    assert main(["build", "vfaith", "--out", str(build), "--per-template", "1", "--no-progress"]) == 0
    dataset = open_vfaith_dataset(build)
    plan = VfaithProbePlan()
    lines = []
    for item in dataset.items:
        for probe in plan.expected_probes(item):
            record = item.record
            if probe == "perception":
                response = "\\boxed{" + ", ".join(record["answers"]) + "}"
            elif probe == "original":
                response = f"The answer is ({record['answer_original']}) because it is visible."
            else:
                response = "It is the colour of the sky, I believe."
            lines.append(json.dumps({"id": item.id, "probe": probe, "response": response, "model": "m"}))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("\n".join(lines) + "\n")

    def reader(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"]
        text = text if isinstance(text, str) else " ".join(part.get("text", "") for part in text)
        reply = text.split("<<<", 1)[1]
        return "(B)" if "sky" in reply else reply.split("(", 1)[1][0] if "(" in reply else "NONE"

    with ChatServer(default=reader, model_ids=("reader",)) as server:
        args = ["score", "vfaith", "--dataset", str(build), "--predictions", str(predictions), "--bootstrap", "0",
                "--reader-model", "reader", "--reader-base-url", server.openai_base_url]
        assert main([*args, "--out", str(tmp_path / "s1")]) == 0
        asked = len(server.completion_requests())
        assert main([*args, "--out", str(tmp_path / "s2")]) == 0
        assert len(server.completion_requests()) == asked  # cached
    metrics = json.loads((tmp_path / "s1" / "metrics.json").read_text())
    n_pairs = metrics["counts"]["n_pairs"]
    # by hand: the original replies are read by the rules and the LLM alike (agreement 1 over n_pairs); the
    # edited replies are read by the LLM only (filled n_pairs); none is left unread
    assert metrics["reader"]["n_both"] == n_pairs and metrics["reader"]["agreement"] == 1.0
    assert metrics["reader"]["filled"] == n_pairs and metrics["answers"]["unparsed"] == 0
