"""What the harness round-trip tests share: finding the harness environments, `mmfaith run` as the
reference, and comparing scores.

The harnesses live in their own environments (tools/install-lmms-eval.sh, tools/install-inspect.sh),
found by $MMFAITH_LMMS_EVAL_PYTHON / $MMFAITH_INSPECT_PYTHON or <repo>/.venv-lmms-eval /
<repo>/.venv-inspect; the tests skip, saying how to install them, when they are absent.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.answers import read_count
from mmfaith.loaders.spd_faith import open_spd_dataset

RunHarness = Callable[[Path, str, str, Path], None]
"""(export dir, model, base URL, log dir): runs the harness over the export against the server."""
ImportLogs = Callable[[Path, Path, Path], None]
"""(log dir, dataset, predictions.jsonl): imports the harness's logs."""

REPO = Path(__file__).resolve().parents[1]


def harness_python(env_var: str, venv: str, installer: str) -> Path:
    """The harness environment's python; skips the test when there is none."""
    named = os.environ.get(env_var)
    if named:
        if not Path(named).exists():
            pytest.fail(f"{env_var}={named} does not exist: run {installer} or unset it")
        return Path(named)
    default = REPO / venv / "bin" / "python"
    if not default.exists():
        pytest.skip(f"{venv} not installed: run {installer} (or set {env_var})")
    return default


def harness_env(**extra: str) -> dict[str, str]:
    """The environment a harness runs in: no network but the servers named, no hub lookups."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost", **extra}


def reference_run(dataset: Path, model: str, base_url: str, out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """`mmfaith run spd-faith` against the server, scored into out/score; its lines by (id, probe)."""
    assert main(["run", "spd-faith", "--dataset", str(dataset), "--model", model, "--base-url", base_url,
                  "--out", str(out / "run"), "--no-progress"]) == 0
    assert main(["score", "spd-faith", "--dataset", str(dataset), "--predictions", str(out / "run" / "predictions.jsonl"),
                 "--from-run", "--out", str(out / "score")]) == 0
    return lines_by_key(out / "run" / "predictions.jsonl")


def lines_by_key(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {(line["id"], line["probe"]): line for line in lines}


def scores_without_provenance(score_dir: Path) -> tuple[dict[str, Any], str]:
    """(metrics.json less its provenance, items.jsonl) of a score dir."""
    metrics = json.loads((score_dir / "metrics.json").read_text(encoding="utf-8"))
    metrics.pop("provenance")
    return metrics, (score_dir / "items.jsonl").read_text(encoding="utf-8")


def assert_same_as_run(imported: Path, run_lines: dict[tuple[str, str], dict[str, Any]], dataset: Path,
                       reference: Path, out: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """The imported predictions answer every (id, probe) as `mmfaith run` did, with the same family meta,
    and score to the same metrics and items; returns the imported lines."""
    lines = lines_by_key(imported)
    assert set(lines) == set(run_lines)
    for key, line in lines.items():
        assert line["response"] == run_lines[key]["response"], key
        for name in ("order", "layout", "count_asked", "images"):
            assert line["meta"][name] == run_lines[key]["meta"][name], (key, name)
    assert main(["score", "spd-faith", "--dataset", str(dataset), "--predictions", str(imported), "--out", str(out)]) == 0
    assert scores_without_provenance(out) == scores_without_provenance(reference)
    return lines


def assert_describe_used_own_count(lines: dict[tuple[str, str], dict[str, Any]]) -> int:
    """Every describe line was asked with the count parsed from the same model's count answer; returns how
    many pairs that count differs from the gold on (callers expect some for an imperfect model)."""
    described = 0
    for (item_id, probe), line in lines.items():
        if probe != "describe":
            continue
        own = read_count(lines[(item_id, "count")]["response"])
        assert line["meta"]["count_asked"] == own, item_id
        described += 1
    assert described
    return described


def subset_build(build: Path, keep: int, out: Path) -> Path:
    """A copy of a build dir holding only its first `keep` records (a server over it refuses the others)."""
    shutil.copytree(build, out)
    records = (out / "records.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (out / "records.jsonl").write_text("".join(records[:keep]), encoding="utf-8")
    return out


def round_trip(harness: str, model: str, build: Path, tmp_path: Path, run_harness: RunHarness,
               import_logs: ImportLogs) -> tuple[dict[tuple[str, str], dict[str, Any]],
                                                dict[tuple[str, str], dict[str, Any]], dict[str, Any]]:
    """Export the build, run `mmfaith run` then the harness against one reference server, import the
    harness's logs; asserts the harness sent exactly `mmfaith run`'s requests and the imported lines
    answer and score as the run's (`assert_same_as_run`). Returns (imported lines, run lines, import.json)."""
    tasks = tmp_path / "tasks"
    assert main(["export", harness, str(build), "--out", str(tasks), "--no-progress"]) == 0
    dataset = open_spd_dataset(build)
    with ReferenceServer(dataset, model, family="spd-faith") as server:
        run_lines = reference_run(build, model, server.base_url, tmp_path / "reference")
        seen_by_run = server.requests_seen
        run_harness(tasks, model, server.base_url, tmp_path / "logs")
        # the harness sent exactly the requests `mmfaith run` did: one per (pair, probe)
        assert server.requests_seen - seen_by_run == seen_by_run == 4 * len(dataset.pairs)
    imported = tmp_path / "imported" / "predictions.jsonl"
    import_logs(tmp_path / "logs", build, imported)
    lines = assert_same_as_run(imported, run_lines, build, tmp_path / "reference" / "score", tmp_path / "score")
    assert_describe_used_own_count(lines)
    if model == "blind":  # it counts 0 everywhere: describe was asked with its count, not the gold one
        assert all(line["meta"]["count_asked"] == 0 for (_, probe), line in lines.items() if probe == "describe")
        assert any(pair.record["differences"] for pair in dataset.pairs)
    provenance = json.loads((imported.parent / "import.json").read_text(encoding="utf-8"))
    assert provenance["harness"] == harness and provenance["model"] == model
    assert provenance["export"]["harness"] == harness
    assert provenance["counts"] == {"lines": len(run_lines), "answered": len(run_lines), "errors": 0, "missing": 0}
    return lines, run_lines, provenance


def failed_calls(harness: str, build: Path, tmp_path: Path, run_harness: RunHarness,
                 import_logs: ImportLogs) -> dict[tuple[str, str], dict[str, Any]]:
    """Export the build and run the harness against an oracle server that knows only its first 3 pairs
    (HTTP 400 for the others); asserts the known pairs are answered, the others' describe is not asked
    after their failed count, and the scorer counts the failures as errors. Returns the imported lines
    of the unknown pairs' other probes, whose error text the caller checks."""
    tasks = tmp_path / "tasks"
    assert main(["export", harness, str(build), "--out", str(tasks), "--no-progress"]) == 0
    known = open_spd_dataset(subset_build(build, 3, tmp_path / "known"))
    with ReferenceServer(known, "oracle", family="spd-faith") as server:
        run_harness(tasks, "oracle", server.base_url, tmp_path / "logs")
    imported = tmp_path / "imported" / "predictions.jsonl"
    import_logs(tmp_path / "logs", build, imported)
    lines = lines_by_key(imported)
    assert len(lines) == 4 * len(open_spd_dataset(build).pairs)
    known_ids = {pair.id for pair in known.pairs}
    failed = {}
    for (item_id, probe), line in lines.items():
        if item_id in known_ids:
            assert line["response"] is not None and line["meta"]["error"] is None
        elif probe == "describe":
            assert line["response"] is None and line["meta"]["error"].startswith("not asked: this pair's count")
        else:
            assert line["response"] is None
            failed[(item_id, probe)] = line
    score = tmp_path / "score"
    assert main(["score", "spd-faith", "--dataset", str(build), "--predictions", str(imported), "--out", str(score)]) == 0
    counts = json.loads((score / "metrics.json").read_text(encoding="utf-8"))["counts"]
    assert counts["n_answered"] == 4 * 3 and counts["n_errors"] == len(lines) - 4 * 3
    return failed
