"""`mmfaith build crm` on the embedded COCO sample, a VisArgs-style fixture and a user's COCO file:
records, gates, random placement, licence rule, resume, byte-identical rebuilds, and regeneration
of only the items whose regions changed."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmfaith.builders.masks import MaskRegion, check_apart, mask_union, pixel_box
from mmfaith.cli import main
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_file
from mmfaith.loaders.crm import open_crm_dataset
from mmfaith.schema import schema_errors
from tests.conftest import read_records


def _files(folder: Path) -> dict[str, str]:
    """Every file of a build dir but build.json (which holds wall-clock times), by sha256."""
    return {str(p.relative_to(folder)): sha256_file(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "build.json"}


def _build(out: Path, *extra: str) -> int:
    return main(["build", "crm", "--out", str(out), "--no-progress", *extra])


@pytest.fixture(scope="module")
def crm_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crm") / "build"
    assert _build(out, "--max-items", "6", "--mask-style", "black,gray,mean,blur,noise") == 0
    return out


def test_records_are_schema_valid_and_gated(crm_build: Path) -> None:
    records = read_records(crm_build)
    assert len(records) == 6
    for record in records:
        assert schema_errors("crm_item", record) == []
        original = np.asarray(Image.open(crm_build / record["image_original"]))
        height, width = original.shape[:2]
        evidence = [pixel_box(region["bbox"], width, height) for region in record["regions"]]
        assert [(v["mode"], v["style"]) for v in record["variants"]] == [
            (mode, style) for mode in ("specific", "random") for style in ("black", "gray", "mean", "blur", "noise")]
        for variant in record["variants"]:
            masked = np.asarray(Image.open(crm_build / variant["image"]))
            assert sha256_file(crm_build / variant["image"]) == variant["sha256"]
            regions = [MaskRegion(x, y, x + w, y + h) for x, y, w, h in variant["mask_boxes"]]
            union = mask_union(regions, height, width)
            assert np.array_equal(masked[~union], original[~union])  # nothing outside the mask changed
            if variant["mode"] == "specific":
                assert variant["mask_boxes"] == [r.xywh() for r in evidence]
                if variant["style"] == "black":
                    assert (masked[union] == 0).all()
            else:  # same number and sizes, apart from the evidence (+ 8 px) and from each other
                assert [(r.width, r.height) for r in regions] == [(r.width, r.height) for r in evidence]
                assert check_apart(regions, evidence, 8) is None
        placements = {json.dumps(v["mask_boxes"]) for v in record["variants"] if v["mode"] == "random"}
        assert len(placements) == 1  # one placement per item, shared by every style


def test_coco_questions_come_from_the_shared_generator(crm_build: Path, sample: tuple[Path, Path]) -> None:
    from mmfaith.builders.coco_questions import CategoryContext, scene_questions
    from mmfaith.builders.coco_source import CocoSource
    from mmfaith.builders.crm.sources import QUESTION_RULES, coco_candidates, crm_absent, crm_kinds
    from mmfaith.images import read_rgb

    source = CocoSource(*sample)
    context = CategoryContext(source)
    record = read_records(crm_build)[0]
    scene = source.scene(record["source"]["image_id"])
    # The shared generator with CRM's rules, kind table and absent kinds asks the record's question about the same
    # evidence.
    kinds = crm_kinds(context)
    questions = scene_questions(scene, read_rgb(scene.path), 0, rules=QUESTION_RULES,
                                absent=crm_absent(context, scene, kinds), kinds=kinds)
    question = next(q for q in questions if f"coco:{q.key}" == record["build"]["key"])
    assert record["question"] == question.question and record["regions"] == question.regions()
    assert record["question_type"] == question.template
    # Its options are the build's candidate's (one balance over the build's kept questions); the build settles the
    # gold's letter over the items it keeps (build._apply_cap, GoldCap.lettered).
    candidate = next(c for c in coco_candidates(source, 0) if c.key == record["build"]["key"])
    gold = next(o["text"] for o in record["options"] if o["label"] == record["answer"])
    assert gold == next(o["text"] for o in candidate.options if o["label"] == candidate.answer)
    assert sorted(o["text"] for o in record["options"]) == sorted(o["text"] for o in candidate.options)


def _has_color_near(sheet: Image.Image, x: float, y: float, color: tuple[int, int, int]) -> bool:
    pixels = np.asarray(sheet.convert("RGB"))[max(0, int(y) - 3):int(y) + 4, max(0, int(x) - 3):int(x) + 4]
    return bool((pixels == color).all(axis=-1).any())


def test_preview_shows_each_original_with_its_evidence_and_every_variant_with_its_mask(crm_build: Path) -> None:
    from mmfaith.builders.crm.preview import EVIDENCE_COLOR, MODE_COLORS, THUMB_WIDTH
    from mmfaith.builders.preview_sheet import KEY_HEIGHT, PADDING

    first = read_records(crm_build)[0]
    with Image.open(crm_build / "preview.png") as sheet:
        sheet.load()
    shown = 1 + len(first["variants"])  # one item per row: the original, then each variant
    assert sheet.width == shown * THUMB_WIDTH + (shown - 1) * PADDING + 2 * PADDING
    scale, top = THUMB_WIDTH / first["width"], KEY_HEIGHT + PADDING
    x, y, _, _ = first["regions"][0]["bbox"]
    assert _has_color_near(sheet, PADDING + x * scale, top + y * scale, EVIDENCE_COLOR)
    for column, variant in enumerate(first["variants"], start=1):
        bx, by, _, _ = variant["mask_boxes"][0]
        left = PADDING + column * (THUMB_WIDTH + PADDING)
        assert _has_color_near(sheet, left + bx * scale, top + by * scale, MODE_COLORS[variant["mode"]])


def test_rejections_name_their_reason(crm_build: Path) -> None:
    rejected = read_records(crm_build, "rejected.jsonl")
    stages = {r["stage"] for r in rejected}
    # The build asks for blur and mean too: every colour question is refused them (issue 27 item 6); the
    # sample's first images hold more one-instance counts than the gold cap lets through, blur keeps the colour
    # of some objects (mask_leak), and a random region may find no place.
    assert {"mask_style", "gold_balance"} <= stages <= {"placement", "mask_style", "gold_balance", "mask_leak"}
    for r in rejected:
        if r["stage"] == "placement":
            assert r["reason"].startswith("no place for a ") and r["reason"].endswith("after 2000 tries")
        elif r["stage"] == "gold_balance":
            assert r["reason"].startswith("gold balance: ")
        elif r["stage"] == "mask_leak":
            assert "blur keeps a colour standing out" in r["reason"] or "mirror image" in r["reason"], r["reason"]
        else:
            assert r["key"].startswith("coco:color:") and "blur keeps the region's average colour" in r["reason"]
    assert not any(r["question_type"] == "color" for r in read_records(crm_build))


def test_rebuild_is_byte_identical_and_resume_continues(crm_build: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    assert _build(again, "--max-items", "3", "--mask-style", "black,gray,mean,blur,noise") == 0
    assert len(read_records(again)) == 3
    assert _build(again, "--max-items", "6", "--mask-style", "black,gray,mean,blur,noise") == 0
    assert _files(again) == _files(crm_build)
    with pytest.raises(MmfaithError, match="other settings"):
        from mmfaith.builders.crm.build import CrmBuildRequest, build_crm
        from mmfaith.builders.crm.variants import MaskSettings

        build_crm(CrmBuildRequest(out=again, max_items=6, mask=MaskSettings(styles=("black",)), progress=False))


def test_two_workers_do_not_change_a_single_byte(crm_build: Path, tmp_path: Path) -> None:
    parallel = tmp_path / "parallel"
    assert _build(parallel, "--max-items", "6", "--mask-style", "black,gray,mean,blur,noise", "--workers", "2") == 0
    assert _files(parallel) == _files(crm_build)
    assert not (parallel / ".staging").exists()


def test_a_corrected_box_regenerates_only_that_items_variants(crm_build: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(crm_build, copy)
    records = read_records(copy)
    changed = records[2]
    before = _files(copy)
    x, y, w, h = changed["regions"][0]["bbox"]
    changed["regions_history"] = [{"regions": changed["regions"], "changed_by": "test", "time": None}]
    changed["regions"] = [{**changed["regions"][0], "bbox": [x + 5, y + 3, w - 10, h - 6]}]
    (copy / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert _build(copy, "--max-items", "6", "--mask-style", "black,gray,mean,blur,noise") == 0
    after = _files(copy)
    differing = {path for path in after if after[path] != before.get(path)}
    specific = {f"variants/{changed['id']}/specific-{s}.png" for s in ("black", "gray", "mean", "blur", "noise")}
    # The specific variants follow the new box; random ones keep sizes, so they change only when the
    # size changed (here it did); no other item's file changes (preview.png shows the corrected item).
    assert specific <= differing
    assert all(path.startswith(f"variants/{changed['id']}/") or path in ("records.jsonl", "preview.png")
               for path in differing)
    new = read_records(copy)
    assert [r["id"] for r in new] == [r["id"] for r in records]
    remade = new[2]
    assert remade["regions"] == changed["regions"] and remade["regions_history"] == changed["regions_history"]
    assert remade["variants"][0]["mask_boxes"] == [pixel_box(changed["regions"][0]["bbox"], remade["width"],
                                                             remade["height"]).xywh()]
    assert [r for i, r in enumerate(new) if i != 2] == [r for i, r in enumerate(read_records(crm_build)) if i != 2]
    build_json = json.loads((copy / "build.json").read_text())
    assert build_json["counts"]["regenerated"] == [changed["id"]]


def _visargs_fixture(folder: Path, sample: tuple[Path, Path]) -> Path:
    """Two rows in the published VisArgs layout (annotation.json: url, visual_premises, b_box as
    {h, startX, startY, w}, commonsense_premises, conclusion, reasoning_steps), images from the
    embedded sample stored offline under images/ by the URL's file name."""
    (folder / "images").mkdir(parents=True)
    for name in ("000000000030.jpg", "000000000074.jpg"):
        shutil.copy(sample[1] / name, folder / "images" / name)
    rows = [
        {"url": "https://i.pinimg.com/originals/aa/000000000030.jpg",
         "visual_premises": ["A white vase holds pink flowers.", "The flowers stand on a small table."],
         "b_box": [{"h": 195, "startX": 237, "startY": 155, "w": 166}, {"h": 40, "startX": 200, "startY": 360, "w": 150}],
         "commonsense_premises": ["Flowers on a table decorate a room."], "conclusion": "The room is decorated.",
         "reasoning_steps": ["(VP1, VP2, CP1 -> C): The room is decorated."]},
        {"url": "https://i.pinimg.com/originals/bb/000000000074.jpg",
         "visual_premises": ["A dog lies on the street."],
         "b_box": [{"h": 60, "startX": 60, "startY": 260, "w": 110}],
         "commonsense_premises": ["Dogs rest where it is calm."], "conclusion": "The street is calm.",
         "reasoning_steps": ["(VP1, CP1 -> C): The street is calm."]},
    ]
    (folder / "annotation.json").write_text(json.dumps(rows))
    return folder


def test_visargs_style_rows_become_items(tmp_path: Path, sample: tuple[Path, Path]) -> None:
    data = _visargs_fixture(tmp_path / "visargs", sample)
    out = tmp_path / "build"
    assert _build(out, "--visargs", str(data), "--question-template", "What does this image argue?") == 0
    records = read_records(out)
    assert [r["answer"] for r in records] == ["The room is decorated.", "The street is calm."]
    first = records[0]
    assert first["question"] == "What does this image argue?" and first["options"] == []
    assert first["regions"] == [{"id": "premise0", "bbox": [237.0, 155.0, 166.0, 195.0],
                                 "label": "A white vase holds pink flowers."},
                                {"id": "premise1", "bbox": [200.0, 360.0, 150.0, 40.0],
                                 "label": "The flowers stand on a small table."}]
    assert first["source"]["url"] == "https://i.pinimg.com/originals/aa/000000000030.jpg"
    assert open_crm_dataset(out).items[0].variants.keys() == {"specific-black", "random-black"}
    with pytest.raises(MmfaithError, match="boxes only"):
        from mmfaith.builders.crm.build import CrmBuildRequest, build_crm
        from mmfaith.builders.crm.variants import MaskSettings

        build_crm(CrmBuildRequest(out=tmp_path / "seg", visargs=data, mask=MaskSettings(shape="segment")))


def test_visargs_parquet_with_a_column_mapping(tmp_path: Path, sample: tuple[Path, Path]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = _visargs_fixture(tmp_path / "visargs", sample)
    rows = json.loads((data / "annotation.json").read_text())
    renamed = [{"picture": r["url"].rsplit("/", 1)[-1], "premises": r["visual_premises"],
                "boxes": [[b["startX"], b["startY"], b["w"], b["h"]] for b in r["b_box"]],
                "claim": r["conclusion"], "uid": f"row-{i}"} for i, r in enumerate(rows)]
    pq.write_table(pa.Table.from_pylist(renamed), data / "rows.parquet")
    out = tmp_path / "build"
    assert _build(out, "--visargs", str(data / "rows.parquet"), "--images", str(data / "images"),
                  "--columns", "image=picture,premises=premises,boxes=boxes,answer=claim,id=uid") == 0
    records = read_records(out)
    assert [r["source"]["image_id"] for r in records] == ["row-0", "row-1"]
    assert records[1]["regions"][0]["bbox"] == [60.0, 260.0, 110.0, 60.0]


def test_bad_visargs_rows_name_the_file_and_item(tmp_path: Path, sample: tuple[Path, Path]) -> None:
    data = _visargs_fixture(tmp_path / "visargs", sample)
    rows = json.loads((data / "annotation.json").read_text())
    rows[1]["b_box"] = rows[1]["b_box"] * 2
    (data / "annotation.json").write_text(json.dumps(rows))
    with pytest.raises(MmfaithError, match=r"annotation.json: item 1: visual_premises and b_box must be lists"):
        from mmfaith.builders.crm.build import CrmBuildRequest, build_crm

        build_crm(CrmBuildRequest(out=tmp_path / "build", visargs=data, progress=False))


def test_a_users_coco_file_noderivs_and_segments(tmp_path: Path, sample: tuple[Path, Path]) -> None:
    data = json.loads(sample[0].read_text())
    for lic in data["licenses"]:
        lic["name"] = "Attribution-NonCommercial-NoDerivs License"
    annotations = tmp_path / "instances_mine.json"
    annotations.write_text(json.dumps(data))
    refused = tmp_path / "refused"
    assert _build(refused, "--coco-annotations", str(annotations), "--images", str(sample[1])) == 0
    assert read_records(refused) == []
    assert json.loads((refused / "build.json").read_text())["counts"]["skipped_images"]["noderivs"] == len(
        data["images"])
    allowed = tmp_path / "allowed"
    assert _build(allowed, "--coco-annotations", str(annotations), "--images", str(sample[1]), "--allow-noderivs",
                  "--max-items", "2", "--mask-shape", "segment", "--mask-style", "black") == 0
    records = read_records(allowed)
    assert len(records) == 2 and records[0]["source"]["dataset"] == "instances_mine"
    record = records[0]
    original = np.asarray(Image.open(allowed / record["image_original"]))
    masked = np.asarray(Image.open(allowed / record["variants"][0]["image"]))
    changed = (original != masked).any(axis=-1)
    x, y, w, h = record["variants"][0]["mask_boxes"][0]
    assert changed.sum() < w * h  # a segment, not its whole box
    assert not changed[:, :x].any() and not changed[:y].any()


def test_a_killed_build_resumes_to_the_same_bytes(crm_build: Path, tmp_path: Path) -> None:
    """SIGKILL mid-build (after 2 records), then the same command: the files equal an uninterrupted build's."""
    import subprocess
    import sys

    from tests.conftest import kill_after_lines

    out = tmp_path / "killed"
    command = [sys.executable, "-m", "mmfaith", "build", "crm", "--out", str(out), "--max-items", "6",
               "--mask-style", "black,gray,mean,blur,noise", "--no-progress"]
    process = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    left = kill_after_lines(process, out / "records.jsonl", 2)
    assert 2 <= left < 6
    assert json.loads((out / "build.json").read_text())["status"] == "running"  # killed: no chance to say more
    assert subprocess.run(command, capture_output=True).returncode == 0
    assert _files(out) == _files(crm_build)
    assert json.loads((out / "build.json").read_text())["status"] == "complete"
