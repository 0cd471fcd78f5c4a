"""The official SPD-Faith-Bench in mmfaith: import of both real layouts, and re-scoring official response files.

Fixtures are made from the three real canvases of the official repository (tests/fixtures/
spd_official, copied from its data/examples, MIT; COCO photographs): each is stacked top/bottom,
original on top (looked at: easy 785 a skier's jacket red -> blue; medium 2006_1 a bus recoloured;
multi_diff 4 the cake's berries recoloured, the cake knife moved, the plastic cups removed).
- Hub layout: a folder with data/<split>-00000-of-00001.parquet written by `datasets`, columns
  image_id, image1, image2 (JPEG bytes of the two halves), num_differences, differences with the
  real field names, read back by the importer through the real `datasets.load_dataset(folder)`.
- GitHub layout: a JSONL of real-layout lines naming canvas files, the three stacked canvases, one
  left/right canvas made from two portrait crops of a pair, and one canvas of two unrelated photos.
No network is used.
"""
from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from mmfaith.builders.spd_faith.canvas_cut import CutRefused, best_cut, halves
from mmfaith.builders.spd_faith.official import import_official
from mmfaith.cli import main
from mmfaith.loaders.spd_faith.dataset import open_spd_dataset
from mmfaith.loaders.spd_faith.rows import record_to_row, row_to_record
from mmfaith.schema import schema_errors

FIXTURES = Path(__file__).parent.parent / "fixtures" / "spd_official"

# Gold in the Hub's field layout; boxes are in pixels of the original half (looked at in the images).
HUB_GOLD: dict[str, tuple[str, str, list[dict[str, Any]]]] = {
    "easy": ("easy_785", "785", [
        {"bbox_h": 160.0, "bbox_w": 190.0, "bbox_x": 270.0, "bbox_y": 40.0, "category": "person",
         "description": "The skier's jacket changed from red to blue.", "type": "color"}]),
    "medium": ("medium_2006_1", "2006_1", [
        {"bbox_h": 330.0, "bbox_w": 540.0, "bbox_x": 50.0, "bbox_y": 60.0, "category": "bus",
         "description": "", "type": "color"}]),
    "multi_diff": ("multi_diff_4", "4", [
        {"bbox_h": 190.0, "bbox_w": 250.0, "bbox_x": 15.0, "bbox_y": 170.0, "category": "cake",
         "description": "Three changes: the berries on the cake turned blue, the cake knife moved, the cups are gone.",
         "type": "color"},
        {"bbox_h": 90.0, "bbox_w": 140.0, "bbox_x": 270.0, "bbox_y": 285.0, "category": "knife", "description": "",
         "type": "position"},
        {"bbox_h": 130.0, "bbox_w": 60.0, "bbox_x": 0.0, "bbox_y": 110.0, "category": "cup",
         "description": "The plastic cups on the left were removed.", "type": "remove"}]),
}
COCO_IDS = {"person": 1, "bus": 6, "cake": 61, "knife": 49, "cup": 47}


def canvas(name: str) -> np.ndarray:
    with Image.open(FIXTURES / f"{name}.jpg") as image:
        return np.asarray(image.convert("RGB"))


def jpeg(rgb: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=95)
    return buffer.getvalue()


def decoded(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert("RGB"))


def png_pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGB"))


def make_hub_folder(folder: Path) -> dict[str, tuple[bytes, bytes]]:
    """A Hub-layout snapshot folder; returns split -> (image1 JPEG bytes, image2 JPEG bytes)."""
    import datasets

    difference = {k: datasets.Value("float64") for k in ("bbox_h", "bbox_w", "bbox_x", "bbox_y")}
    difference.update(category=datasets.Value("string"), description=datasets.Value("string"),
                      type=datasets.Value("string"))
    features = datasets.Features({"image_id": datasets.Value("string"), "image1": datasets.Image(),
                                  "image2": datasets.Image(), "num_differences": datasets.Value("int64"),
                                  "differences": datasets.List(difference)})
    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# SPD-Faith-Bench (test snapshot)\n")
    images = {}
    for split, (name, image_id, gold) in HUB_GOLD.items():
        first, second, _, _ = halves(canvas(name), "top/bottom")
        images[split] = (jpeg(first), jpeg(second))
        table = datasets.Dataset.from_dict(
            {"image_id": [image_id], "image1": [{"bytes": images[split][0], "path": None}],
             "image2": [{"bytes": images[split][1], "path": None}], "num_differences": [len(gold)],
             "differences": [gold]}, features=features)
        table.to_parquet(str(folder / "data" / f"{split}-00000-of-00001.parquet"))
    return images


def tree_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder)}\n".encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[bytes, bytes]], Path]:
    root = tmp_path_factory.mktemp("hub")
    images = make_hub_folder(root / "snapshot")
    summary = import_official(str(root / "snapshot"), root / "build")
    assert (summary.accepted, summary.rejected) == (3, [])
    return root / "snapshot", images, root / "build"


def records(build: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, (build / "records.jsonl").read_text().splitlines())}


# -- Hub layout ---------------------------------------------------------------------------------------

def test_hub_folder_import_keeps_tiers_boxes_captions_and_exact_pixels(hub) -> None:
    _, images, build = hub
    found = records(build)
    assert sorted(found) == ["official-easy-785", "official-medium-2006_1", "official-multi_diff-4"]
    for record in found.values():
        assert schema_errors("spd_faith_pair", record) == []
    easy, medium, multi = found["official-easy-785"], found["official-medium-2006_1"], found["official-multi_diff-4"]
    assert (easy["subset"], easy["difficulty"]) == ("single", "easy")
    assert (medium["subset"], medium["difficulty"]) == ("single", "medium")
    assert (multi["subset"], multi["difficulty"], multi["num_differences"]) == ("multi", None, 3)
    # The row-level text of the first difference is the caption; the others keep their own text.
    assert easy["caption"] == "The skier's jacket changed from red to blue."
    assert medium["caption"] is None and medium["differences"][0]["description"] == "The bus changed color."
    assert multi["caption"].startswith("Three changes")
    assert [d["description"] for d in multi["differences"]] == [
        "The cake changed color.", "The knife moved.", "The plastic cups on the left were removed."]
    # Types, COCO categories and ids, boxes (the original's box for every type).
    assert [(d["type"], d["category"], d["category_id"]) for d in multi["differences"]] == [
        ("color", "cake", COCO_IDS["cake"]), ("position", "knife", COCO_IDS["knife"]), ("remove", "cup", COCO_IDS["cup"])]
    assert [d["bbox_before"] for d in multi["differences"]] == [[15.0, 170.0, 250.0, 190.0], [270.0, 285.0, 140.0, 90.0],
                                                                 [0.0, 110.0, 60.0, 130.0]]
    assert [d["bbox_after"] for d in multi["differences"]] == [[15.0, 170.0, 250.0, 190.0], None, None]
    assert multi["differences"][0]["area_ratio"] == round(250 * 190 / (640 * 427), 6)
    # Source: COCO image id and file name, the official id, license and revision recorded.
    assert medium["source"]["image_id"] == 2006 and medium["source"]["file_name"] == "000000002006.jpg"
    assert medium["source"]["official"]["image_id"] == "2006_1"
    assert medium["source"]["license"]["name"] == "cc-by-4.0"
    assert medium["source"]["official"]["revision"].startswith("local-sha256:")
    # Pixels: exactly the JPEG decoded once, stored as PNG.
    for split, record in (("easy", easy), ("medium", medium), ("multi_diff", multi)):
        assert np.array_equal(png_pixels(build / record["image_a"]), decoded(images[split][0]))
        assert np.array_equal(png_pixels(build / record["image_b"]), decoded(images[split][1]))


def test_reimport_is_byte_identical_and_replaces_only_an_import(hub, tmp_path: Path) -> None:
    snapshot, _, build = hub
    again = tmp_path / "again"
    import_official(str(snapshot), again)
    assert tree_digest(again) == tree_digest(build)
    import_official(str(snapshot), again)  # over a previous import: replaced whole
    assert tree_digest(again) == tree_digest(build)
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="not empty .*notes.txt.* not an official import"):
        import_official(str(snapshot), other)


def test_imported_build_opens_and_round_trips_through_release_rows(hub) -> None:
    _, _, build = hub
    dataset = open_spd_dataset(build)
    assert len(dataset.pairs) == 3
    for pair in dataset.pairs:
        row = record_to_row(pair.record, pair.image_a_path.read_bytes(), pair.image_b_path.read_bytes())
        assert row_to_record(row) == pair.record


def test_imported_build_releases_and_verifies(hub, tmp_path: Path) -> None:
    _, _, build = hub
    assert main(["release", str(build), "--out", str(tmp_path / "rel"), "--name", "org/spd-official",
                 "--version", "0.1.0", "--include", "all"]) == 0
    assert main(["verify", str(tmp_path / "rel")]) == 0
    released = {p.id: p.record for p in open_spd_dataset(tmp_path / "rel").pairs}
    assert released == {p.id: p.record for p in open_spd_dataset(build).pairs}


def test_hub_rows_that_break_the_layout_are_rejected_with_reasons(tmp_path: Path) -> None:
    make_hub_folder(tmp_path / "snapshot")
    import datasets

    path = tmp_path / "snapshot" / "data" / "easy-00000-of-00001.parquet"
    table = datasets.Dataset.from_parquet(str(path))
    bad = table.map(lambda row: {"differences": [dict(row["differences"][0], category="unicorn")]})
    bad.to_parquet(str(path))
    summary = import_official(str(tmp_path / "snapshot"), tmp_path / "build")
    assert summary.accepted == 2
    rejected = [json.loads(line) for line in (tmp_path / "build" / "rejected.jsonl").read_text().splitlines()]
    assert rejected == [{"official_id": "785", "reason": "differences[0].category 'unicorn' is not a COCO category name",
                         "split": "easy"}]


# -- GitHub layout ------------------------------------------------------------------------------------

def make_github_layout(folder: Path) -> dict[str, np.ndarray]:
    """The JSONL and its canvases; returns qid -> the canvas pixels as decoded."""
    lines = []
    pixels = {}
    for split, (name, image_id, gold) in HUB_GOLD.items():
        target = folder / split / f"{image_id}.jpg"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((FIXTURES / f"{name}.jpg").read_bytes())
        pixels[f"{image_id}_{split}"] = canvas(name)
        lines.append({"qid": f"{image_id}_{split}", "image": f"{split}/{image_id}.jpg",
                      "modifications": [{"type": d["type"], "category": d["category"]} for d in gold],
                      "is_faithful": 1, "question": "Are the two pictures same?"})
    # A left/right canvas from a portrait source: a 280x425 crop of both halves of the easy pair.
    first, second, _, _ = halves(canvas("easy_785"), "top/bottom")
    portrait = np.concatenate([first[:, 200:480], second[:, 200:480]], axis=1)
    (folder / "hard").mkdir()
    Image.fromarray(portrait).save(folder / "hard" / "785_785_color1.jpg", quality=95)
    pixels["785_785_color1"] = decoded((folder / "hard" / "785_785_color1.jpg").read_bytes())
    lines.append({"qid": "785_785_color1", "image": "hard/785_785_color1.jpg",
                  "modifications": [{"type": "color", "category": "person"}], "is_faithful": 0,
                  "question": "Are the two pictures different?"})
    # Two unrelated photographs stacked: no cut makes a pair.
    bus, cake = halves(canvas("medium_2006_1"), "top/bottom")[0], halves(canvas("multi_diff_4"), "top/bottom")[0]
    Image.fromarray(np.concatenate([bus[:427], cake[:427]], axis=0)).save(folder / "hard" / "1_1_remove1.jpg")
    lines.append({"qid": "1_1_remove1", "image": "hard/1_1_remove1.jpg",
                  "modifications": [{"type": "remove", "category": "bus"}], "is_faithful": 1,
                  "question": "Are the two pictures same?"})
    (folder / "spd_faith.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return pixels


def test_github_jsonl_canvases_are_cut_where_the_halves_agree(tmp_path: Path) -> None:
    pixels = make_github_layout(tmp_path / "github")
    assert main(["build", "spd-faith", "--from-official", str(tmp_path / "github" / "spd_faith.jsonl"),
                 "--out", str(tmp_path / "build")]) == 0
    found = records(tmp_path / "build")
    assert sorted(found) == ["official-easy-785_easy", "official-hard-785_785_color1", "official-medium-2006_1_medium",
                             "official-multi_diff-4_multi_diff"]
    for record_id, record in found.items():
        assert schema_errors("spd_faith_pair", record) == []
        official = record["source"]["official"]
        qid = official["qid"]
        orientation = "left/right" if qid == "785_785_color1" else "top/bottom"
        assert official["cut"]["orientation"] == orientation, record_id
        assert official["cut"]["agreement"] > 0.8 and official["cut"]["other_agreement"] < 0.7
        first, second, _, _ = halves(pixels[qid], orientation)
        assert np.array_equal(png_pixels(tmp_path / "build" / record["image_a"]), first)
        assert np.array_equal(png_pixels(tmp_path / "build" / record["image_b"]), second)
        assert official["question"] and official["is_faithful"] in (0, 1)
    hard = found["official-hard-785_785_color1"]
    assert (hard["subset"], hard["difficulty"], hard["source"]["image_id"]) == ("single", "hard", 785)
    assert png_pixels(tmp_path / "build" / hard["image_a"]).shape == (425, 280, 3)
    multi = found["official-multi_diff-4_multi_diff"]
    assert [(d["type"], d["category"], d["bbox_before"]) for d in multi["differences"]] == [
        ("color", "cake", None), ("position", "knife", None), ("remove", "cup", None)]
    assert found["official-easy-785_easy"]["source"]["official"]["cut"]["at"] == 425  # 850 rows: 425 + 425
    assert found["official-multi_diff-4_multi_diff"]["source"]["official"]["cut"]["dropped_middle"] == 1  # 855 rows
    rejected = [json.loads(line) for line in (tmp_path / "build" / "rejected.jsonl").read_text().splitlines()]
    assert [r["official_id"] for r in rejected] == ["1_1_remove1"]
    assert "halves stay far apart under every cut" in rejected[0]["reason"]
    assert "hard/1_1_remove1.jpg" in rejected[0]["reason"]


def test_cut_refuses_a_canvas_of_unrelated_halves() -> None:
    noise = np.random.default_rng(0).integers(0, 256, size=(100, 120, 3), dtype=np.uint8)
    with pytest.raises(CutRefused, match="far apart"):
        best_cut(noise)
    first, second, at, dropped = halves(canvas("medium_2006_1"), "top/bottom")
    cut = best_cut(canvas("medium_2006_1"))
    assert (cut.orientation, cut.at, cut.dropped) == ("top/bottom", at, dropped) == ("top/bottom", 480, 0)
    assert np.array_equal(cut.first, first) and np.array_equal(cut.second, second)


def test_cli_refuses_build_flags_with_from_official(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "spd-faith", "--from-official", str(tmp_path), "--out", str(tmp_path / "b"),
                 "--per-tier", "2"]) != 0
    assert "--from-official imports the official release and builds nothing: drop --per-tier" in capsys.readouterr().err
    assert main(["build", "spd-faith", "--from-official", str(tmp_path / "nothing" / "here.jsonl"),
                 "--out", str(tmp_path / "b")]) != 0
    assert "no such file or folder, and not a Hub id" in capsys.readouterr().err


# -- the oracle over real HTTP on an imported set ----------------------------------------------------

def test_oracle_scores_one_on_an_imported_set_through_http(hub, tmp_path: Path) -> None:
    from mmfaith.evaluators.reference_server import ReferenceServer
    from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith
    from tests.shared.test_reference_server import run_against

    _, _, build = hub
    with ReferenceServer(open_spd_dataset(build), "oracle", family="spd-faith") as server:
        summary = run_against(server, build, tmp_path / "run")
    assert (summary.answered, summary.failed) == (12, 0)
    metrics = score_spd_faith(ScoreRequest(dataset=build, predictions=tmp_path / "run" / "predictions.jsonl",
                                           out=tmp_path / "score", from_run=True, n_bootstrap=0))
    assert {k: metrics["overall"][k] for k in ("DS", "DQR", "TF1", "CF1")} == {"DS": 1.0, "DQR": 1.0, "TF1": 1.0,
                                                                               "CF1": 1.0}
    assert metrics["overall"]["n_items"] == 3 and "official" not in metrics


# -- official response files --------------------------------------------------------------------------

OFFICIAL_RESPONSES = {
    "model": "some-vlm",
    "responses": [
        {"sample_id": "785", "ground_truth": {"num_differences": 1, "modifications": [{"type": "color", "category": "person"}]},
         "raw_response": "The person changed color.",
         "parsed_response": {"has_structured_output": True, "predicted_num": 1,
                             "structured_output": [{"type": "color", "category": "person"}]},
         "response_same": "No. The person changed color to blue. \\boxed{No}",
         "response_different": "Yes, the person changed color. \\boxed{Yes}"},
        {"sample_id": "2006_1", "ground_truth": {"num_differences": 1, "modifications": [{"type": "color", "category": "bus"}]},
         "raw_response": "...",
         "parsed_response": {"has_structured_output": True, "predicted_num": 2,
                             "structured_output": [{"type": "color", "category": "bus"}, {"type": "color", "category": "bus"}]}},
        {"sample_id": "4", "ground_truth": {"num_differences": 3, "modifications": [
            {"type": "color", "category": "cake"}, {"type": "position", "category": "knife"},
            {"type": "remove", "category": "bottle"}]},
         "raw_response": "The cake changed color and the cup was removed.",
         "parsed_response": {"has_structured_output": False, "predicted_num": 2}},
    ],
}


def test_official_response_file_is_rescored_beside_the_official_numbers(hub, tmp_path: Path) -> None:
    """Every expected value below was computed by hand from the definitions (mmfaith: metrics.py's
    docstring; official: eval_multi_diff_metrics.py as official_responses.py describes it), not by the code.

    mmfaith, gold = the dataset (rows 785: g 1, color person; 2006_1: g 1, color bus; 4: g 3, color cake,
    position knife, remove cup):
      count p = 1, 2, 2: DQR = (1 + 0 + 0) / 3 = 1/3; DS = (1 + max(0, 1 - 1/1) + (1 - 1/3)) / 3 = 5/9.
      claims: [color person]; [color bus, color bus]; from the text of row 4 (no structured output):
      [color cake, remove cup]. Type tp = 1 + 1 + 2 = 4, claims 5, gold 5: TF1 = 0.8; category tp (multiset)
      = 1 + 1 + 2 = 4: CF1 = 0.8. DRF per item 1, 1/2 (the second bus is a quantity error), 1: 5/6.
      Only row 785 has the same / different pair: no / yes, not a contradiction (0.0); consistent claims
      (color person, both): consistency 1.0; yes_ratio_same 0.0.
    Official script, gold = the file (row 4 is skipped: no structured output):
      avg_num_recall = (1/1 + 2/1) / 2 = 1.5 (printed as "DQR"); TF1: color matched min(1,1) + min(2,1) = 2 of
      pred 3, gold 2: P 2/3, R 1, F1 0.8; CF1: matched 1 + 2 (both "bus" claims are found in the gold), pred 3,
      gold 2: P 1, R 1.5, F1 = 2 * 1.5 / 2.5 = 1.2.
    """
    _, _, build = hub
    path = tmp_path / "some-vlm_responses.json"
    path.write_text(json.dumps(OFFICIAL_RESPONSES))
    out = tmp_path / "score"
    assert main(["score", "spd-faith", "--dataset", str(build), "--predictions", str(path), "--out", str(out),
                 "--bootstrap", "0"]) == 0  # detected by its shape
    metrics = json.loads((out / "metrics.json").read_text())
    assert schema_errors("spd_faith_metrics", metrics) == []
    overall = metrics["overall"]
    assert overall["DQR"] == pytest.approx(1 / 3, abs=1e-6) and overall["DS"] == pytest.approx(5 / 9, abs=1e-6)
    assert overall["TF1"] == pytest.approx(0.8) and overall["CF1"] == pytest.approx(0.8)
    assert overall["DRF"] == pytest.approx(5 / 6, abs=1e-6)
    assert (overall["contradiction_rate"], overall["consistency_ratio"], overall["yes_ratio_same"]) == (0.0, 1.0, 0.0)
    official = metrics["official"]
    assert official["not_computable"] == {} and official["n_matched"] == 3
    assert official["gold_disagreements"] == [
        "responses[2] sample_id 4 (official-multi_diff-4): modifications ['color cake', 'position knife', "
        "'remove bottle'] in the file, ['color cake', 'position knife', 'remove cup'] in the dataset"]
    script = official["official_script"]
    assert (script["total_samples"], script["skipped_without_structured_output"]) == (2, 1)
    assert script["avg_num_recall"] == pytest.approx(1.5)
    assert script["TF1"]["f1"] == pytest.approx(0.8)
    assert (script["CF1"]["precision"], script["CF1"]["recall"], script["CF1"]["f1"]) == pytest.approx((1.0, 1.5, 1.2))
    report = (out / "report.md").read_text()
    assert "## Official SPD-Faith-Bench response file" in report
    assert "| DQR | 0.3333 | 1.5000 (printed as \"DQR (Avg Num Recall)\")" in report
    assert "| CF1 | 0.8000 | 1.2000 |" in report


def test_metrics_an_official_file_cannot_support_are_not_computable_not_zero(hub, tmp_path: Path) -> None:
    _, _, build = hub
    rows = [{"sample_id": r["sample_id"], "ground_truth": r["ground_truth"],
             "parsed_response": {"has_structured_output": False, "predicted_num": r["parsed_response"]["predicted_num"]}}
            for r in OFFICIAL_RESPONSES["responses"]]
    path = tmp_path / "counts_only.json"
    path.write_text(json.dumps({"model": "m", "responses": rows}))
    assert main(["score", "spd-faith", "--dataset", str(build), "--predictions", str(path), "--out",
                 str(tmp_path / "s"), "--bootstrap", "0", "--format", "official"]) == 0
    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text())
    blocked = metrics["official"]["not_computable"]
    assert sorted(blocked) == sorted(["TF1", "CF1", "DRF", "DRF_coverage", "contradiction_rate", "consistency_ratio",
                                      "yes_ratio_same"])
    assert all(metrics["overall"][m] is None for m in blocked)
    assert metrics["overall"]["DQR"] == pytest.approx(1 / 3, abs=1e-6)
    assert "not computable (no row has response_same and response_different" in (tmp_path / "s" / "report.md").read_text()


def test_an_official_row_that_matches_no_record_is_named(hub, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, _, build = hub
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"model": "m", "responses": [dict(OFFICIAL_RESPONSES["responses"][0], sample_id="99999")]}))
    assert main(["score", "spd-faith", "--dataset", str(build), "--predictions", str(path), "--out",
                 str(tmp_path / "s")]) != 0
    assert "responses[0] sample_id 99999: matches no record of the dataset" in capsys.readouterr().err


def test_old_adapter_cuts_a_decoded_canvas_right_and_refuses_a_file_name() -> None:
    from mmfaith.errors import MmfaithError
    from mmfaith.loaders import official_pair_view

    image = Image.open(FIXTURES / "medium_2006_1.jpg")
    view = official_pair_view({"qid": "2006_1", "image": image, "question": "Are the two pictures same?",
                               "modifications": [{"type": "color", "category": "bus"}]})
    first, second, _, _ = halves(canvas("medium_2006_1"), "top/bottom")
    assert np.array_equal(np.asarray(view.image_a), first) and np.array_equal(np.asarray(view.image_b), second)
    with pytest.raises(MmfaithError, match="not a decoded canvas; import the JSONL with `mmfaith build spd-faith "
                                           "--from-official"):
        official_pair_view({"qid": "100238_color", "image": "merged_images/100238_color.jpg", "modifications": []})


def test_what_the_official_release_leaves_unknown_is_refused_in_mmfaiths_own_builds(hub) -> None:
    _, _, build = hub
    multi = records(build)["official-multi_diff-4"]
    assert schema_errors("spd_faith_pair", multi) == []
    own = json.loads(json.dumps(multi))
    own["build"]["slot"] = "multi"  # the same record claimed as an mmfaith build
    errors = schema_errors("spd_faith_pair", own)
    assert any("outside_changed_pixels" in e for e in errors) and any("instance_count" in e for e in errors)
    assert any("bbox_after" in e for e in errors)  # the position's destination must be known


def test_annotation_tasks_are_made_for_imported_records_with_and_without_boxes(hub, tmp_path: Path) -> None:
    """Re-verification of an import: the Label Studio task data and outlines (no server needed)."""
    from mmfaith.annotation.spd_faith.tasks import outlines, task_data

    _, _, build = hub
    multi = records(build)["official-multi_diff-4"]
    data = task_data(multi, lambda rel: f"/data/{rel}", {})
    assert data["caption"].startswith("Three changes")
    assert data["planned"].splitlines()[1] == "2. position: knife, box before [270.0, 285.0, 140.0, 90.0]"
    assert not any(key.startswith("outlined") for key in data)  # no helper image: Label Studio draws the outlines
    with Image.open(build / multi["image_a"]) as image:
        width, height = image.size
    regions = {region["id"]: region for region in outlines(build, multi)}
    assert sorted(regions) == ["a1", "a2", "a3", "b1", "b2", "b3"]  # three differences, both images
    knife = regions["b2"]  # the import records no box after: B shows the box before, numbered 2, locked
    assert (knife["from_name"], knife["to_name"], knife["readonly"]) == ("outline_b", "outlined_b", True)
    assert knife["value"]["rectanglelabels"] == ["2"] and (knife["original_width"], knife["original_height"]) == (width, height)
    # percent of the image, by hand from the box [270, 285, 140, 90] px
    assert [knife["value"][k] for k in ("x", "y", "width", "height")] == pytest.approx(
        [270 / width * 100, 285 / height * 100, 140 / width * 100, 90 / height * 100])
    pixels = make_github_layout(tmp_path / "github")
    assert pixels and import_official(str(tmp_path / "github" / "spd_faith.jsonl"), tmp_path / "b").accepted == 4
    easy = records(tmp_path / "b")["official-easy-785_easy"]
    assert outlines(tmp_path / "b", easy) == []  # no boxes recorded: nothing outlined, no error
    assert task_data(easy, str, {})["planned"] == "1. color: person, colors not recorded, box not recorded"


FROM_HUB_ID = """
import json, sys
from pathlib import Path
from huggingface_hub import HfApi
api = HfApi(token="tok")
api.create_repo("Jackson-Lv/SPD-Faith-Bench", repo_type="dataset")
api.upload_folder(folder_path=sys.argv[1], repo_id="Jackson-Lv/SPD-Faith-Bench", repo_type="dataset")
from mmfaith.cli import main
sys.exit(main(["build", "spd-faith", "--from-official", "Jackson-Lv/SPD-Faith-Bench", "--out", "online"]))
"""
OFFLINE = """
import sys
from mmfaith.cli import main
sys.exit(main(["build", "spd-faith", "--from-official", "Jackson-Lv/SPD-Faith-Bench", "--out", "offline"]))
"""


def test_a_hub_id_is_downloaded_once_then_imported_offline(hub, tmp_path: Path) -> None:
    """The Hub-id path through huggingface_hub against the local fake Hub (tests/hub_server.py), then again
    with HF_HUB_OFFLINE=1 from the cache: the same bytes, the snapshot's commit recorded as the revision."""
    import os
    import subprocess
    import sys

    from tests.hub_server import FakeHub

    snapshot, _, folder_build = hub
    fake = FakeHub("tok").start()
    env = {**os.environ, "HF_ENDPOINT": fake.url, "HF_TOKEN": "tok", "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HOME": str(tmp_path / "hf"),
           "HF_DATASETS_CACHE": str(tmp_path / "hf-datasets"), "PYTHONPATH": str(Path(__file__).parent.parent.parent)}
    try:
        clean = tmp_path / "snapshot"
        clean.mkdir()
        for path in (p for p in snapshot.rglob("*") if p.is_file() and ".cache" not in p.parts):
            (clean / path.relative_to(snapshot)).parent.mkdir(parents=True, exist_ok=True)
            (clean / path.relative_to(snapshot)).write_bytes(path.read_bytes())
        online = subprocess.run([sys.executable, "-c", FROM_HUB_ID, str(clean)], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=300)
    finally:
        fake.stop()
    assert online.returncode == 0, online.stderr[-3000:]
    offline = subprocess.run([sys.executable, "-c", OFFLINE], capture_output=True, text=True,
                             env={**env, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path, timeout=300)
    assert offline.returncode == 0, offline.stderr[-3000:]
    assert tree_digest(tmp_path / "online") == tree_digest(tmp_path / "offline")
    found = records(tmp_path / "online")
    revision = found["official-easy-785"]["source"]["official"]["revision"]
    assert len(revision) == 40 and found["official-easy-785"]["source"]["official"]["origin"] == "hub"
    local = records(folder_build)
    for record_id, record in found.items():  # the same pixels and gold as the folder import
        assert (record["image_a_sha256"], record["differences"]) == (local[record_id]["image_a_sha256"],
                                                                    local[record_id]["differences"])


def test_without_a_dataset_the_files_own_ground_truth_is_the_gold(tmp_path: Path) -> None:
    """Hand-computed from the definitions, with the file's gold (row 4: color cake, position knife, remove
    bottle): DQR 1/3 and DS 5/9 as before; TF1 still 0.8 (types); CF1: category tp 1 + 1 + 1 (cup is not
    bottle) = 3 of 5 claims and 5 gold = 0.6; DRF per item 1, 1/2, 1/2 (remove cup vs remove bottle is a
    type-category mismatch) = 2/3. The CLI requires --dataset; this path is the library's."""
    from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith

    path = tmp_path / "r.json"
    path.write_text(json.dumps(OFFICIAL_RESPONSES))
    metrics = score_spd_faith(ScoreRequest(dataset=None, predictions=path, out=tmp_path / "s", n_bootstrap=0))
    assert schema_errors("spd_faith_metrics", metrics) == []
    overall = metrics["overall"]
    assert (overall["DQR"], overall["DS"]) == pytest.approx((1 / 3, 5 / 9), abs=1e-6)
    assert (overall["TF1"], overall["CF1"], overall["DRF"]) == pytest.approx((0.8, 0.6, 2 / 3), abs=1e-6)
    assert metrics["official"]["gold"] == "file" and metrics["official"]["gold_disagreements"] == []
    assert "scored against the file's own ground_truth" in (tmp_path / "s" / "report.md").read_text()


def test_an_official_response_file_is_told_from_predictions_jsonl_by_its_first_line(tmp_path: Path) -> None:
    """`looks_official` decides a predictions.jsonl from its first line (its whole text is never parsed: 300 MB held
    twice at 100,000 pairs); an official file, pretty-printed or on one line, is still recognised."""
    from mmfaith.evaluators.spd_faith.official_responses import looks_official

    official = {"model": "m", "responses": [{"sample_id": "1", "predicted_num": 1}]}
    cases = {"pretty.json": json.dumps(official, indent=2), "one-line.json": "\n" + json.dumps(official) + "\n",
             "predictions.jsonl": "".join(json.dumps({"id": f"spdf-{k}", "probe": "count", "response": "\\boxed{1}",
                                                      "model": "m"}) + "\n" for k in range(3)),
             "one-line-then-more.jsonl": json.dumps(official) + "\n" + json.dumps(official) + "\n",
             "list.json": "[1, 2]\n", "empty.jsonl": "\n\n", "not-json.txt": "{ responses\n"}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    assert {name: looks_official(tmp_path / name) for name in cases} == {
        "pretty.json": True, "one-line.json": True, "predictions.jsonl": False, "one-line-then-more.jsonl": False,
        "list.json": False, "empty.jsonl": False, "not-json.txt": False}
