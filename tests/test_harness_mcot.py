"""MCoT through inspect-ai 0.3.285 (in its own environment) against mmfaith's reference server over HTTP, no
mocks: export, `inspect eval` (the zoom-in tool loop runs inside inspect), import, then `mmfaith run mcot
--traces` replays the imported traces and `mmfaith score mcot` scores them. Compared with `mmfaith run mcot
--tool-protocol P` against the same server: the traces are the run's record for record, and the scores
(metrics.json less provenance, items.jsonl) are identical, for zoom-oracle (ATE_text 0, ATE_visual -1)
and text-follower (ATE_text -1, ATE_visual 0), with function calling and (`-T protocol=tags`) text tags,
at the run's turn limit and at `-T max_turns=1`.
lmms-eval's rounds are fresh single messages: its MCoT export is refused in one line."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.mcot.agent import NOT_RUN
from mmfaith.evaluators.mcot.protocol import prompts_hash
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.mcot.dataset import open_mcot_dataset

from .harness_families import failed_calls, import_logs, run_inspect
from .harness_round_trip import harness_python, lines_by_key, scores_without_provenance
from .mcot_fixtures import write_vstar_folder

RUN_ONLY_META = ("attempts", "latency_s")
"""What the run's engine measures per call and inspect's log does not give per call (left null on import)."""
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


def run_mcot(build: Path, model: str, base_url: str, out: Path, *options: str,
             protocol: str = "functions") -> dict[tuple[str, str], dict[str, Any]]:
    """`mmfaith run mcot --tool-protocol PROTOCOL` (default the inspect export's), scored into out/score."""
    assert main(["run", "mcot", "--dataset", str(build), "--model", model, "--base-url", base_url, "--out",
                 str(out / "run"), "--tool-protocol", protocol, "--no-progress", *options]) == 0
    assert main(["score", "mcot", "--dataset", str(build), "--predictions", str(out / "run" / "predictions.jsonl"),
                 "--from-run", "--out", str(out / "score")]) == 0
    return lines_by_key(out / "run" / "predictions.jsonl")


def inspect_traces(build: Path, python: Path, model: str, tmp_path: Path, task_args: tuple[str, ...] = (),
                   run_options: tuple[str, ...] = (), protocol: str = "functions") -> tuple[dict, dict, dict, str]:
    """Export, run `mmfaith run mcot` then inspect against one server, import, and replay the imported traces
    with `mmfaith run mcot --traces` against the same server. Asserts inspect sent as many requests as the
    run's traces made calls, and the replays asked no trace again. Returns (imported lines, run lines,
    replayed run lines, the import's stdout)."""
    tasks = tmp_path / "tasks"
    assert main(["export", "inspect", str(build), "--out", str(tasks), "--no-progress"]) == 0
    with ReferenceServer(open_mcot_dataset(build), model, family="mcot") as server:
        run_lines = run_mcot(build, model, server.base_url, tmp_path / "reference", *run_options, protocol=protocol)
        trace_calls = sum(line["meta"]["calls"] for (_, probe), line in run_lines.items() if probe == "trace")
        seen = server.requests_seen
        run_inspect(python, "mmfaith_mcot", tasks, model, server.base_url, tmp_path / "logs",
                    (*task_args, f"protocol={protocol}"))
        assert server.requests_seen - seen == trace_calls
        imported = tmp_path / "imported" / "predictions.jsonl"
        printed = import_logs("inspect", python, tmp_path / "logs", build, imported, tasks)
        seen = server.requests_seen
        replayed = run_mcot(build, model, server.base_url, tmp_path / "replayed", "--traces", str(imported),
                            *run_options, protocol=protocol)
        replays = sum(probe != "trace" and not line["meta"].get("skipped") for (_, probe), line in run_lines.items())
        assert server.requests_seen - seen == replays
    return lines_by_key(imported), run_lines, replayed, printed


def assert_traces_are_the_runs(imported: dict, run_lines: dict) -> None:
    """Every imported line is a trace answered as the run answered it, with the run's trace record, images,
    call count, tokens and finish reason (all meta but what inspect cannot tell per call)."""
    assert set(imported) == {key for key in run_lines if key[1] == "trace"}
    for key, line in imported.items():
        run_line = run_lines[key]
        assert line["response"] == run_line["response"] and line["meta"]["error"] is None, key
        for name, value in run_line["meta"].items():
            if name not in RUN_ONLY_META:
                assert line["meta"].get(name) == value, (key, name)
        assert all(line["meta"][name] is None for name in RUN_ONLY_META if name in line["meta"])


@pytest.mark.parametrize(("model", "protocol"), [("zoom-oracle", "functions"), ("text-follower", "functions"),
                                                 ("text-follower", "tags")])
def test_mcot_inspect_traces_replay_and_score_as_mmfaith_run(model: str, protocol: str, mcot_build: Path,
                                                              inspect_python: Path, tmp_path: Path) -> None:
    imported, run_lines, replayed, printed = inspect_traces(mcot_build, inspect_python, model, tmp_path,
                                                            protocol=protocol)
    assert_traces_are_the_runs(imported, run_lines)
    assert all(line["meta"]["trace"]["crops"] for line in imported.values())  # both models zoom on every item
    for key, line in replayed.items():  # the replayed run kept the submitted traces and answered as the run
        assert line["response"] == run_lines[key]["response"], key
        if key[1] == "trace":
            assert line["meta"]["trace"] == run_lines[key]["meta"]["trace"] and line["meta"]["submitted_by"] == model
    assert scores_without_provenance(tmp_path / "replayed" / "score") == \
        scores_without_provenance(tmp_path / "reference" / "score")
    metrics = json.loads((tmp_path / "replayed" / "score" / "metrics.json").read_text())
    assert (metrics["overall"]["ATE_text"], metrics["overall"]["ATE_visual"]) == REFERENCE_ENDS[model]
    provenance = json.loads((tmp_path / "imported" / "import.json").read_text())
    assert provenance["family"] == "mcot" and provenance["model"] == model
    assert provenance["prompt_templates_sha256"] == provenance["export"]["prompt_templates_sha256"] == prompts_hash()
    assert provenance["settings"] == {"protocol": "functions", "coords": "resized", "max_turns": 6}  # the export's
    assert all(line["meta"]["trace"]["protocol"] == protocol for line in imported.values())
    assert "then replay the traces: mmfaith run mcot" in printed and f"--tool-protocol {protocol}" in printed


def test_mcot_inspect_keeps_the_turn_limit(mcot_build: Path, inspect_python: Path, tmp_path: Path) -> None:
    """`-T max_turns=1`: the only call's zoom is recorded as not run, as `mmfaith run mcot --max-turns 1` records
    it; no crop, so the replays are skipped."""
    imported, run_lines, _, _ = inspect_traces(mcot_build, inspect_python, "zoom-oracle", tmp_path,
                                               ("max_turns=1",), ("--max-turns", "1"))
    assert_traces_are_the_runs(imported, run_lines)
    for line in imported.values():
        trace = line["meta"]["trace"]
        assert (trace["stopped"], trace["max_turns"], trace["crops"], line["meta"]["calls"]) == ("max_turns", 1, [], 1)
        assert [call["error"] for call in trace["turns"][0]["tool_calls"]] == [NOT_RUN]


def test_mcot_failed_calls_import_as_error_lines(mcot_build: Path, inspect_python: Path, tmp_path: Path) -> None:
    """A server that knows only the first item (HTTP 400 for the others): their traces import as inspect's
    sample errors, never as answers."""
    dataset = open_mcot_dataset(mcot_build)
    known = replace(dataset, items=dataset.items[:1])
    failed = failed_calls("inspect", inspect_python, "mcot", mcot_build, tmp_path, known,
                          {item.id for item in dataset.items[1:]}, "zoom-oracle")
    assert set(failed) == {(item.id, "trace") for item in dataset.items[1:]}
    for line in failed.values():
        assert line["meta"]["error"].startswith("inspect sample error") and "400" in line["meta"]["error"]
        assert "trace" not in line["meta"]


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
    """Without a harness: one `tool` row per item whose first round is the run's system prompt and question
    (function calling, the resized grid), and whose state carries what the loop needs."""
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
        assert (row["kind"], row["probes"], row["task"]) == ("tool", ["trace"], "mmfaith_mcot_trace")
        assert (first.system, first.text, row["prompt"]) == (system.content[0], user.content[1], user.content[1])
        assert row["image_sha256"] == [item.record["image_sha256"]]
        state = json.loads(row["state"])
        assert (state["image_size"], state["options"]) == (list(item.size), item.record["options"])
