"""VFaith's Label Studio round trip on a real server (tests/shared/test_annotate.py's session server and real users):
an annotator's answer equal to the original rejects the pair ("answer unchanged"); another option than the
planned one replaces `answer_edited`, with the change in the verification history; the perception item's
answer set is confirmed or corrected with its pair and perception.jsonl follows; the rest is the shared
machinery's (idempotent push, atomic pull)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from label_studio_sdk import LabelStudio

from mmfaith.annotation import label_studio as lsmod
from mmfaith.annotation.vfaith.tasks import family, option_text, read_vote
from mmfaith.annotation.votes import Misfit
from mmfaith.cli import main
from mmfaith.schema import schema_errors
from tests.conftest import ADMIN, read_records

TITLE = "VFaith round trip"


def _result(answer: str, natural: str = "yes", reasons: tuple[str, ...] = (), category: str | None = None,
            perception: list[str] | None = None) -> list:
    result = [{"from_name": "answer", "to_name": "image_edited", "type": "choices", "value": {"choices": [answer]}},
              {"from_name": "natural", "to_name": "image_edited", "type": "choices", "value": {"choices": [natural]}}]
    if reasons:
        result.append({"from_name": "reasons", "to_name": "image_edited", "type": "choices",
                       "value": {"choices": list(reasons)}})
    if category:
        result.append({"from_name": "category", "to_name": "image_edited", "type": "choices",
                       "value": {"choices": [category]}})
    if perception is not None:
        result.append({"from_name": "perception", "to_name": "image_edited", "type": "choices",
                       "value": {"choices": perception}})
    return result


def _statements(record: dict, labels: list[str]) -> list[str]:
    return [option_text(o) for o in record["build"]["perception"]["options"] if o["label"] in labels]


def _text(record: dict, label: str) -> str:
    return next(option_text(o) for o in record["options"] if o["label"] == label)


def _other(record: dict) -> str:
    """An option that is neither the original nor the planned edited answer."""
    return next(o["label"] for o in record["options"] if o["label"] not in (record["answer_original"],
                                                                           record["answer_edited"]))


def test_answer_unchanged_rejects_and_another_option_corrects_with_history(
        label_studio: dict[str, Any], annotators: dict[str, LabelStudio], vfaith_build: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    build = label_studio["files_root"] / "vfaith-round-trip"
    shutil.copytree(vfaith_build, build)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio["token"])
    common = ["--url", label_studio["url"], "--project", TITLE]
    assert main(["annotate", "push", str(build), *common, "--files-root", str(label_studio["files_root"])]) == 0
    records = read_records(build)
    multi = [r for r in records if len(r["options"]) > 2]
    unchanged, corrected = multi[0], multi[1]
    confirmed = next(r for r in reversed(records) if r["id"] not in (unchanged["id"], corrected["id"]))
    admin, ann1 = annotators[ADMIN], annotators["ann1@example.com"]
    project = lsmod.find_project(admin, TITLE)
    tasks = {t["data"]["record_id"]: t for t in lsmod.list_tasks(admin, project.id)}
    assert len(tasks) == len(records)
    shown = tasks[corrected["id"]]["data"]
    assert shown["options"] == [{"value": option_text(o)} for o in corrected["options"]]
    assert shown["question"] == corrected["question"] and shown["family"] == "vfaith"
    ann1.annotations.create(id=tasks[unchanged["id"]]["id"],
                            result=_result(_text(unchanged, unchanged["answer_original"])))
    planned_statements = corrected["build"]["perception"]["answers"]
    # the annotator finds one more statement true than planned: the perception item's answers are corrected
    more = sorted({*planned_statements, next(o["label"] for o in corrected["build"]["perception"]["options"]
                                             if o["label"] not in planned_statements)})
    assert shown["perception_options"] == [{"value": option_text(o)}
                                           for o in corrected["build"]["perception"]["options"]]
    ann1.annotations.create(id=tasks[corrected["id"]]["id"],
                            result=_result(_text(corrected, _other(corrected)), perception=_statements(corrected, more)))
    admin.annotations.create(id=tasks[confirmed["id"]]["id"],
                             result=_result(_text(confirmed, confirmed["answer_edited"]), category="PFK",
                                            perception=_statements(confirmed,
                                                                   confirmed["build"]["perception"]["answers"])))
    capsys.readouterr()
    assert main(["annotate", "pull", str(build), *common]) == 0
    after = {r["id"]: r for r in read_records(build)}
    for record in after.values():
        assert schema_errors("vfaith_pair", record) == []
    rejected = after[unchanged["id"]]
    assert rejected["verification"]["status"] == "rejected"
    assert rejected["verification"]["reasons"] == ["answer unchanged"]
    fixed = after[corrected["id"]]
    assert fixed["verification"]["status"] == "accepted" and fixed["answer_edited"] == _other(corrected)
    assert ("answer_edited", corrected["answer_edited"], _other(corrected)) in [
        (h["field"], h["previous"], h["value"]) for h in fixed["verification"]["history"]]
    kept = after[confirmed["id"]]
    assert kept["answer_edited"] == confirmed["answer_edited"] and kept["category"] == "PFK"
    assert kept["verification"]["annotators"] == [ADMIN]
    # the perception items follow their pairs: status, and the corrected answer set with its history
    perception = {item["pair_id"]: item for item in read_records(build, "perception.jsonl")}
    assert fixed["build"]["perception"]["answers"] == more
    assert ("build.perception.answers", planned_statements, more) in [
        (h["field"], h["previous"], h["value"]) for h in fixed["verification"]["history"]]
    assert perception[corrected["id"]]["answers"] == more
    assert perception[corrected["id"]]["verification"]["status"] == "accepted"
    assert [(h["field"], h["previous"], h["value"]) for h in perception[corrected["id"]]["verification"]["history"]] \
        == [("answers", planned_statements, more)]
    assert perception[confirmed["id"]]["answers"] == confirmed["build"]["perception"]["answers"]
    assert perception[confirmed["id"]]["verification"]["status"] == "accepted"
    assert perception[unchanged["id"]]["verification"]["status"] == "rejected"
    for item in perception.values():
        assert schema_errors("vfaith_perception", item) == []
    # Pulling again changes nothing.
    before = [(build / name).read_bytes() for name in ("records.jsonl", "perception.jsonl")]
    assert main(["annotate", "pull", str(build), *common]) == 0
    assert [(build / name).read_bytes() for name in ("records.jsonl", "perception.jsonl")] == before
    assert json.loads((build / "build.json").read_text())["family"] == "vfaith"


def test_annotations_that_do_not_fit_the_config_are_misfits(vfaith_build: Path) -> None:
    record = read_records(vfaith_build)[0]
    planned = _text(record, record["answer_edited"])
    for result, why in (([], "no answer"), (_result(planned, "no"), "without a reason"),
                        (_result(planned, "yes", ("artifact",)), "with reasons"),
                        (_result("Z. nothing"), "expected choices"),
                        (_result(planned) + [{"from_name": "box", "type": "rectanglelabels"}], "unknown control")):
        with pytest.raises(Misfit, match=why):
            read_vote(result, record, 1, "a", None)
    vote = read_vote(_result(planned, "no", ("artifact",)), record, 1, "a", None)
    assert vote.verdict == "reject" and vote.reasons == ("artifact",)
    assert family().schema == "vfaith_pair"
