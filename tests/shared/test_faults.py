"""Fault injection: a faulty OpenAI-protocol server (tests/fault_server.py) driven through the real `mmfaith run`
and `score` of every family. No fault may end in a traceback, hold a run past its deadline, put a secret on
disk, or let stale predictions be scored as if they were current."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmfaith.cli import main

from tests.fault_server import FaultServer

FAMILIES = ("spd-faith", "vfaith", "crm", "mcot")
BUILD_ARGS = {"spd-faith": ["--per-tier", "1"], "vfaith": ["--per-template", "1", "--templates", "count"],
              "crm": ["--max-items", "2", "--mask-style", "black"], "mcot": []}
"""One small build per family on the embedded sample (a VFaith count pair: no colour question of the sample has a
recolour target since vases are not recoloured)."""
KEY = "sk-proj-FaultKey0123456789abcdef"  # the key in use (--api-key-env)
OTHER_KEY = "plainLocalKey4242"  # OPENAI_API_KEY, set but not the one in use
PASSWORD = "s3cretPassw0rd"
QUERY_KEY = "QueryKey98765"
SECRETS = (KEY, OTHER_KEY, PASSWORD, QUERY_KEY, base64.b64encode(f"alice:{PASSWORD}".encode()).decode())


@pytest.fixture(scope="session")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small build per family (read-only for the tests)."""
    root = tmp_path_factory.mktemp("fault-builds")
    for family, extra in BUILD_ARGS.items():
        assert main(["build", family, "--out", str(root / family), "--no-progress", *extra]) == 0
    return {family: root / family for family in FAMILIES}


def mmfaith(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m mmfaith ARGS` in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "mmfaith", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def run_args(family: str, build: Path, base_url: str, out: Path, *extra: str, limit: int = 1) -> list[str]:
    return ["run", family, "--dataset", str(build), "--model", "test-model", "--base-url", base_url, "--out", str(out),
            "--limit", str(limit), "--no-progress", *extra]


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# -- secrets -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_an_echoing_server_leaves_no_key_or_url_credential_on_disk(builds: dict[str, Path], tmp_path: Path,
                                                                    family: str) -> None:
    """The server quotes the request's headers and URL in every answer; run, score and import write none of it."""
    env = {"OPENAI_API_KEY": OTHER_KEY, "FAULT_TEST_KEY": KEY}
    run, score = tmp_path / "run", tmp_path / "score"
    with FaultServer("echo") as server:
        credentialed = server.base_url.replace("http://", f"http://alice:{PASSWORD}@")
        for name, base_url in (("plain", server.base_url), ("credentialed", credentialed + f"?api_key={QUERY_KEY}")):
            done = mmfaith(*run_args(family, builds[family], base_url, run / name, "--api-key-env", "FAULT_TEST_KEY"),
                           env=env)
            assert "Traceback" not in done.stderr, done.stderr
            printed = done.stdout + done.stderr
            assert not [s for s in SECRETS if s in printed]
    plain, with_url = run / "plain", run / "credentialed"
    echoed = "".join(line["response"] or "" for line in lines_of(plain / "predictions.jsonl"))
    assert "Bearer ***" in echoed  # the server did quote the Authorization header
    assert "Basic ***" in (with_url / "predictions.jsonl").read_text()  # user:pw@ became a Basic credential
    assert json.loads((with_url / "run.json").read_text())["servers"] == [
        f"http://***@127.0.0.1:{server.port}/v1?api_key=***"]
    done = mmfaith("score", family, "--dataset", str(builds[family]), "--predictions",
                   str(plain / "predictions.jsonl"), "--from-run", "--out", str(score), "--bootstrap", "10", env=env)
    assert "Traceback" not in done.stderr, done.stderr
    written = {p: p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()}
    leaks = [(p.name, s) for p, text in written.items() for s in SECRETS if s in text]
    assert not leaks, leaks


# -- bounded time ------------------------------------------------------------------------------------


def test_a_trickling_server_cannot_hold_a_run_past_its_deadline(builds: dict[str, Path], tmp_path: Path) -> None:
    """One byte every 2 s: `--timeout 5` is a deadline for the whole attempt, so 2 attempts end in ~10 s a call."""
    out = tmp_path / "run"
    with FaultServer("trickle") as server:
        start = time.monotonic()
        done = mmfaith(*run_args("mcot", builds["mcot"], server.base_url, out, "--timeout", "5", "--max-attempts", "2"))
        elapsed = time.monotonic() - start
    assert elapsed < 60, elapsed
    assert "Traceback" not in done.stderr, done.stderr
    errors = {line["meta"]["error"] for line in lines_of(out / "predictions.jsonl")}
    assert any("timeout" in (error or "") for error in errors), errors


def test_a_server_refusing_every_connection_stops_the_run_early(builds: dict[str, Path], tmp_path: Path) -> None:
    """The server dies after one answer: after a few calls the run stops with the resume hint instead of
    failing each remaining call."""
    out = tmp_path / "run"
    with FaultServer("dies") as server:
        done = mmfaith("run", "spd-faith", "--dataset", str(builds["spd-faith"]), "--model", "test-model",
                       "--base-url", server.base_url, "--out", str(out), "--no-progress", "--max-attempts", "1",
                       "--concurrency", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "reached no server" in done.stderr and "re-run the same command to resume" in done.stderr
    assert "run stopped early: 1/" in done.stderr
    assert len(lines_of(out / "predictions.jsonl")) == 4  # 1 answer and 3 failed calls, not every call of the dataset


# -- faults become recorded errors -------------------------------------------------------------------

FAULT_ERRORS = {"500": "HTTP 500", "429": "HTTP 429", "invalid-json": "malformed response",
                "no-choices": "malformed response"}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("fault", [*FAULT_ERRORS, "null-content", "huge-content"])
def test_a_faulty_server_gives_recorded_errors_never_a_traceback(builds: dict[str, Path], tmp_path: Path,
                                                                 family: str, fault: str) -> None:
    out = tmp_path / "run"
    with FaultServer(fault) as server:
        start = time.monotonic()
        done = mmfaith(*run_args(family, builds[family], server.base_url, out, "--max-attempts", "2",
                                 "--timeout", "10"))
    assert time.monotonic() - start < 60
    assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr
    lines = lines_of(out / "predictions.jsonl")
    assert lines
    if fault in FAULT_ERRORS:
        assert all(line["response"] is None for line in lines)
        assert all(FAULT_ERRORS[fault] in line["meta"]["error"] or "failed" in line["meta"]["error"]
                   for line in lines), {line["meta"]["error"] for line in lines}
    if fault == "huge-content":  # stored cut to 100000 characters, the cut recorded
        answered = [line for line in lines if line["response"] is not None]
        assert answered and all(len(line["response"]) == 100_000 and line["meta"]["cut"] == {"response": 3_000_000}
                                for line in answered if line["meta"].get("cut"))
        assert (out / "predictions.jsonl").stat().st_size < 50_000_000
    for line in lines:  # every line carries its settings and what its item showed
        assert line["meta"]["generation"]["max_tokens"] == 1024 and len(line["meta"]["shown_sha256"]) == 64


@pytest.mark.parametrize("fault", ["tool-whole-image", "tool-zero-area", "tool-inverted", "tool-malformed"])
def test_bad_mcot_tool_calls_are_recorded_never_the_end_of_the_run(builds: dict[str, Path], tmp_path: Path,
                                                                    fault: str) -> None:
    out = tmp_path / "run"
    with FaultServer(fault) as server:
        done = mmfaith(*run_args("mcot", builds["mcot"], server.base_url, out, "--max-turns", "2", limit=2))
    assert "Traceback" not in done.stderr, done.stderr
    lines = lines_of(out / "predictions.jsonl")
    assert {line["id"] for line in lines} and len({line["id"] for line in lines}) == 2  # both items recorded
    calls = [call for line in lines if line["probe"] == "trace" and line["response"] is not None
             for turn in line["meta"]["trace"]["turns"] for call in turn["tool_calls"]]
    resolved = [call for call in calls if "box_given" in call]  # the last turn's calls are not run
    if fault == "tool-zero-area":
        assert resolved and all("zero width or height" in call["error"] for call in resolved)
    if fault == "tool-inverted":
        assert resolved and all(call.get("box_inverted") and call["error"] is None for call in resolved)
    if fault == "tool-whole-image":  # whatever becomes of the crop, each item ends answered or with its error
        assert all(line["response"] is not None or line["meta"]["error"] for line in lines)


# -- binding: stale predictions, other settings, a second writer -----------------------------------


def test_score_refuses_mcot_predictions_of_another_build_of_the_same_ids(builds: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    """Seed 2 shows the same ids and images, one question's options in another order: a seed-0 run is not its
    run, and --drop-stale scores the questions shown alike (seed 1 reorders all three of this round's)."""
    other = tmp_path / "seed2"
    assert main(["build", "mcot", "--out", str(other), "--seed", "2", "--no-progress"]) == 0
    shown = [[{k: json.loads(line)[k] for k in ("id", "image_sha256", "question", "options")}
              for line in (build / "records.jsonl").read_text().splitlines()] for build in (builds["mcot"], other)]
    changed = {a["id"] for a, b in zip(*shown) if a != b}
    assert changed and [a["id"] for a in shown[0]] == [b["id"] for b in shown[1]]  # same ids, some shown otherwise
    assert len(changed) < len(shown[0])  # and some shown alike, for --drop-stale to keep
    run = tmp_path / "run"
    with FaultServer("echo") as server:
        mmfaith(*run_args("mcot", builds["mcot"], server.base_url, run, limit=23))
    predictions = run / "predictions.jsonl"
    args = ["score", "mcot", "--dataset", str(other), "--predictions", str(predictions), "--from-run",
            "--bootstrap", "10"]
    refused = mmfaith(*args, "--out", str(tmp_path / "refused"))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "other images, questions or options" in refused.stderr and not (tmp_path / "refused").exists()
    kept = mmfaith(*args, "--out", str(tmp_path / "kept"), "--drop-stale")
    assert kept.returncode == 0, kept.stderr
    stale = sum(line["id"] in changed for line in lines_of(predictions))
    assert json.loads((tmp_path / "kept" / "metrics.json").read_text())["counts"]["n_stale"] == stale
    same = mmfaith("score", "mcot", "--dataset", str(builds["mcot"]), "--predictions", str(predictions), "--from-run",
                   "--bootstrap", "10", "--out", str(tmp_path / "same"))
    assert same.returncode == 0, same.stderr


def test_a_resume_with_other_generation_settings_is_refused(builds: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FaultServer("500") as server:
        first = mmfaith(*run_args("spd-faith", builds["spd-faith"], server.base_url, out, "--max-attempts", "1"))
        assert first.returncode == 1, first.stderr
        before = tree_digest(out)
        for flag, value in (("--temperature", "0.7"), ("--max-tokens", "64")):
            again = mmfaith(*run_args("spd-faith", builds["spd-faith"], server.base_url, out, flag, value))
            assert again.returncode == 2 and "field 'generation'" in again.stderr, again.stderr
    assert tree_digest(out) == before
    assert json.loads((out / "run.json").read_text())["generation"] == {"max_tokens": 1024, "temperature": 0.0,
                                                                          "sampling_seed": 0}


def test_a_second_run_into_a_run_dir_is_refused_naming_the_pid(builds: dict[str, Path], tmp_path: Path) -> None:
    """A stalled run holds the lock; a second is refused; SIGTERM ends the first with how far it got; a lock
    left by a killed process is taken over."""
    out = tmp_path / "run"
    with FaultServer("stall") as server:
        first = subprocess.Popen([sys.executable, "-m", "mmfaith",
                                  *run_args("spd-faith", builds["spd-faith"], server.base_url, out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while server.requests == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        second = mmfaith(*run_args("spd-faith", builds["spd-faith"], server.base_url, out))
        assert second.returncode == 2 and f"pid {first.pid}" in second.stderr, second.stderr
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=60)
    assert first.returncode == 130 and "Traceback" not in stderr, stderr
    assert "run interrupted: 0/" in stderr and "re-run the same command to resume" in stderr
    assert not (out / ".mmfaith.lock").exists()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (out / ".mmfaith.lock").write_text(f"{gone.pid}\n")  # a lock whose process died (kill -9)
    with FaultServer("echo") as server:
        third = mmfaith(*run_args("spd-faith", builds["spd-faith"], server.base_url, out))
    assert third.returncode == 0, third.stderr
    assert not (out / ".mmfaith.lock").exists()


def test_a_build_with_other_settings_over_a_complete_build_is_refused_and_changes_nothing(
        builds: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    for family, argv in (("mcot", ["--seed", "1"]), ("mcot", ["--limit", "3"]), ("crm", ["--max-items", "1"]),
                         ("vfaith", ["--per-template", "0"]), ("spd-faith", ["--seed", "1"])):
        out = tmp_path / family
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(builds[family], out)
        before = tree_digest(out)
        done = mmfaith("build", family, "--out", str(out), "--no-progress", *BUILD_ARGS[family], *argv)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (family, argv, done.stderr)
        assert "mmfaith: error:" in done.stderr and tree_digest(out) == before, (family, argv)


# -- releases: tampered shards, paths outside -------------------------------------------------------


@pytest.fixture(scope="session")
def mcot_release(builds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mcot-release") / "release"
    assert main(["release", str(builds["mcot"]), "--out", str(out), "--name", "org/mcot", "--version", "1.0.0",
                 "--include", "all"]) == 0
    return out


def _tampered_copy(release: Path, into: Path) -> tuple[Path, Path]:
    import shutil

    shutil.copytree(release, into)
    return into, sorted(into.rglob("*.parquet"))[0]


def test_a_release_whose_gold_was_edited_or_that_holds_an_unlisted_shard_is_refused_on_use(
        mcot_release: Path, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mmfaith.loaders.mcot.dataset import open_mcot_dataset
    from mmfaith.loaders.mcot.load import load_mcot

    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"id": "x", "probe": "trace", "response": "A", "model": "m"}) + "\n")
    edited, shard = _tampered_copy(mcot_release, tmp_path / "edited")
    table = pq.read_table(shard)
    answers = table.column("answer").to_pylist()
    pq.write_table(table.set_column(table.schema.get_field_index("answer"), "answer",
                                    pa.array(["Z", *answers[1:]])), shard)  # a gold that is no option
    extra, extra_shard = _tampered_copy(mcot_release, tmp_path / "extra")
    (extra_shard.parent / "more-00000.parquet").write_bytes(extra_shard.read_bytes())
    for folder, why in ((edited, "sha256 differs"), (extra, "shard not listed")):
        done = mmfaith("score", "mcot", "--dataset", str(folder), "--predictions", str(predictions), "--out",
                       str(tmp_path / f"score-{folder.name}"))
        assert done.returncode == 2 and why in done.stderr and "Traceback" not in done.stderr, done.stderr
        served = mmfaith("serve-reference", "mcot", "--model", "zoom-oracle", "--dataset", str(folder), "--port", "0",
                         timeout=60)
        assert served.returncode == 2 and why in served.stderr, served.stderr
        with pytest.raises(Exception, match=why):
            load_mcot(folder)
    assert open_mcot_dataset(edited, verify=False).items[0].record["answer"] == "Z"  # verify=False: used as is
    assert mmfaith("score", "mcot", "--dataset", str(mcot_release), "--predictions", str(predictions), "--out",
                   str(tmp_path / "intact")).stderr.count("manifest") == 0


@pytest.mark.parametrize("name", ["../../etc/hostname", "/etc/passwd", "data/link.parquet"])
def test_verify_refuses_a_manifest_path_outside_the_release(mcot_release: Path, tmp_path: Path, name: str) -> None:
    folder, shard = _tampered_copy(mcot_release, tmp_path / "release")
    if name == "data/link.parquet":
        (folder / name).symlink_to("/etc/hostname")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": "0" * 64, "bytes": 1}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    done = mmfaith("verify", str(folder))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    printed = done.stdout + done.stderr
    assert "outside the release" in printed or "out of the release" in printed, printed
    hostname = hashlib.sha256(Path("/etc/hostname").read_bytes()).hexdigest()[:16]
    assert hostname not in printed  # never opened nor hashed


# -- text that escapes -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["<script>alert(1)</script>", "x\n# New heading", "[click](javascript:alert(1))",
                                   "a | b", "*bold*"])
def test_a_model_name_cannot_add_markdown_to_a_report(builds: dict[str, Path], tmp_path: Path, model: str) -> None:
    """A submission's `model` is restricted by the prediction schema; `run --model` is checked the same way."""
    predictions = tmp_path / "p.jsonl"
    record = json.loads((builds["spd-faith"] / "records.jsonl").read_text().splitlines()[0])
    predictions.write_text(json.dumps({"id": record["id"], "probe": "same", "response": "yes", "model": model}) + "\n")
    scored = mmfaith("score", "spd-faith", "--dataset", str(builds["spd-faith"]), "--predictions", str(predictions),
                     "--out", str(tmp_path / "score"))
    assert scored.returncode == 2 and "line 1: model" in scored.stderr and "Traceback" not in scored.stderr
    assert not (tmp_path / "score").exists()
    ran = mmfaith("run", "spd-faith", "--dataset", str(builds["spd-faith"]), "--model", model, "--base-url",
                  "http://127.0.0.1:9/v1", "--out", str(tmp_path / "run"))
    assert ran.returncode == 2 and "a model name is letters" in ran.stderr and not (tmp_path / "run").exists()


# -- bounded input, one-line errors, no overwrite -----------------------------------------------------


def test_score_of_an_endless_line_is_refused_without_eating_memory(builds: dict[str, Path], tmp_path: Path) -> None:
    done = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-m", "mmfaith", "score", "mcot", "--dataset",
                           str(builds["mcot"]), "--predictions", "/dev/zero", "--out", str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "line 1 is longer than" in done.stderr, done.stderr
    assert int(done.stderr.strip().splitlines()[-1]) < 1_000_000  # peak resident KiB: well under 1 GiB


def test_a_zip_bomb_log_is_refused_unread(builds: dict[str, Path], tmp_path: Path) -> None:
    import zipfile

    bomb = tmp_path / "2026-01-01T00-00-00_mmfaith-spd-faith_x.eval"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("header.json", "w", force_zip64=True) as member:
            for _ in range(300):
                member.write(b"\0" * (1 << 20))  # 300 MiB of zeros: ~300 KiB compressed
    done = mmfaith("import", "inspect", str(bomb), "--dataset", str(builds["spd-faith"]), "--out",
                   str(tmp_path / "p.jsonl"))
    assert done.returncode == 2 and "would inflate to 314572800 bytes" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("results", "message"), [("[1, 2]", "expected a JSON object, found list"),
                                                  ("{\"config\": [", "not valid JSON"),
                                                  ("{\"config\": [1]}", "'config' is a list")])
def test_a_malformed_lmms_eval_results_file_is_one_error_line(builds: dict[str, Path], tmp_path: Path, results: str,
                                                              message: str) -> None:
    logs = tmp_path / "logs" / "model"
    logs.mkdir(parents=True)
    (logs / "2026_samples_mmfaith_spd_faith.jsonl").write_text("")
    (logs / "2026_results.json").write_text(results)
    done = mmfaith("import", "lmms-eval", str(tmp_path / "logs"), "--dataset", str(builds["spd-faith"]), "--out",
                   str(tmp_path / "p.jsonl"))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_report_and_import_refuse_to_overwrite(builds: dict[str, Path], tmp_path: Path) -> None:
    run, score = tmp_path / "run", tmp_path / "score"
    with FaultServer("echo") as server:
        mmfaith(*run_args("spd-faith", builds["spd-faith"], server.base_url, run))
    assert mmfaith("score", "spd-faith", "--dataset", str(builds["spd-faith"]), "--predictions",
                   str(run / "predictions.jsonl"), "--from-run", "--out", str(score), "--bootstrap", "10").returncode == 0
    before = (score / "report.md").read_bytes()
    into_score = mmfaith("report", str(score), "--out", str(score))
    assert into_score.returncode == 2 and "whose report.md it would replace" in into_score.stderr, into_score.stderr
    assert (score / "report.md").read_bytes() == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert "not empty" in mmfaith("report", str(score), "--out", str(other)).stderr
    existing = tmp_path / "existing.jsonl"
    existing.write_text("mine\n")
    refused = mmfaith("import", "lmms-eval", str(tmp_path), "--dataset", str(builds["spd-faith"]), "--out",
                      str(existing))
    assert refused.returncode == 2 and "exists" in refused.stderr and existing.read_text() == "mine\n"


@pytest.mark.parametrize(("image", "box", "message"), [
    ("/etc/hostname", [1, 2, 3, 4], "outside the images folder"),
    ("../outside.jpg", [1, 2, 3, 4], "outside the images folder"),
    ("000000000030.jpg", [1, "two", 3, 4], "of numbers"),
    ("000000000030.jpg", {"startX": "a", "startY": 0, "w": 1, "h": 1}, "of numbers"),
])
def test_a_bad_visargs_row_is_one_error_line(sample: tuple[Path, Path], tmp_path: Path, image: str, box: object,
                                             message: str) -> None:
    import shutil

    data = tmp_path / "visargs"
    (data / "images").mkdir(parents=True)
    shutil.copy(sample[1] / "000000000030.jpg", data / "images" / "000000000030.jpg")
    (data / "annotation.json").write_text(json.dumps([{"url": image, "visual_premises": ["A vase."], "b_box": [box],
                                                       "conclusion": "A room."}]))
    done = mmfaith("build", "crm", "--out", str(tmp_path / "build"), "--visargs", str(data), "--no-progress")
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "annotation.json: item 0" in done.stderr


@pytest.mark.parametrize("name", ["my vase", "Grandma's Teapot Collection"])
def test_a_users_own_category_name_is_scored_as_itself(name: str) -> None:
    """A category a user's COCO file names its own way: the oracle's claim (JSON and text) matches its gold,
    where mapping the claim to COCO words ("vase") made a perfect answer unrelated (CF1 0, DRF 0)."""
    from mmfaith.evaluators.spd_faith.claims import Claim, JudgeCase, RuleJudge

    gold = [Claim("remove", name, None), Claim("color", "cup", "blue")]
    listing = json.dumps([{"object": name, "type": "remove", "detail": "only in the first picture"},
                          {"object": "cup", "type": "color", "detail": "red to blue"}])
    for describe in (f"```json\n{listing}\n```", f"The {name} was removed, and the cup turned blue."):
        judged = RuleJudge().judge(JudgeCase({"describe": describe, "same": None, "different": None}, gold, []))
        assert judged.claims["describe"] == gold, describe
        assert judged.drf == [["faithful", "unrelated"], ["unrelated", "faithful"]]


# -- kill -9 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_a_run_killed_with_sigkill_resumes_asking_nothing_twice(builds: dict[str, Path], tmp_path: Path,
                                                                family: str) -> None:
    """kill -9 mid-run leaves a stale lock and a possibly torn line; the same command takes the lock over and
    finishes, every (id, probe) answered exactly once."""
    out = tmp_path / "run"
    argv = run_args(family, builds[family], "", out, "--concurrency", "1", limit=2)
    with FaultServer("slow") as server:
        argv[argv.index("--base-url") + 1] = server.base_url
        process = subprocess.Popen([sys.executable, "-m", "mmfaith", *argv], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (not (out / "predictions.jsonl").exists()
                                               or len((out / "predictions.jsonl").read_bytes().splitlines()) < 2):
            time.sleep(0.05)
        process.kill()
        process.wait()
        assert (out / ".mmfaith.lock").read_text().strip() == str(process.pid)  # left behind by the kill
        done = mmfaith(*argv)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    answered = [(line["id"], line["probe"]) for line in lines_of(out / "predictions.jsonl")
                if line["response"] is not None]
    assert len(answered) == len(set(answered)) and not (out / ".mmfaith.lock").exists()
    run = json.loads((out / "run.json").read_text())
    assert run["counts"]["answered"] == run["counts"]["expected"] == len(answered)


def test_an_mcot_build_killed_with_sigkill_rebuilds_to_the_same_bytes(builds: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "build"
    process = subprocess.Popen([sys.executable, "-m", "mmfaith", "build", "mcot", "--out", str(out), "--no-progress"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not ((out / "images").is_dir() and any((out / "images").iterdir())):
        time.sleep(0.02)  # killed once it has written an image, before records.jsonl
    process.kill()
    process.wait()
    done = mmfaith("build", "mcot", "--out", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    rebuilt, whole = tree_digest(out), tree_digest(builds["mcot"])
    # build.json is the one file that holds wall-clock times (builders/build_dir.py): its recipe must agree
    assert rebuilt.pop("build.json") and whole.pop("build.json") and rebuilt == whole
    recipes = [json.loads((folder / "build.json").read_text())["recipe"] for folder in (out, builds["mcot"])]
    assert recipes[0] == recipes[1] and not (out / ".mmfaith.lock").exists()


def test_a_torn_last_lmms_eval_line_is_named(builds: dict[str, Path], tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "model"
    logs.mkdir(parents=True)
    samples = logs / "2026_samples_mmfaith_spd_faith.jsonl"
    samples.write_text('{"doc_id": 0, "target": "{\\"id\\": ')  # killed mid-write
    done = mmfaith("import", "lmms-eval", str(tmp_path / "logs"), "--dataset", str(builds["spd-faith"]), "--out",
                   str(tmp_path / "p.jsonl"))
    assert f"{samples}: the last line is torn" in done.stderr and "Traceback" not in done.stderr, done.stderr
