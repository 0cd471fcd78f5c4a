"""VFaith's cue-driven path end to end against a local server speaking the real wire protocols
(tests/cue_server.py): chat completions for the reasoner, suggester and judge, multipart
/v1/images/edits (OpenAI) and generateContent (Gemini) for the editor, which paints real pixels.
A garbage suggestion is recorded and skipped, a failed judge verdict retried, an editor 500 retried."""
from __future__ import annotations

import json
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from mmfaith.builders.colors import COLOR_PROTOTYPES_RGB, object_color
from mmfaith.cli import main
from mmfaith.images import read_rgb
from mmfaith.schema import schema_errors
from tests.conftest import read_records
from tests.cue_server import CueServer, square_box

COLORS = ("red", "blue", "green", "yellow")


@pytest.fixture()
def squares(tmp_path: Path) -> Path:
    """A parquet VQA set: a coloured square on gray; "What color is the square?" with four options."""
    rows = []
    for number, color in enumerate(("red", "green", "blue")):
        pixels = np.full((96, 128, 3), 128, dtype=np.uint8)
        pixels[20 + number * 5:60 + number * 5, 30:80] = COLOR_PROTOTYPES_RGB[color]
        rows.append({"img": Image.fromarray(pixels), "q": f"What color is square {number}?", "choices": list(COLORS),
                     "gold": COLORS.index(color), "cat": "RWS"})
    path = tmp_path / "squares.parquet"
    datasets.Dataset.from_list(rows, features=datasets.Features({
        "img": datasets.Image(), "q": datasets.Value("string"), "choices": datasets.List(datasets.Value("string")),
        "gold": datasets.Value("int64"), "cat": datasets.Value("string")})).to_parquet(str(path))
    return path


def _build(squares: Path, server: CueServer, out: Path, editor: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    roles = []
    for role in ("reasoner", "suggester", "judge"):
        roles += [f"--{role}-model", "m", f"--{role}-base-url", server.url + "/v1"]
    return main(["build", "vfaith", "--source", str(squares), "--columns",
                 "image=img,question=q,options=choices,answer=gold,category=cat", *roles, "--editor", editor,
                 "--editor-model", "gpt-image-1" if editor == "openai" else "gemini-2.5-flash-image",
                 "--editor-base-url", server.url + ("/v1" if editor == "openai" else ""), "--out", str(out),
                 "--no-progress"])


@pytest.mark.parametrize("editor", ["openai", "gemini"])
def test_the_cue_driven_path_makes_pairs_whose_edit_flips_the_answer(squares: Path, tmp_path: Path, editor: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "build"
    with CueServer(garbage_suggestions={"What color is square 0?"}, failing_judgements={"What color is square 1?"},
                   edit_failures=1) as server:
        assert _build(squares, server, out, editor, monkeypatch) == 0
        seen = [protocol for _, protocol in server.requests]
    edits = "openai-images-edits" if editor == "openai" else "gemini"
    assert seen.count(edits) == 4  # three rows, the first call answered 500 and retried
    records = read_records(out)
    assert len(records) == 3
    for record in records:
        assert schema_errors("vfaith_pair", record) == []
        options = {o["label"]: o["text"] for o in record["options"]}
        original, edited = read_rgb(out / record["image_original"], 10**8), read_rgb(out / record["image_edited"], 10**8)
        assert edited.shape == original.shape  # the 512 x 512 answer was resized back
        x, y, w, h = square_box(original)
        mask = np.zeros(original.shape[:2], dtype=bool)
        mask[y:y + h, x:x + w] = True
        assert object_color(original, mask).name == options[record["answer_original"]]
        assert object_color(edited, mask).name == options[record["answer_edited"]] != options[record["answer_original"]]
        gates = record["build"]["gates"]
        assert gates["outside_changed_share"] <= gates["outside_tolerance"] == 0.05 and gates["resized_from"] == [512, 512]
        assert record["edit"]["editor"]["name"] == editor and record["visual_cues"][0]["bbox"] == [x, y, w, h]
    attempts = {r["question"]: [a["verdict"] for a in r["edit"]["attempts"]] for r in records}
    assert attempts == {"What color is square 0?": ["unparsable", "pass"], "What color is square 1?": ["fail", "pass"],
                        "What color is square 2?": ["pass"]}
    perception = read_records(out, "perception.jsonl")
    assert len(perception) == 3 and all(len(p["answers"]) == 3 for p in perception)
    info = json.loads((out / "build.json").read_text())
    assert info["status"] == "complete" and info["recipe"]["path"] == "cue-driven"
    assert "sk-test" not in (out / "records.jsonl").read_text()


def test_a_row_is_rejected_after_five_failed_suggestions_and_a_rerun_resumes(squares: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "build"

    class Stubborn(CueServer):
        def chat(self, text: str, image: bytes) -> str:
            return "FAIL: never." if "PASS or FAIL" in text else super().chat(text, image)

    with Stubborn() as server:
        assert _build(squares, server, out, "openai", monkeypatch) == 0
    rejected = read_records(out, "rejected.jsonl")
    assert [r["stage"] for r in rejected] == ["suggestion"] * 3
    assert [a["verdict"] for a in rejected[0]["attempts"]] == ["fail"] * 5
    with CueServer() as server:  # a re-run skips the journaled rows
        assert _build(squares, server, out, "openai", monkeypatch) == 0
        assert server.requests == []
