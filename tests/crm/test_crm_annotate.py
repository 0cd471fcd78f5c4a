"""CRM through a real Label Studio server: the evidence boxes arrive as pre-filled editable rectangles;
a moved box is pulled into the record's regions (the old one kept in verification.history); the next
`mmfaith build crm` regenerates that item's variants and no other file."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from label_studio_sdk import LabelStudio

from mmfaith.annotation import label_studio as lsmod
from mmfaith.annotation.crm.tasks import family, read_vote, rectangles
from mmfaith.annotation.votes import Misfit
from mmfaith.cli import main
from mmfaith.images import sha256_file
from tests.conftest import read_records
from tests.shared.test_annotate import KEY

TITLE = "CRM round trip"


def _files(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "build.json"}


def _accept(rects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"from_name": "verdict", "to_name": "image", "type": "choices", "value": {"choices": ["accept"]}},
            *rects]


def test_a_moved_box_reaches_the_regions_and_regenerates_only_that_item(
        label_studio: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    build = label_studio["files_root"] / "crm-round-trip"
    argv = ["--out", str(build), "--max-items", "3", "--mask-style", "black,noise", "--no-progress"]
    assert main(["build", "crm", *argv]) == 0
    before_files = _files(build)
    records = read_records(build)
    os.environ[KEY] = label_studio["token"]
    try:
        assert main(["annotate", "push", str(build), "--url", label_studio["url"], "--project", TITLE,
                     "--files-root", str(label_studio["files_root"])]) == 0
        admin = LabelStudio(base_url=label_studio["url"], api_key=label_studio["token"])
        project = lsmod.find_project(admin, TITLE)
        tasks = {t["data"]["record_id"]: t for t in lsmod.list_tasks(admin, project.id)}
        task = admin.tasks.get(id=str(tasks[records[0]["id"]]["id"]))
        prefilled = task.predictions[0].result if task.predictions else None
        assert prefilled == rectangles(records[0])  # one editable rectangle per region, ids kept
        moved = json.loads(json.dumps(prefilled))
        moved[0]["value"]["x"] += 10.0  # ten percent of the width to the right
        admin.annotations.create(id=tasks[records[0]["id"]]["id"], result=_accept(moved))
        admin.annotations.create(id=tasks[records[1]["id"]]["id"], result=_accept(rectangles(records[1])))
        assert main(["annotate", "pull", str(build), "--url", label_studio["url"], "--project", TITLE]) == 0
    finally:
        del os.environ[KEY]
    pulled = read_records(build)
    x, y, w, h = records[0]["regions"][0]["bbox"]
    new_x = round((x / records[0]["width"] * 100 + 10.0) / 100 * records[0]["width"], 2)
    assert pulled[0]["regions"][0]["bbox"] == [new_x, round(y, 2), round(w, 2), round(h, 2)]
    assert pulled[0]["verification"]["status"] == "accepted"
    change = next(h for h in pulled[0]["verification"]["history"] if h["field"] == "regions.0.bbox")
    assert change["previous"] == records[0]["regions"][0]["bbox"]
    assert pulled[1]["regions"] == records[1]["regions"] and pulled[1]["verification"]["status"] == "accepted"
    capsys.readouterr()
    assert main(["build", "crm", *argv]) == 0
    assert "variants remade for 1 corrected items" in capsys.readouterr().out
    after_files = _files(build)
    changed = {path for path in after_files if after_files[path] != before_files.get(path)}
    remade = {f"variants/{records[0]['id']}/specific-{style}.png" for style in ("black", "noise")}
    # preview.png draws the build's first items' variants, the remade one among them
    assert remade <= changed <= remade | {"records.jsonl", "preview.png"} | {
        f"variants/{records[0]['id']}/random-{style}.png" for style in ("black", "noise")}
    rebuilt = read_records(build)
    assert rebuilt[0]["variants"][0]["mask_boxes"][0][0] == int(new_x)
    assert rebuilt[0]["verification"] == pulled[0]["verification"]
    assert rebuilt[1:] == pulled[1:]


def test_boxes_are_adjusted_never_added(tmp_path: Path) -> None:
    record = {"id": "crm-0", "width": 200, "height": 100, "regions": [{"id": "ann1", "bbox": [20, 10, 40, 30],
                                                                         "label": "car"}]}
    unchanged = read_vote(_accept(rectangles(record)), record, 1, "a", None)
    assert unchanged.edits == {}
    extra = {**rectangles(record)[0], "id": "new-box"}
    with pytest.raises(Misfit, match="boxes are adjusted, never added"):
        read_vote(_accept([extra]), record, 1, "a", None)
    assert family().task_predictions(Path(), record) == rectangles(record)
