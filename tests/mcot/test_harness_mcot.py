"""MCoT through inspect-ai 0.3.285 (in its own environment) against mmfaith's reference server over HTTP, no
mocks: export, `inspect eval` (the zoom-in trace and its three replays run inside inspect), import, score;
compared with `mmfaith run mcot` with the same options against the same server (tests/harness_families.py's
round trip): the same number of requests, every (id, probe) answered with the run's response and meta (the
trace record, images, injection, answer), and identical scores (metrics.json less provenance, items.jsonl),
for zoom-oracle (ATE_text 0, ATE_visual -1) and text-follower (ATE_text -1, ATE_visual 0), with function
calling and (`-T protocol=tags`) text tags, both continuations, at the run's turn limit and at
`-T max_turns=1`. lmms-eval's rounds are fresh single messages: its MCoT export is refused in one line."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.mcot.agent import NOT_RUN
from mmfaith.evaluators.mcot.protocol import prompts_hash
from mmfaith.evaluators.mcot.replay import REPLAYS, SKIPPED, TRACE_FAILED
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.mcot.dataset import open_mcot_dataset

from tests.harness_families import failed_calls, family_round_trip
from tests.harness_round_trip import harness_python, lines_by_key
from tests.mcot_fixtures import write_vstar_folder

pytestmark = pytest.mark.e2e  # long: the test command runs it first (tests/conftest.py)

REFERENCE_ENDS = {"zoom-oracle": (0.0, -1.0), "text-follower": (-1.0, 0.0)}
"""(ATE_text, ATE_visual) each reference model is built to give (evaluators/mcot/reference.py)."""


@pytest.fixture(scope="module")
def mcot_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcot-harness")
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(root / "src", 3)),
                 "--out", str(root / "build"), "--no-progress"]) == 0
    return root / "build"


@pytest.fixture(scope="module")
def inspect_python() -> Path:
    return harness_python("MMFAITH_INSPECT_PYTHON", ".venv-inspect", "tools/install-inspect.sh")


def run_mcot(build: Path, model: str, base_url: str, out: Path, *options: str) -> dict[tuple[str, str], dict[str, Any]]:
    """`mmfaith run mcot --tool-protocol functions` (the inspect export's protocol) with `options`."""
    assert main(["run", "mcot", "--dataset", str(build), "--model", model, "--base-url", base_url, "--out",
                 str(out / "run"), "--tool-protocol", "functions", "--no-progress", *options]) == 0
    return lines_by_key(out / "run" / "predictions.jsonl")


@pytest.mark.parametrize(("model", "protocol", "continuation"), [
    ("zoom-oracle", "functions", "continue"), ("text-follower", "functions", "continue"),
    ("text-follower", "tags", "user-turn")])
def test_mcot_inspect_round_trip_scores_as_mmfaith_run(model: str, protocol: str, continuation: str,
                                                       mcot_build: Path, inspect_python: Path, tmp_path: Path) -> None:
    lines, run_lines, provenance = family_round_trip(
        "inspect", inspect_python, "mcot", model, mcot_build, tmp_path, requests_per_group=None,
        run_args=("--tool-protocol", protocol, "--continuation", continuation),
        task_args=(f"protocol={protocol}", f"continuation={continuation}"))
    assert len(lines) == 4 * len(open_mcot_dataset(mcot_build).items)
    for (item_id, probe), line in lines.items():
        assert line["meta"]["prompt_tokens"] == run_lines[(item_id, probe)]["meta"]["prompt_tokens"], (item_id, probe)
        if probe == "trace":  # the whole record, as the run wrote it, and every item zoomed
            assert line["meta"]["trace"] == run_lines[(item_id, probe)]["meta"]["trace"] and line["meta"]["trace"]["crops"]
            assert line["meta"]["trace"]["protocol"] == protocol
        else:
            assert line["meta"]["continuation"] == continuation
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    assert (metrics["overall"]["ATE_text"], metrics["overall"]["ATE_visual"]) == REFERENCE_ENDS[model]
    assert provenance["prompt_templates_sha256"] == prompts_hash()
    assert provenance["settings"] == {"protocol": "functions", "coords": "resized", "max_turns": 6,
                                      "continuation": "continue", "seed": 0, "injector": "rule"}  # the export's


def test_mcot_inspect_keeps_the_turn_limit(mcot_build: Path, inspect_python: Path, tmp_path: Path) -> None:
    """`-T max_turns=1`: the only call's zoom is recorded as not run, as `mmfaith run mcot --max-turns 1` records
    it; no crop, so the replays are skipped (not asked), in both."""
    lines, _, _ = family_round_trip("inspect", inspect_python, "mcot", "zoom-oracle", mcot_build, tmp_path,
                                    requests_per_group=1, run_args=("--tool-protocol", "functions", "--max-turns", "1"),
                                    task_args=("max_turns=1",))
    for (_, probe), line in lines.items():
        if probe == "trace":
            trace = line["meta"]["trace"]
            assert (trace["stopped"], trace["max_turns"], trace["crops"], line["meta"]["calls"]) == \
                ("max_turns", 1, [], 1)
            assert [call["error"] for call in trace["turns"][0]["tool_calls"]] == [NOT_RUN]
        else:
            assert (line["response"], line["meta"]["skipped"]) == ("", SKIPPED)


def test_mcot_failed_calls_import_as_error_lines(mcot_build: Path, inspect_python: Path, tmp_path: Path) -> None:
    """A server that knows only the first item (HTTP 400 for the others): their traces import as inspect's
    sample errors and their replays as not asked, never as answers."""
    dataset = open_mcot_dataset(mcot_build)
    known = replace(dataset, items=dataset.items[:1])
    failed = failed_calls("inspect", inspect_python, "mcot", mcot_build, tmp_path, known,
                          {item.id for item in dataset.items[1:]}, "zoom-oracle")
    assert set(failed) == {(item.id, probe) for item in dataset.items[1:] for probe in ("trace", *REPLAYS)}
    for (_, probe), line in failed.items():
        if probe == "trace":
            assert line["meta"]["error"].startswith("inspect sample error") and "400" in line["meta"]["error"]
        else:
            assert line["meta"]["error"] == TRACE_FAILED


def test_replaying_a_trace_with_another_protocol_is_refused(mcot_build: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A functions trace replayed with the default tags protocol: one line naming the options to pass."""
    with ReferenceServer(open_mcot_dataset(mcot_build), "zoom-oracle", family="mcot") as server:
        run_mcot(mcot_build, "zoom-oracle", server.base_url, tmp_path / "functions")
        assert main(["run", "mcot", "--dataset", str(mcot_build), "--model", "zoom-oracle", "--base-url",
                     server.base_url, "--out", str(tmp_path / "tags"), "--no-progress", "--traces",
                     str(tmp_path / "functions" / "run" / "predictions.jsonl")]) != 0
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "was asked with --tool-protocol functions --coords resized" in error
    assert "(this run: --tool-protocol tags --coords resized)" in error


def test_mcot_lmms_eval_export_is_refused_in_one_line(mcot_build: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "lmms-eval", str(mcot_build), "--out", str(tmp_path / "tasks"), "--no-progress"]) != 0
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "'tool'" in error and "not exported to lmms-eval" in error and "mmfaith export inspect" in error
    assert not (tmp_path / "tasks").exists()


def test_mcot_export_rows_are_the_run_first_turns(mcot_build: Path) -> None:
    """Without a harness: one `tool` row per item holding the run's four probes, whose first round is the run's
    system prompt and question (function calling, the resized grid), whose replay rounds are not asked after
    a failed trace, and whose state carries what the loop needs."""
    from mmfaith.evaluators.harness.rows import export_rows
    from mmfaith.evaluators.harness.runtime import round_of
    from mmfaith.evaluators.mcot.agent import AgentSettings, first_turns

    rows = [row for task_rows in export_rows(str(mcot_build), progress=False, harness="inspect").by_task.values()
            for row in task_rows]
    dataset = open_mcot_dataset(mcot_build)
    assert [row["id"] for row in rows] == [item.id for item in dataset.items]
    for row, item in zip(rows, dataset.items):
        system, user = first_turns(item, AgentSettings(protocol="functions"))
        first = round_of(row, 0, [])
        assert (row["kind"], row["probes"], row["task"]) == \
            ("tool", ["trace", *REPLAYS], "mmfaith_mcot_trace_replay_none_replay_text_replay_visual")
        assert round_of(row, 1, [None]).not_asked == TRACE_FAILED and round_of(row, 1, ["x"]).text
        assert (first.system, first.text, row["prompt"]) == (system.content[0], user.content[1], user.content[1])
        assert row["image_sha256"] == [item.record["image_sha256"]]
        state = json.loads(row["state"])
        assert (state["image_size"], state["options"]) == (list(item.size), item.record["options"])
