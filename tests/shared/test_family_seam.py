"""The family seam: a family defined only in this test runs and scores through the shared code.

"toy" has one record kind (an image and a yes/no question), one independent probe (`look`), one
metric (accuracy) and two reference models (oracle: the gold answer; blind: always "no"). It is
registered with `mmfaith.families.register` and then driven through the real CLI verbs and the
real reference server over HTTP: nothing in the shared code knows it. "toy-zoom" adds a
multi-turn plan whose second turn carries a crop made from the first answer. Also: the registry's own
listing (`mmfaith families`, `build --help`, `run --help`) and SPD-Faith's declarations.
"""
from __future__ import annotations

import argparse
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from mmfaith import families
from mmfaith.cli import main
from mmfaith.evaluators.image_payload import DerivedImage
from mmfaith.evaluators.reference_server import ReferenceServer, RequestRefused
from mmfaith.evaluators.run_engine import ItemAsker, PredictionLog, Turn
from mmfaith.families import Family, FamilyParts, MetricInfo, ProbeInfo
from mmfaith.images import ImageRef, png_bytes, sha256_bytes


@dataclass(frozen=True)
class ToyItem:
    id: str
    source_key: str
    image: ImageRef
    question: str
    answer: str


@dataclass(frozen=True)
class ToyDataset:
    items: list[ToyItem]
    dataset_id: str
    revision: str


def open_toy(source: Path | str) -> ToyDataset:
    folder = Path(source)
    items = []
    for line in (folder / "items.jsonl").read_text().splitlines():
        record = json.loads(line)
        path = folder / record["image"]
        items.append(ToyItem(record["id"], record["image"], ImageRef(sha256_bytes(path.read_bytes()), path),
                             record["question"], record["answer"]))
    return ToyDataset(items, str(folder), "local")


class LookPlan:
    def expected_probes(self, item: ToyItem) -> tuple[str, ...]:
        return ("look",)

    def images(self, item: ToyItem) -> list[ImageRef]:
        return [item.image]

    def resume_settings(self) -> dict[str, Any]:
        return {"prompt": "toy/1"}

    def provenance(self) -> dict[str, Any]:
        return {}

    def shows(self, item: ToyItem) -> dict[str, Any]:
        return {"images": [item.image.sha256], "question": item.question}

    async def run_item(self, item: ToyItem, asker: ItemAsker) -> None:
        if asker.pending("look"):
            await asker.ask("look", [Turn("user", (item.image, item.question))], {})


class ToyReference:
    def __init__(self, name: str, dataset: ToyDataset) -> None:
        self.name = name
        self._by_image = {item.image.sha256: item for item in dataset.items}

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str:
        item = self._by_image.get(sha256_bytes(images[0])) if len(images) == 1 else None
        if item is None or item.question not in text:
            raise RequestRefused(400, "not a toy item")
        return item.answer if self.name == "oracle" else "no"


def toy_score(args: argparse.Namespace) -> int:
    dataset = open_toy(args.dataset)
    log = PredictionLog(args.predictions)
    right = [log.answered.get((item.id, "look", 0), {}).get("response") == item.answer for item in dataset.items]
    args.out.mkdir(parents=True, exist_ok=True)
    metrics = {"overall": {"accuracy": sum(right) / len(right)}, "provenance": {"family": "toy"}}
    (args.out / "metrics.json").write_text(json.dumps(metrics))
    return 0


TOY = Family(
    name="toy", title="Toy", summary="a yes/no question about one image", record_kinds=("toy_item",),
    probes=(ProbeInfo("look", "the question about the image"),),
    metrics=(MetricInfo("accuracy", "accuracy", "share of right answers", "higher", (0.0, 1.0), "this test"),),
    reference_models=(("oracle", "the gold answer"), ("blind", "always no")),
    parts_source=FamilyParts(open_dataset=open_toy, add_run_options=lambda parser: None,
                             probe_plan=lambda options: LookPlan(), add_score_options=lambda parser: None,
                             score=toy_score, reference_model=ToyReference),
    builds=False)


@pytest.fixture()
def toy(tmp_path: Path) -> Path:
    """A registered toy family and a dataset of three items (answers yes, no, yes) on distinct images."""
    folder = tmp_path / "toy-data"
    (folder / "images").mkdir(parents=True)
    lines = []
    for number, answer in enumerate(("yes", "no", "yes")):
        pixels = np.full((16, 16, 3), 40 * number, dtype=np.uint8)
        (folder / "images" / f"{number}.png").write_bytes(png_bytes(pixels))
        lines.append(json.dumps({"id": f"toy-{number}", "image": f"images/{number}.png",
                                 "question": f"Is picture {number} bright?", "answer": answer}))
    (folder / "items.jsonl").write_text("\n".join(lines) + "\n")
    families.register(TOY)
    yield folder
    families.unregister("toy")


def test_a_family_defined_outside_the_package_runs_and_scores_over_http(toy: Path, tmp_path: Path) -> None:
    dataset = open_toy(toy)
    accuracy = {}
    for model in ("oracle", "blind"):
        with ReferenceServer(dataset, model, family="toy") as server:
            run_dir, score_dir = tmp_path / f"run-{model}", tmp_path / f"score-{model}"
            assert main(["run", "toy", "--dataset", str(toy), "--model", model, "--base-url", server.base_url,
                         "--out", str(run_dir), "--no-progress"]) == 0
            assert server.requests_seen == 3
            # a second run resumes: nothing is asked again
            assert main(["run", "toy", "--dataset", str(toy), "--model", model, "--base-url", server.base_url,
                         "--out", str(run_dir), "--no-progress"]) == 0
            assert server.requests_seen == 3
        lines = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
        assert sorted(line["id"] for line in lines) == ["toy-0", "toy-1", "toy-2"]
        assert {line["probe"] for line in lines} == {"look"}
        run = json.loads((run_dir / "run.json").read_text())
        assert run["family"] == "toy" and run["prompt"] == "toy/1" and run["counts"]["answered"] == 3
        assert main(["score", "toy", "--dataset", str(toy), "--predictions", str(run_dir / "predictions.jsonl"),
                     "--out", str(score_dir)]) == 0
        accuracy[model] = json.loads((score_dir / "metrics.json").read_text())["overall"]["accuracy"]
    # By hand: the oracle answers every gold; blind says "no", right only on toy-1 (gold no): 1 of 3.
    assert accuracy == {"oracle": 1.0, "blind": pytest.approx(1 / 3)}


def test_a_run_dir_of_another_family_is_refused(toy: Path, tmp_path: Path, mixed_build: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    dataset = open_toy(toy)
    with ReferenceServer(dataset, "oracle", family="toy") as server:
        assert main(["run", "toy", "--dataset", str(toy), "--model", "oracle", "--base-url", server.base_url,
                     "--out", str(tmp_path / "r"), "--no-progress"]) == 0
    assert main(["run", "spd-faith", "--dataset", str(mixed_build), "--model", "oracle", "--base-url",
                 server.base_url, "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    assert "field 'family' is 'toy'" in capsys.readouterr().err


def test_families_are_listed_by_the_verbs(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["families", "--json"]) == 0
    listed = {family["name"]: family for family in json.loads(capsys.readouterr().out)}
    assert {"spd-faith", "vfaith", "crm", "mcot", "toy"} <= set(listed)  # the package's families and the test's own
    spd = listed["spd-faith"]
    assert [probe["name"] for probe in spd["probes"]] == ["same", "different", "count", "describe"]
    assert {"DS", "DQR", "TF1", "CF1", "contradiction_rate", "consistency_ratio", "DRF"} <= {
        metric["key"] for metric in spd["metrics"]}
    assert [model["name"] for model in spd["reference_models"]] == ["oracle", "blind", "pixel-diff", "prior"]
    for verb in ("build", "run", "score"):
        with pytest.raises(SystemExit):
            main([verb, "--help"])
        shown = capsys.readouterr().out
        assert "spd-faith" in shown and ("toy" in shown) == (verb != "build")  # toy has no builder


def test_every_spd_metric_in_metrics_json_is_declared(mixed_build: Path, tmp_path: Path) -> None:
    """Reports read metric descriptions from the declaration: every headline key must have one."""
    from mmfaith.evaluators.spd_faith.metrics import CI_METRICS

    declared = {metric.key for metric in families.get("spd-faith").metrics}
    assert set(CI_METRICS) <= declared
    for metric in families.get("spd-faith").metrics:
        assert metric.better in ("higher", "lower", "neither") and metric.doc.startswith("docs/")


def test_an_unknown_family_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "o"), "--family", "nope"]) == 2
    assert "unknown family 'nope'" in capsys.readouterr().err


class ZoomPlan(LookPlan):
    """A multi-turn plan: the model names a box, the plan crops it and sends the crop back in a second
    turn (a derived image made from an answer), asked at another temperature; the final answer is a
    dependent probe of the first."""

    def expected_probes(self, item: ToyItem) -> tuple[str, ...]:
        return ("zoom", "final")

    async def run_item(self, item: ToyItem, asker: ItemAsker) -> None:
        first = [Turn("user", (item.image, item.question + " Name a box to zoom into."))]
        zoom = asker.answered("zoom") or await asker.ask("zoom", first, {}, priority=1)
        if zoom["response"] is None:
            await asker.fail("final", {}, "not asked: zoom failed")
            return
        x, y, w, h = (int(v) for v in zoom["response"].split()[1:])
        crop = DerivedImage(key=f"crop:{item.image.sha256}:{x},{y},{w},{h}", sources=(item.image,),
                            transform=f"crop {x},{y},{w},{h}",
                            make=lambda: png_bytes(np.asarray(Image.open(item.image.path))[y:y + h, x:x + w]),
                            size=lambda: (w, h))
        turns = [*first, Turn("assistant", (zoom["response"],)), Turn("user", (crop, "Now answer."))]
        await asker.ask("final", turns, {"box": [x, y, w, h]}, priority=0, temperature=0.2)


class ZoomReference(ToyReference):
    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str:
        item = self._by_image.get(sha256_bytes(images[0])) if images else None
        if item is None:
            raise RequestRefused(400, "not a toy item")
        if len(images) == 1:
            return "zoom 2 4 8 6"
        crop = np.asarray(Image.open(io.BytesIO(images[1])))
        assert crop.shape[:2] == (6, 8) and body["temperature"] == 0.2
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        return item.answer


def test_a_multi_turn_plan_sends_crops_made_from_answers(toy: Path, tmp_path: Path) -> None:
    zoom_family = Family(
        name="toy-zoom", title="Toy zoom", summary="zoom, then answer", record_kinds=("toy_item",),
        probes=(ProbeInfo("zoom", "a box"), ProbeInfo("final", "the answer after the crop")),
        metrics=TOY.metrics, reference_models=TOY.reference_models,
        parts_source=FamilyParts(open_dataset=open_toy, add_run_options=lambda parser: None,
                                 probe_plan=lambda options: ZoomPlan(), add_score_options=lambda parser: None,
                                 score=toy_score, reference_model=ZoomReference))
    families.register(zoom_family)
    try:
        with ReferenceServer(open_toy(toy), "oracle", family="toy-zoom") as server:
            assert main(["run", "toy-zoom", "--dataset", str(toy), "--model", "oracle", "--base-url",
                         server.base_url, "--out", str(tmp_path / "r"), "--no-progress"]) == 0
            assert server.requests_seen == 6
    finally:
        families.unregister("toy-zoom")
    lines = {(line["id"], line["probe"]): line for line in
             map(json.loads, (tmp_path / "r" / "predictions.jsonl").read_text().splitlines())}
    final = lines[("toy-1", "final")]
    assert final["response"] == "no" and final["meta"]["box"] == [2, 4, 8, 6]
    original, crop = final["meta"]["images"]
    source = open_toy(toy).items[1].image.sha256
    assert original == {"sha256": source}
    assert crop["sources"] == [source] and crop["transform"] == "crop 2,4,8,6" and crop["sha256"] != source
