"""`mmfaith run spd-faith --perturb blocks:RATIO`: both images of a pair shown with the same seeded
blocks masked (the shared masking operation), recorded in run.json's resume fields and in every
line's meta (source hashes and transform); scored per ratio; `mmfaith report` plots DS and DQR
against the masked share. The model is a real local HTTP server (tests/chat_server.py): the
reference models resolve pairs by their stored images, which a perturbed run never shows."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.builders.masks import BlockPerturbation
from mmfaith.cli import main
from mmfaith.evaluators.image_payload import decode_png
from mmfaith.images import png_bytes, sha256_bytes
from mmfaith.loaders.spd_faith import open_spd_dataset
from tests.chat_server import ChatServer, request_images

ANSWER = "I see one change.\n```json\n[]\n```\n\\boxed{1}"
MODEL = ["--model", "test-model"]


def _run(build: Path, out: Path, server: ChatServer, *extra: str) -> int:
    return main(["run", "spd-faith", "--dataset", str(build), *MODEL, "--base-url", server.openai_base_url,
                 "--out", str(out), "--no-progress", "--limit", "3", *extra])


def test_perturbed_run_shows_masked_images_and_records_them(mixed_build: Path, tmp_path: Path) -> None:
    pairs = open_spd_dataset(mixed_build).pairs[:3]
    with ChatServer(default=ANSWER) as server:
        assert _run(mixed_build, tmp_path / "half", server, "--perturb", "blocks:0.5", "--seed", "3") == 0
        shown = [image for request in server.requests if request.protocol == "openai" and request.body
                 for _, image in request_images(request.body)]
        with pytest.raises(SystemExit):  # argparse refuses a ratio outside [0, 1]
            _run(mixed_build, tmp_path / "bad", server, "--perturb", "blocks:1.5")
        assert _run(mixed_build, tmp_path / "half", server, "--perturb", "blocks:0.75", "--seed", "3") == 2
    run = json.loads((tmp_path / "half" / "run.json").read_text())
    perturb = {"kind": "blocks", "ratio": 0.5, "seed": 3, "grid": 8, "style": "black"}
    assert run["perturb"] == perturb
    stored = {p.record["image_a_sha256"] for p in pairs} | {p.record["image_b_sha256"] for p in pairs}
    assert not {sha256_bytes(image) for image in shown} & stored  # the stored images were never sent
    lines = [json.loads(line) for line in (tmp_path / "half" / "predictions.jsonl").read_text().splitlines()]
    transform = BlockPerturbation(0.5, 3).transform
    for pair in pairs:
        line = next(l for l in lines if l["id"] == pair.id and l["probe"] == "same")
        assert line["meta"]["perturb"] == perturb
        first, second = line["meta"]["images"]
        assert first["sources"] == [pair.record["image_a_sha256"]] and first["transform"] == transform
        assert second["sources"] == [pair.record["image_b_sha256"]]
        # what was sent is the stored image with the pair's blocks masked, the same blocks on both
        expected = [BlockPerturbation(0.5, 3).apply(decode_png(path.read_bytes()), pair.id)
                    for path in (pair.image_a_path, pair.image_b_path)]
        assert [first["sha256"], second["sha256"]] == [sha256_bytes(png_bytes(e)) for e in expected]
        originals = [decode_png(path.read_bytes()) for path in (pair.image_a_path, pair.image_b_path)]
        black = [(e == 0).all(axis=-1) for e in expected]
        blackened = [b & (o != 0).any(axis=-1) for b, o in zip(black, originals)]
        assert not (blackened[0] & ~black[1]).any() and not (blackened[1] & ~black[0]).any()  # the same blocks
        assert 0.45 <= black[0].mean() <= 0.6  # 32 of the 64 blocks, plus the photo's own black pixels
    sent = {sha256_bytes(image) for image in shown}
    assert sent == {image["sha256"] for line in lines for image in line["meta"]["images"]}


def test_scores_per_ratio_and_the_perturbation_plot(mixed_build: Path, tmp_path: Path) -> None:
    with ChatServer(default=ANSWER) as server:
        assert _run(mixed_build, tmp_path / "r0", server) == 0
        assert _run(mixed_build, tmp_path / "r50", server, "--perturb", "blocks:0.5") == 0
    for name in ("r0", "r50"):
        assert main(["score", "spd-faith", "--dataset", str(mixed_build), "--predictions",
                     str(tmp_path / name / "predictions.jsonl"), "--from-run", "--out", str(tmp_path / f"s{name}"),
                     "--bootstrap", "20"]) == 0
    unperturbed = json.loads((tmp_path / "sr0" / "metrics.json").read_text())["provenance"]
    perturbed = json.loads((tmp_path / "sr50" / "metrics.json").read_text())["provenance"]
    assert "perturb" not in unperturbed and perturbed["perturb"]["ratio"] == 0.5
    assert main(["report", str(tmp_path / "sr0"), str(tmp_path / "sr50"), "--out", str(tmp_path / "report"),
                 "--bootstrap", "20"]) == 0
    from mmfaith.evaluators.plots import figure_texts
    from mmfaith.evaluators.spd_faith.report import perturbation_figure

    texts = figure_texts(perturbation_figure([json.loads((tmp_path / n / "metrics.json").read_text())
                                               for n in ("sr0", "sr50")]))
    assert "masked share of each image" in texts and "DS test-model" in texts and "DQR test-model" in texts
    assert (tmp_path / "report" / "perturbation.png").is_file()
