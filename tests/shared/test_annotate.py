"""`mmfaith annotate` against a real Label Studio server (SQLite, 127.0.0.1), started once per session.

The server comes from tools/install-label-studio.sh (<repo>/.venv-label-studio or
$MMFAITH_LABEL_STUDIO_BIN); the server tests skip, saying so, only where it is not installed.
Annotators are real users: each signs up through the web form, gets their own API token and
creates annotations with it, as people in the browser would.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from label_studio_sdk import LabelStudio
from PIL import Image

from mmfaith.annotation import label_studio as lsmod
from mmfaith.annotation.agreement import cohen_kappa, fleiss_kappa
from mmfaith.annotation.merge import decide, merge_record
from mmfaith.annotation.server import find_label_studio
from mmfaith.annotation.regions import rectangle
from mmfaith.annotation.spd_faith.tasks import family, label_config, outlines, read_vote
from mmfaith.annotation.votes import Misfit, Vote
from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.cli import main
from mmfaith.errors import MmfaithError
from mmfaith.schema import schema_errors

from tests.conftest import ADMIN, free_port

SPD = family()
KEY = "LABEL_STUDIO_API_KEY"


@pytest.fixture
def env_token(label_studio: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio["token"])
    return label_studio["token"]


def _copy_build(mixed_build: Path, label_studio: dict[str, Any], name: str) -> Path:
    """A copy of the session's mixed build below the server's document root."""
    target = label_studio["files_root"] / name
    shutil.copytree(mixed_build, target)
    return target


def _records(build: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (build / "records.jsonl").read_text().splitlines() if line.strip()]


def _annotate(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run `mmfaith annotate ...` through the real command; returns stdout."""
    code = main(["annotate", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _tasks_by_record(client: LabelStudio, title: str) -> dict[str, int]:
    project = lsmod.find_project(client, title)
    return {t["data"]["record_id"]: t["id"] for t in lsmod.list_tasks(client, project.id)}


def _accept(**descriptions: str) -> list[dict[str, Any]]:
    result = [{"from_name": "verdict", "to_name": "image_b", "type": "choices", "value": {"choices": ["accept"]}}]
    for name, text in descriptions.items():
        to = "image_b" if name == "caption" else name.replace("description", "difference")
        result.append({"from_name": name, "to_name": to, "type": "textarea", "value": {"text": [text]}})
    return result


def _reject(*reasons: str) -> list[dict[str, Any]]:
    result = [{"from_name": "verdict", "to_name": "image_b", "type": "choices", "value": {"choices": ["reject"]}}]
    if reasons:
        result.append({"from_name": "reasons", "to_name": "image_b", "type": "choices", "value": {"choices": list(reasons)}})
    return result


# ---------------------------------------------------------------- the round trip, on one project

TITLE = "SPD-Faith round trip"


@pytest.fixture(scope="module")
def round_trip_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixed build's request (tests/conftest.py: 2 per tier, 4 multi, seed 0) with 3 controls instead of 2: the
    embedded sample gives it 5 pairs with differences since vases are not recoloured (no easy pair, one multi pair),
    and the round trip needs eight records."""
    out = tmp_path_factory.mktemp("round-trip-build") / "build"
    out.mkdir()
    build_spd_faith(BuildRequest(out=out, per_tier=2, multi=4, controls=3, seed=0, progress=False))
    return out


@pytest.fixture(scope="module")
def round_trip(label_studio: dict[str, Any], annotators: dict[str, LabelStudio], round_trip_build: Path,
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Push the build, annotate as three people, keep a copy of the records before the pull.

    single[0]: admin accepts and corrects the description and writes a caption; the result carries the
               pre-filled read-only outlines back, as Label Studio's prelabelled annotation does.
    single[1]: ann1 rejects (artifact, unnatural).
    single[2]: ann1 accepts, ann2 rejects (invisible change): the disagreement.
    single[3]: ann1 and admin accept.
    multi[0]:  ann2's annotation does not fit the config (reject without a reason).
    multi[2]:  ann1's annotation holds a control the config lacks (a box on the gold).
    multi[3]:  the admin skips it.
    multi[1]:  its task is deleted (a record with no task); plus one task naming an unknown record.
    """
    build = _copy_build(round_trip_build, label_studio, "round-trip")
    os.environ["LABEL_STUDIO_API_KEY"] = label_studio["token"]
    try:
        report = lsmod.push(lsmod.connect(label_studio["url"], KEY), build, TITLE, SPD, label_studio["files_root"])
    finally:
        del os.environ["LABEL_STUDIO_API_KEY"]
    records = _records(build)
    # Eight records play the roles above. The naturalness gates and refusals leave the build one multi pair, so
    # the "multi" roles go to the records after the first four pairs with differences: the rest of those pairs,
    # then the controls.
    edited = [r for r in records if r["differences"]]
    controls = [r for r in records if not r["differences"]]
    singles, others = edited[:4], edited[4:] + controls
    assert len(singles) == 4 and len(others) >= 4, "the round trip needs four pairs with differences and four more"
    multis = others[:4]
    admin, ann1, ann2 = annotators[ADMIN], annotators["ann1@example.com"], annotators["ann2@example.com"]
    tasks = _tasks_by_record(admin, TITLE)
    admin.annotations.create(id=tasks[singles[0]["id"]], result=_accept(
        description_0="The object is gone.", caption="A street scene with a bus.") + outlines(build, singles[0]))
    ann1.annotations.create(id=tasks[singles[1]["id"]], result=_reject("artifact", "unnatural"))
    ann1.annotations.create(id=tasks[singles[2]["id"]], result=_accept())
    ann2.annotations.create(id=tasks[singles[2]["id"]], result=_reject("invisible change"))
    ann1.annotations.create(id=tasks[singles[3]["id"]], result=_accept())
    admin.annotations.create(id=tasks[singles[3]["id"]], result=_accept())
    ann2.annotations.create(id=tasks[multis[0]["id"]], result=_reject())
    ann1.annotations.create(id=tasks[multis[2]["id"]], result=_accept() + [  # someone "fixing" a gold box
        {"from_name": "bbox", "to_name": "image_b", "type": "rectanglelabels",
         "value": {"x": 1, "y": 1, "width": 5, "height": 5, "rectanglelabels": ["person"]}}])
    admin.annotations.create(id=tasks[multis[3]["id"]], result=[], was_cancelled=True)
    admin.tasks.delete(id=str(tasks[multis[1]["id"]]))
    project = lsmod.find_project(admin, TITLE)
    stray = {**admin.tasks.get(id=str(tasks[singles[0]["id"]])).data, "record_id": "spdf-not-in-this-build"}
    admin.projects.import_tasks(id=project.id, request=[{"data": stray}])
    before = tmp_path_factory.mktemp("before-pull")
    shutil.copy2(build / "records.jsonl", before / "records.jsonl")
    return {"build": build, "push": report, "singles": singles, "multis": multis, "records": records,
            "before": before / "records.jsonl", "tasks": tasks}


def test_push_creates_the_project_with_the_config_and_one_task_per_record(
        round_trip: dict[str, Any], annotators: dict[str, LabelStudio], label_studio: dict[str, Any]) -> None:
    admin = annotators[ADMIN]
    report = round_trip["push"]
    assert report.created and len(report.added) == len(round_trip["records"])
    project = lsmod.find_project(admin, TITLE)
    assert project.label_config.strip() == label_config().strip()
    tasks = {t["data"]["record_id"]: t["data"] for t in lsmod.list_tasks(admin, project.id)}
    record = round_trip["singles"][0]
    data = tasks[record["id"]]
    assert data["image_a"] == f"/data/local-files/?d=round-trip/{record['image_a']}"
    assert data["differences"][0]["description"] == record["differences"][0]["description"]
    assert data["images_sha256"] == {"image_a": record["image_a_sha256"], "image_b": record["image_b_sha256"]}
    # the server serves the image through local-files storage, to a logged-in client only
    auth = {"Authorization": f"Token {label_studio['token']}"}
    for key in ("image_a", "image_b"):
        reply = httpx.get(label_studio["url"] + data[key], headers=auth)
        assert reply.status_code == 200 and reply.headers["content-type"] == "image/png"
    assert httpx.get(label_studio["url"] + data["image_b"], headers=auth).content == \
        (round_trip["build"] / record["image_b"]).read_bytes()
    assert httpx.get(label_studio["url"] + data["image_b"]).status_code == 401
    assert all(v.startswith("/data/local-files/") for d in tasks.values() for k, v in d.items() if k.startswith("image_"))
    # the edited regions reach the server as read-only rectangles (one per difference and image) that Label
    # Studio draws on the outlined views: no helper image is written
    task = admin.tasks.get(id=str(next(t["id"] for t in lsmod.list_tasks(admin, project.id)
                                       if t["data"]["record_id"] == record["id"])))
    assert [p.result for p in task.predictions] == [outlines(round_trip["build"], record)]
    assert len(task.predictions[0].result) == 2 * len(record["differences"])
    assert all(region["readonly"] for region in task.predictions[0].result)
    assert not (round_trip["build"] / "annotation").exists()


def test_pull_merges_verdicts_corrections_and_reports_every_bad_case(
        round_trip: dict[str, Any], label_studio: dict[str, Any], env_token: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    build, singles, multis = round_trip["build"], round_trip["singles"], round_trip["multis"]
    out = _annotate(["pull", str(build), "--url", label_studio["url"], "--project", TITLE], capsys)
    records = {r["id"]: r for r in _records(build)}
    for record in records.values():
        assert schema_errors("spd_faith_pair", record) == []
    first = records[singles[0]["id"]]
    v = first["verification"]
    assert v["status"] == "accepted" and v["annotators"] == [ADMIN] and v["reasons"] == []
    assert isinstance(v["task_id"], int) and v["time"].endswith("+00:00")
    assert first["differences"][0]["description"] == "The object is gone."
    assert first["caption"] == "A street scene with a bus."
    assert {(h["field"], h["previous"], h["value"]) for h in v["history"]} == {
        ("verification.status", "pending", "accepted"),
        ("differences.0.description", singles[0]["differences"][0]["description"], "The object is gone."),
        ("caption", None, "A street scene with a bus.")}
    # the structured gold did not move
    for key in ("type", "category", "category_id", "color_before", "color_after", "bbox_before", "bbox_after"):
        assert first["differences"][0][key] == singles[0]["differences"][0][key]
    second = records[singles[1]["id"]]["verification"]
    assert second["status"] == "rejected" and second["reasons"] == ["artifact", "unnatural"]
    third = records[singles[2]["id"]]["verification"]
    assert third["status"] == "rejected"  # any-reject, the default policy
    assert third["annotators"] == ["ann1@example.com", "ann2@example.com"]
    assert third["reasons"] == ["invisible change"]
    assert records[singles[3]["id"]]["verification"]["status"] == "accepted"
    assert records[multis[0]["id"]]["verification"]["status"] == "pending"
    assert records[multis[1]["id"]]["verification"] == multis[1]["verification"]  # no task: untouched
    untouched = [r for r in records.values() if r["id"] not in {s["id"] for s in singles[:4]}]
    assert all(r["verification"]["status"] == "pending" for r in untouched)
    assert f"disagreement: {singles[2]['id']}" in out
    assert f"({multis[0]['id']}) does not fit the config: reject without a reason" in out
    assert f"({multis[2]['id']}) does not fit the config: unknown control 'bbox'" in out
    assert records[multis[2]["id"]]["verification"]["status"] == "pending"
    assert f"({multis[3]['id']}) was skipped by its annotator" in out
    assert "names record 'spdf-not-in-this-build'" in out
    assert f"no task: {multis[1]['id']}" in out
    assert f"2 accepted, 2 rejected, {len(records) - 4} pending" in out
    assert env_token not in out
    assert not [p for p in build.rglob("*") if p.is_file() and env_token.encode() in p.read_bytes()]


def test_second_pull_and_push_change_nothing(round_trip: dict[str, Any], label_studio: dict[str, Any],
                                             env_token: str, capsys: pytest.CaptureFixture[str]) -> None:
    build = round_trip["build"]
    args = [str(build), "--url", label_studio["url"], "--project", TITLE]
    _annotate(["pull", *args], capsys)
    first = (build / "records.jsonl").read_bytes()
    out = _annotate(["pull", *args], capsys)
    assert "0 records changed" in out
    assert (build / "records.jsonl").read_bytes() == first
    out = _annotate(["push", *args, "--files-root", str(label_studio["files_root"])], capsys)
    # the deleted task's record comes back as new; the rest is unchanged, nothing duplicated
    assert f"1 tasks added, {len(round_trip['records']) - 1} unchanged, 0 flagged" in out
    admin = LabelStudio(base_url=label_studio["url"], api_key=env_token)
    ids = [t["data"]["record_id"] for t in lsmod.list_tasks(admin, lsmod.find_project(admin, TITLE).id)]
    assert len(ids) == len(set(ids)) == len(round_trip["records"]) + 1  # the records and the unknown one
    assert "task " in out and "its record id is not in this build" in out


def test_majority_policy_keeps_a_tie_pending(round_trip: dict[str, Any], label_studio: dict[str, Any],
                                            env_token: str, tmp_path: Path) -> None:
    build = label_studio["files_root"] / "majority"
    shutil.copytree(round_trip["build"], build)
    shutil.copy2(round_trip["before"], build / "records.jsonl")
    report = lsmod.pull(lsmod.connect(label_studio["url"], KEY), build, TITLE, SPD, "majority")
    records = {r["id"]: r for r in _records(build)}
    assert records[round_trip["singles"][2]["id"]]["verification"]["status"] == "pending"
    assert records[round_trip["singles"][1]["id"]]["verification"]["status"] == "rejected"
    assert [d[0] for d in report.disagreements] == [round_trip["singles"][2]["id"]]


def test_a_crash_mid_pull_loses_nothing(round_trip: dict[str, Any], label_studio: dict[str, Any], env_token: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    build = label_studio["files_root"] / "crash"
    shutil.copytree(round_trip["build"], build)
    shutil.copy2(round_trip["before"], build / "records.jsonl")
    before = (build / "records.jsonl").read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        lsmod.pull(lsmod.connect(label_studio["url"], KEY), build, TITLE, SPD, "any-reject")
    assert (build / "records.jsonl").read_bytes() == before


def test_status_counts_and_kappa(round_trip: dict[str, Any], label_studio: dict[str, Any], env_token: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    build = label_studio["files_root"] / "status"
    shutil.copytree(round_trip["build"], build)
    shutil.copy2(round_trip["before"], build / "records.jsonl")
    lsmod.pull(lsmod.connect(label_studio["url"], KEY), build, TITLE, SPD, "any-reject")
    out = _annotate(["status", str(build)], capsys)
    assert f"2 accepted, 2 rejected, {len(round_trip['records']) - 4} pending" in out
    # overlaps: singles[2] (accept vs reject) and singles[3] (accept, accept)
    assert "2 records with two or more annotators" in out
    expected = fleiss_kappa([["accept", "reject"], ["accept", "accept"]])
    assert f"Fleiss' kappa {expected:.3f}" in out
    assert "Cohen's kappa ann1@example.com vs ann2@example.com: 0.000 over 1 shared records" in out
    assert f"Cohen's kappa {ADMIN} vs ann1@example.com: undefined over 1 shared records" in out
    assert f"disagreement: {round_trip['singles'][2]['id']}" in out


# ---------------------------------------------------------------- re-push of a changed build


def test_repush_adds_new_records_and_flags_changed_images(
        mixed_build: Path, label_studio: dict[str, Any], annotators: dict[str, LabelStudio], env_token: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    title = "SPD-Faith changed build"
    build = _copy_build(mixed_build, label_studio, "changing")
    lines = (build / "records.jsonl").read_text().splitlines(keepends=True)
    (build / "records.jsonl").write_text("".join(lines[:-1]))
    args = [str(build), "--url", label_studio["url"], "--project", title, "--files-root", str(label_studio["files_root"])]
    assert f"{len(lines) - 1} tasks added" in _annotate(["push", *args, "--annotators-per-task", "2"], capsys)
    assert lsmod.find_project(annotators[ADMIN], title).maximum_annotations == 2
    records = _records(build)
    changed = next(r for r in records if r["subset"] == "single")
    tasks = _tasks_by_record(annotators[ADMIN], title)
    old = annotators["ann1@example.com"].annotations.create(id=tasks[changed["id"]], result=_accept())
    # the build gains its last record and one record's edited image is made again
    image = build / changed["image_b"]
    data = bytearray(image.read_bytes())
    with Image.open(image) as im:
        im.rotate(180).save(image)
    changed["image_b_sha256"] = hashlib.sha256(image.read_bytes()).hexdigest()
    rewritten = [json.dumps(changed if r["id"] == changed["id"] else r) + "\n" for r in records]
    (build / "records.jsonl").write_text("".join(rewritten) + lines[-1])
    assert bytes(data) != image.read_bytes()
    out = _annotate(["push", *args], capsys)
    assert f"1 tasks added, {len(lines) - 2} unchanged, 1 flagged" in out and f"flagged: {changed['id']}" in out
    tasks_now = _tasks_by_record(annotators[ADMIN], title)
    assert tasks_now[changed["id"]] == tasks[changed["id"]] and len(tasks_now) == len(lines)
    task = annotators[ADMIN].tasks.get(id=str(tasks[changed["id"]]))
    assert task.data["stale_annotation_ids"] == [old.id] and "changed" in task.data["flag"]
    out = _annotate(["pull", *args[:5]], capsys)
    assert f"annotation {old.id} on task {tasks[changed['id']]} ({changed['id']}) predates a change" in out
    assert {r["id"]: r for r in _records(build)}[changed["id"]]["verification"]["status"] == "pending"
    # a fresh annotation on the new images counts
    annotators["ann2@example.com"].annotations.create(id=tasks[changed["id"]], result=_accept())
    _annotate(["pull", *args[:5]], capsys)
    verification = {r["id"]: r for r in _records(build)}[changed["id"]]["verification"]
    assert verification["status"] == "accepted" and verification["annotators"] == ["ann2@example.com"]


def test_pull_refuses_records_whose_images_changed_since_the_push(
        mixed_build: Path, label_studio: dict[str, Any], env_token: str, capsys: pytest.CaptureFixture[str]) -> None:
    title = "SPD-Faith unpushed change"
    build = _copy_build(mixed_build, label_studio, "unpushed")
    args = [str(build), "--url", label_studio["url"], "--project", title]
    _annotate(["push", *args, "--files-root", str(label_studio["files_root"])], capsys)
    records = _records(build)
    records[0]["image_b_sha256"] = "0" * 64
    (build / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = _annotate(["pull", *args], capsys)
    assert f"not merged: {records[0]['id']}: its images changed since its task was pushed; push again" in out


# ---------------------------------------------------------------- `annotate serve`, for real

def test_serve_starts_a_local_server_and_stops_it_on_ctrl_c(tmp_path: Path) -> None:
    try:
        find_label_studio()
    except MmfaithError as exc:
        pytest.skip(f"Label Studio server not installed: {exc}")
    token, port = secrets.token_hex(20), free_port()
    env = {**os.environ, "LABEL_STUDIO_API_KEY": token, "LABEL_STUDIO_PASSWORD": "serve-pass-1234"}
    (tmp_path / "files").mkdir()
    command = [sys.executable, "-m", "mmfaith", "annotate", "serve", "--data-dir", str(tmp_path / "data"),
               "--files-root", str(tmp_path / "files"), "--port", str(port), "--username", ADMIN]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    assert process.stdout is not None
    try:
        line = process.stdout.readline()
        assert f"Label Studio ready at http://127.0.0.1:{port}" in line, line
        assert token not in line
        assert LabelStudio(base_url=f"http://127.0.0.1:{port}", api_key=token).users.whoami().email == ADMIN
    finally:
        process.send_signal(signal.SIGINT)
        rest = process.communicate(timeout=60)[0]
    assert token not in rest
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
    data_dir = str(tmp_path / "data")
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).find(data_dir) >= 0]
    assert left == [], "label-studio processes outlived serve"


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------- errors users meet


def test_missing_token_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_LS_TOKEN", raising=False)
    with pytest.raises(MmfaithError, match="MY_LS_TOKEN is empty"):
        lsmod.connect("http://127.0.0.1:9", "MY_LS_TOKEN")


def test_build_dir_must_lie_below_the_files_root(tmp_path: Path) -> None:
    with pytest.raises(MmfaithError, match="must lie below"):
        lsmod.files_url(tmp_path, tmp_path)
    assert lsmod.files_url(tmp_path / "b x", tmp_path)("images/a.png") == "/data/local-files/?d=b%20x/images/a.png"


def test_unreachable_server_is_a_one_line_error(tmp_path: Path, mixed_build: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "x" * 40)
    with pytest.raises(MmfaithError, match="could not reach Label Studio"):
        lsmod.pull(lsmod.connect(f"http://127.0.0.1:{free_port()}", KEY), mixed_build, "t", SPD, "any-reject")


def test_wrong_token_is_a_one_line_error(label_studio: dict[str, Any], mixed_build: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "f" * 40)
    with pytest.raises(MmfaithError, match="refused to list projects .HTTP 401"):
        lsmod.pull(lsmod.connect(label_studio["url"], KEY), mixed_build, "t", SPD, "any-reject")


def test_serve_refuses_a_token_it_cannot_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "not-hex")
    code = main(["annotate", "serve", "--data-dir", str(tmp_path), "--files-root", str(tmp_path), "--username", ADMIN])
    captured = capsys.readouterr()
    assert code == 2 and "40 lowercase hex" in captured.err
    assert "not-hex" not in captured.out + captured.err


# ---------------------------------------------------------------- pure parts


RECORD = {"differences": [{"description": "d0"}, {"description": "d1"}], "caption": None}


@pytest.mark.parametrize("result, why", [
    ([], "no verdict"),
    (_reject(), "reject without a reason"),
    (_accept() + _reject("artifact")[1:], "accept with reject reasons"),
    (_reject("broken"), "reasons: expected choices among"),
    ([{"from_name": "verdict", "type": "choices", "value": {"choices": ["accept", "reject"]}}], "verdict: expected one"),
    (_accept(description_2="x"), "the record has 2 difference"),
    (_accept(description_0="  "), "empty description"),
    (_accept() + [{"from_name": "bbox", "type": "rectanglelabels", "value": {}}], "unknown control 'bbox'"),
    (_accept() + [{"from_name": "caption", "type": "choices", "value": {}}], "caption: expected type textarea"),
    (_accept() + _accept()[:1], "verdict: given twice"),
    (_accept() + [{"from_name": "outline_a", "type": "choices", "value": {}}], "unknown control 'outline_a'"),
])
def test_annotations_that_do_not_fit_the_config_are_misfits(result: list, why: str) -> None:
    with pytest.raises(Misfit, match=why):
        read_vote(result, RECORD, 1, "a", None)


def test_a_fitting_annotation_becomes_a_vote() -> None:
    vote = read_vote(_accept(description_1="new", caption="cap") +
                     [{"from_name": "outline", "type": "choices", "value": {"choices": ["Outline the edited regions"]}},
                      {"from_name": "notes", "type": "textarea", "value": {"text": [" looks fine "]}}] +
                     [rectangle(f"{side}{n}", f"outline_{side}", f"outlined_{side}", [1, 2, 3, 4], (10, 10), str(n),
                                readonly=True) for side in "ab" for n in (1, 2)],  # the outlines carry no vote
                     RECORD, 7, "a@x", "t")
    assert vote == Vote(7, "a@x", "accept", (), "looks fine", {"differences.1.description": "new", "caption": "cap"}, "t")


def _votes(*verdicts: str) -> list[Vote]:
    return [Vote(i, f"a{i}", v, ("other",) if v == "reject" else ()) for i, v in enumerate(verdicts)]


def test_policies() -> None:
    assert decide([], "any-reject") == decide([], "majority") == "pending"
    assert decide(_votes("accept", "accept", "reject"), "any-reject") == "rejected"
    assert decide(_votes("accept", "accept", "reject"), "majority") == "accepted"
    assert decide(_votes("accept", "reject"), "majority") == "pending"
    assert decide(_votes("reject", "reject", "accept"), "majority") == "rejected"


def test_conflicting_edits_leave_the_field_alone_and_are_reported() -> None:
    record = {"id": "r", "caption": None, "differences": [{"description": "old"}],
              "verification": {"status": "pending", "history": []}}
    votes = [Vote(1, "a", "accept", edits={"differences.0.description": "one", "caption": "c"}),
             Vote(2, "b", "accept", edits={"differences.0.description": "two", "caption": "c"})]
    outcome = merge_record(record, 5, votes, "any-reject", "now")
    assert outcome.record["differences"][0]["description"] == "old" and outcome.record["caption"] == "c"
    assert outcome.conflicts == {"differences.0.description": {"a": "one", "b": "two"}}
    assert record["caption"] is None  # the input is not modified
    assert merge_record(outcome.record, 5, votes, "any-reject", "later").record is outcome.record


def test_kappas_match_textbook_values() -> None:
    # Cohen: 50 items, 20 yes/yes, 15 no/no, 5 yes/no, 10 no/yes -> kappa 0.4 (Wikipedia's worked example)
    pairs = [("y", "y")] * 20 + [("n", "n")] * 15 + [("y", "n")] * 5 + [("n", "y")] * 10
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([("a", "a")]) is None and cohen_kappa([]) is None
    # Fleiss: perfect agreement on varied labels is 1; systematic split is negative
    assert fleiss_kappa([["a", "a", "a"], ["b", "b", "b"]]) == pytest.approx(1.0)
    assert fleiss_kappa([["a", "b"], ["a", "b"]]) == pytest.approx(-1.0)
    assert fleiss_kappa([["a"]]) is None


def test_the_label_config_is_package_data_and_names_every_control() -> None:
    text = label_config()
    for name in ('name="verdict"', 'name="reasons"', 'name="caption"', 'name="description_{{idx}}"',
                 'name="outline"', 'name="outline_a"', 'name="outline_b"', 'value="artifact"', 'value="invisible change"', 'value="unnatural"', 'value="other"'):
        assert name in text


# ---------------------------------------------------------------- MCoT items on the same machinery

def test_mcot_round_trip_checks_question_answer_and_target_boxes(label_studio: dict[str, Any],
                                                                annotators: dict[str, LabelStudio],
                                                                env_token: str, tmp_path: Path) -> None:
    from mmfaith.annotation.mcot.tasks import family as mcot_family
    from mmfaith.annotation.mcot.tasks import label_config as mcot_config
    from tests.mcot_fixtures import write_vstar_folder

    build = label_studio["files_root"] / "mcot-round-trip"
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(tmp_path / "v", 3)),
                 "--out", str(build)]) == 0
    report = lsmod.push(lsmod.connect(label_studio["url"], KEY), build, "MCoT round trip", mcot_family(),
                        label_studio["files_root"])
    assert report.created and len(report.added) == 3
    admin, ann1 = annotators[ADMIN], annotators["ann1@example.com"]
    project = lsmod.find_project(admin, "MCoT round trip")
    assert project.label_config.strip() == mcot_config().strip()
    tasks = {t["data"]["record_id"]: t for t in lsmod.list_tasks(admin, project.id)}
    records = _records(build)
    data = tasks[records[0]["id"]]["data"]
    assert "<- gold" in data["gold"] and "target 1: square" in data["gold"]
    outlined = httpx.get(label_studio["url"] + data["outlined"], headers={"Authorization": f"Token {env_token}"})
    assert outlined.status_code == 200 and outlined.headers["content-type"] == "image/png"
    verdict = {"from_name": "verdict", "to_name": "image", "type": "choices"}
    admin.annotations.create(id=tasks[records[0]["id"]]["id"], result=[
        {**verdict, "value": {"choices": ["accept"]}},
        {"from_name": "question", "to_name": "image", "type": "textarea",
         "value": {"text": ["Which colour is the small square?"]}}])
    ann1.annotations.create(id=tasks[records[1]["id"]]["id"], result=[
        {**verdict, "value": {"choices": ["reject"]}},
        {"from_name": "reasons", "to_name": "image", "type": "choices", "value": {"choices": ["target box wrong"]}}])
    lsmod.pull(lsmod.connect(label_studio["url"], KEY), build, "MCoT round trip", mcot_family(), "any-reject")
    after = {r["id"]: r for r in _records(build)}
    first, second, third = (after[r["id"]] for r in records)
    assert first["verification"]["status"] == "accepted" and first["question"] == "Which colour is the small square?"
    assert second["verification"]["status"] == "rejected" and second["verification"]["reasons"] == ["target box wrong"]
    assert third["verification"]["status"] == "pending"
    assert {k: v for k, v in third.items() if k != "verification"} == {k: v for k, v in records[2].items()
                                                                       if k != "verification"}
    assert all(schema_errors("mcot_item", r) == [] for r in after.values())


@pytest.mark.parametrize("result,why", [
    ([], "no verdict"),
    ([{"from_name": "verdict", "type": "choices", "value": {"choices": ["reject"]}}], "reject without a reason"),
    ([{"from_name": "verdict", "type": "choices", "value": {"choices": ["accept"]}},
      {"from_name": "answer", "type": "textarea", "value": {"text": ["B"]}}], "unknown control 'answer'"),
    ([{"from_name": "verdict", "type": "choices", "value": {"choices": ["accept"]}},
      {"from_name": "question", "type": "textarea", "value": {"text": [" "]}}], "question: empty"),
])
def test_mcot_annotations_that_do_not_fit_are_misfits(result: list, why: str) -> None:
    from mmfaith.annotation.mcot.tasks import read_vote as mcot_vote

    with pytest.raises(Misfit, match=why):
        mcot_vote(result, {"question": "Q?"}, 1, "a", None)
