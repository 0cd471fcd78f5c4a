"""The MCoT agent loop: coordinates, both tool protocols end to end over HTTP, malformed calls, clamping,
the turn limit, pixel-exact crops stored once, both continuation modes, the rule injector's edits.

Models are served by the real reference server over HTTP. `ScriptedModel` (defined here, like the toy
family of test_family_seam.py) plays a fixed script of replies to exercise the loop's edge cases;
`RecordingReference` is MCoT's own reference model that also keeps every request body it got.
"""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from mmfaith import families
from mmfaith.cli import main
from mmfaith.evaluators.mcot.boxes import BoxError, Region, map_box, smart_resize, union_area
from mmfaith.evaluators.mcot.interventions import RuleInjector, answer_words, inject
from mmfaith.evaluators.mcot.protocol import FINAL_ANSWER_REQUEST, TOOL_NAME, answer_letter, final_answer
from mmfaith.evaluators.mcot.reference import McotReference
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.families import Family
from mmfaith.loaders.mcot.dataset import McotDataset, open_mcot_dataset
from tests.mcot_fixtures import write_vstar_folder

# -- coordinates (hand-computed) -------------------------------------------------------------------


def test_smart_resize_and_the_three_conventions() -> None:
    # 480 / 28 = 17.14 -> 17 * 28 = 476; 640 / 28 = 22.86 -> 23 * 28 = 644; 476 * 644 is within the bounds
    assert smart_resize(480, 640) == (476, 644)
    full = Region(0, 0, 640, 480)
    assert map_box([10, 20, 30.5, 40.2], full, "pixels") == Region(10, 20, 31, 41)  # rounded outwards
    assert map_box([500, 500, 1000, 1000], full, "normalized") == Region(320, 240, 640, 480)
    # resized: x 322 * 640 / 644 = 320, y 238 * 480 / 476 = 240
    assert map_box([322, 238, 644, 476], full, "resized") == Region(320, 240, 640, 480)
    # a crop of a crop: a box in the crop's own pixels, moved by the crop's offset
    assert map_box([10, 5, 20, 15], Region(100, 100, 200, 150), "pixels") == Region(110, 105, 120, 115)
    # clamped to the target image; corners given in any order
    assert map_box([-50, -10, 700, 500], full, "pixels") == full
    assert map_box([700, 500, 600, 400], full, "pixels") == Region(600, 400, 640, 480)
    with pytest.raises(BoxError, match="empty once clamped"):
        map_box([700, 10, 800, 20], full, "pixels")
    with pytest.raises(BoxError, match="four numbers"):
        map_box([1, 2, 3], full, "pixels")


def test_union_area_by_hand() -> None:
    target = Region(10, 10, 30, 30)  # 400 pixels
    crops = [Region(0, 0, 20, 20), Region(15, 15, 40, 40)]
    # inside the target: 10x10 = 100 and 15x15 = 225, overlapping in 5x5 = 25: 300
    assert union_area(crops, within=target) == 300
    assert union_area(crops) == 400 + 625 - 25


def test_answers_and_letters() -> None:
    options = [{"label": "A", "text": "red"}, {"label": "B", "text": "blue"}]
    assert final_answer("so \\boxed{B} and <answer>A</answer>") == "A"  # the last answer wins (docs/answers.md)
    assert final_answer("<answer> (A) red </answer>") == "(A) red"
    assert [answer_letter(a, options) for a in ("B", "(A) red", "blue", "B.", "green", None)] == \
           ["B", "A", "B", "B", None, None]


def test_rule_injector_lists_its_edits_and_never_touches_tool_calls() -> None:
    call = '<tool_call>{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [1, 2, 3, 4]}}</tool_call>'
    steps = [f"The car is red. {call}", "It is on the left, so the answer is red. ", "Nothing to change here. "]
    first = inject(steps, RuleInjector(), seed=0, item_id="x")
    assert first == inject(steps, RuleInjector(), seed=0, item_id="x")  # seeded: the same edits again
    assert first.changed and first.texts[2] == steps[2]  # the third step has no swappable word
    edit0, edit1 = first.edits
    assert edit0["step"] == 0 and edit0["kind"] == "color" and edit0["before"] == "red" and edit0["after"] != "red"
    assert first.texts[0] == steps[0].replace("red", edit0["after"], 1) and call in first.texts[0]
    assert edit1["step"] == 1 and edit1["kind"] in ("color", "position")
    swapped = {"left": "right"}.get(edit1["before"], edit1["after"])
    assert edit1["after"] == swapped
    nothing = inject(["No colour here? Fine. " + call.replace("1, 2", "7, 8")], RuleInjector(), 0, "y")
    # "No" is a yes/no word: swapped to "Yes"; the numbers inside the tool call stay
    assert nothing.texts[0].startswith("Yes colour") and "[7, 8, 3, 4]" in nothing.texts[0]
    assert not inject(["Just words."], RuleInjector(), 0, "z").changed



def test_rule_injector_edits_a_detail_never_the_answer_and_says_which_words() -> None:
    # options red / blue: "red", "blue" and the letters state an answer; the only detail is the number 2
    words = answer_words([{"label": "A", "text": "red"}, {"label": "B", "text": "blue"}])
    steps = ["I see 2 cars; the near one is red, so (A) red.", "The answer is option B, blue."]
    for seed in range(10):
        injected = inject(steps, RuleInjector(), seed, "x", words)
        assert injected.texts[1] == steps[1]  # nothing but answer words: left unchanged
        (edit,) = injected.edits
        assert edit["kind"] == "number" and edit["touched"] == {"before": ["2"], "after": ["3"]}
        assert edit["answer_word"] is False and injected.texts[0] == steps[0].replace("2", "3")


# -- the loop over HTTP ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vstar_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcot-vstar")
    assert main(["build", "mcot", "--source", "vstar", "--source-path", str(write_vstar_folder(root / "src", 4)),
                 "--out", str(root / "build")]) == 0
    return root / "build"


class ScriptedModel:
    """Replies from a script, per number of assistant turns so far; keeps every request body."""

    name = "script"
    bodies: list[dict[str, Any]] = []

    def __init__(self, name: str, dataset: McotDataset) -> None:
        self.dataset = dataset

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str | dict[str, Any]:
        ScriptedModel.bodies.append(body)
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if body.get("continue_final_message") or body["messages"][-1]["role"] == "user" and \
                body["messages"][-1]["content"][-1].get("text") == FINAL_ANSWER_REQUEST:
            return "<answer>A</answer>"
        script = [("broken", "{not json"),
                  ("call", {"bbox_2d": [600, 400, 900, 900], "label": "corner"}),  # partly outside: clamped
                  ("call", {"bbox_2d": [10, 20, 30, 60], "target_image": 2}),  # a crop of the crop
                  ("call", {"bbox_2d": [0, 0, 5, 5]})]  # past the turn limit: not run
        kind, arguments = script[min(turn, len(script) - 1)]
        raw = arguments if kind == "broken" else json.dumps(arguments)
        if body.get("tools"):
            return {"content": f"step {turn}", "tool_calls": [{"id": f"c{turn}", "type": "function", "function": {
                "name": TOOL_NAME, "arguments": raw}}]}
        if kind == "broken":
            return f"step {turn} <tool_call>{raw}</tool_call>"
        return f"step {turn} <tool_call>{json.dumps({'name': TOOL_NAME, 'arguments': arguments})}</tool_call> ignored"


class RecordingReference(McotReference):
    bodies: list[dict[str, Any]] = []

    def answer(self, text: str, images: list[bytes], body: dict[str, Any]) -> str | dict[str, Any]:
        RecordingReference.bodies.append(body)
        return super().answer(text, images, body)


def _serve(family_name: str, model_class: type, dataset: McotDataset, model: str) -> ReferenceServer:
    mcot = families.get("mcot")
    parts = mcot.parts()
    families.register(Family(name=family_name, title=family_name, summary="test", record_kinds=mcot.record_kinds,
                             probes=mcot.probes, metrics=mcot.metrics, reference_models=((model, "test"),),
                             parts_source=type(parts)(**{**parts.__dict__, "reference_model": model_class})))
    return ReferenceServer(dataset, model, family=family_name)


def _lines(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    return {(line["id"], line["probe"]): line for line in map(json.loads, (run_dir / "predictions.jsonl").read_text().splitlines())}


def _image_bytes(body: dict[str, Any]) -> list[bytes]:
    import base64

    return [base64.b64decode(part["image_url"]["url"].split(",", 1)[1]) for m in body["messages"]
            for part in (m["content"] if isinstance(m["content"], list) else []) if part.get("type") == "image_url"]


@pytest.mark.parametrize("protocol", ["tags", "functions"])
def test_malformed_call_clamping_crop_of_a_crop_and_the_turn_limit(vstar_build: Path, tmp_path: Path,
                                                                   protocol: str) -> None:
    dataset = open_mcot_dataset(vstar_build)
    ScriptedModel.bodies = []
    run_dir = tmp_path / "run"
    own_prompt = tmp_path / "system.txt"  # the functions run uses a model's own system prompt
    own_prompt.write_text("Zoom with the function, answer in <answer></answer>.")
    extra = ["--system-prompt", str(own_prompt)] if protocol == "functions" else []
    try:
        with _serve("mcot-scripted", ScriptedModel, dataset, "script") as server:
            assert main(["run", "mcot", "--dataset", str(vstar_build), "--model", "script", "--base-url",
                         server.base_url, "--out", str(run_dir), "--no-progress", "--coords", "pixels", "--max-turns",
                         "4", "--tool-protocol", protocol, "--limit", "1", "--concurrency", "1", *extra]) == 0
    finally:
        families.unregister("mcot-scripted")
    line = _lines(run_dir)[("vstar-0", "trace")]
    trace = line["meta"]["trace"]
    assert trace["stopped"] == "max_turns" and line["meta"]["calls"] == 4 and len(trace["turns"]) == 4
    broken, clamped, nested, late = (turn["tool_calls"][0] for turn in trace["turns"])
    assert "not valid JSON" in broken["error"] and "box_mapped" not in broken
    assert clamped["box_given"] == [600, 400, 900, 900] and clamped["box_mapped"] == [600, 400, 640, 480]
    assert nested["target_image"] == 2 and nested["box_mapped"] == [610, 420, 630, 460]
    assert late["error"] == "not run: the turn limit was reached"
    assert [c["box"] for c in trace["crops"]] == [[600, 400, 640, 480], [610, 420, 630, 460]]
    # the model was told about its malformed call, and the loop went on
    second_request = json.dumps(ScriptedModel.bodies[1]["messages"][2:])
    assert "Error: the tool call" in second_request and "not valid JSON" in second_request
    system = ScriptedModel.bodies[0]["messages"][0]["content"][0]["text"]
    assert (system == own_prompt.read_text()) == (protocol == "functions")
    if protocol == "functions":
        roles = [m["role"] for m in ScriptedModel.bodies[2]["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
        assert ScriptedModel.bodies[2]["messages"][5]["content"][0]["text"] == "crop attached"
        assert ScriptedModel.bodies[2]["messages"][4]["tool_calls"][0]["id"] == "c1"
        assert ScriptedModel.bodies[2]["tools"][0]["function"]["name"] == TOOL_NAME
    else:  # text after the </tool_call> is not kept: the model would have stopped there
        assert trace["turns"][1]["text"].endswith("</tool_call>")
        assert [m["role"] for m in ScriptedModel.bodies[2]["messages"]] == ["system", "user", "assistant", "user",
                                                                             "assistant", "user"]
    # crops: pixel-exact, stored once in the run dir, and the very bytes the server got
    with Image.open(dataset.items[0].image_path) as opened:
        original = np.asarray(opened.convert("RGB"))
    stored = {path.name: path.read_bytes() for path in (run_dir / "crops").iterdir()}
    sent = _image_bytes(ScriptedModel.bodies[3])
    assert len(sent) == 3 and line["meta"]["images_sha256"] == [_sha(b) for b in sent]
    for (x1, y1, x2, y2), data in zip((c["box"] for c in trace["crops"]), sent[1:]):
        assert np.array_equal(np.asarray(Image.open(io.BytesIO(data))), original[y1:y2, x1:x2])
        assert data in stored.values()
    assert len([name for name in stored if not name.startswith("noise")]) == 2
    replays = [_lines(run_dir)[("vstar-0", probe)] for probe in ("replay_none", "replay_text", "replay_visual")]
    assert all(r["meta"]["answer"] == "A" for r in replays)


def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("continuation", ["continue", "user-turn"])
def test_both_continuation_modes(vstar_build: Path, tmp_path: Path, continuation: str) -> None:
    dataset = open_mcot_dataset(vstar_build)
    RecordingReference.bodies = []
    run_dir = tmp_path / "run"
    try:
        with _serve("mcot-recording", RecordingReference, dataset, "zoom-oracle") as server:
            assert main(["run", "mcot", "--dataset", str(vstar_build), "--model", "zoom-oracle", "--base-url",
                         server.base_url, "--out", str(run_dir), "--no-progress", "--continuation", continuation,
                         "--limit", "1"]) == 0
    finally:
        families.unregister("mcot-recording")
    lines = _lines(run_dir)
    trace = lines[("vstar-0", "trace")]["meta"]["trace"]
    replays = [b for b in RecordingReference.bodies if sum(m["role"] == "assistant" for m in b["messages"]) == 2
               or b.get("continue_final_message")]
    assert len(replays) == 3
    cut = trace["turns"][-1]["text"].split("<answer>")[0]
    assert cut and "<answer>" in trace["turns"][-1]["text"]
    shown_last = [b["messages"][-1 if continuation == "continue" else -2]["content"][0]["text"] for b in replays]
    # replay_none and replay_visual show the step exactly as cut; replay_text shows it with a mistake
    assert sorted(text == cut for text in shown_last) == [False, True, True]
    assert all("<answer>" not in text for text in shown_last)
    for body in replays:
        last = body["messages"][-1]
        if continuation == "continue":
            assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
            assert last["role"] == "assistant"
        else:
            assert "continue_final_message" not in body and last["role"] == "user"
            assert last["content"][0]["text"] == FINAL_ANSWER_REQUEST
    assert {lines[("vstar-0", p)]["meta"]["continuation"] for p in ("replay_none", "replay_text")} == {continuation}
    noise = lines[("vstar-0", "replay_visual")]["meta"]["images"][1]
    assert noise["transform"].startswith("noise seed=0") and noise["sha256"] != trace["crops"][0]["sha256"]
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["continuation"] == continuation and run_json["protocol"] == "tags"


def test_a_resumed_run_asks_nothing_again_and_a_changed_setting_is_refused(vstar_build: Path, tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    dataset = open_mcot_dataset(vstar_build)
    run_dir = tmp_path / "run"
    with ReferenceServer(dataset, "text-follower", family="mcot") as server:
        args = ["run", "mcot", "--dataset", str(vstar_build), "--model", "text-follower", "--base-url",
                server.base_url, "--out", str(run_dir), "--no-progress"]
        assert main(args) == 0
        seen = server.requests_seen
        assert seen == 4 * (2 + 3)  # per item: two trace turns, three replays
        assert main(args) == 0 and server.requests_seen == seen
        assert main([*args, "--coords", "pixels"]) == 2
        assert "field 'coords' is 'resized'" in capsys.readouterr().err
        prompt = tmp_path / "prompt.txt"
        prompt.write_text("You are a careful zoomer.")
        assert main([*args, "--system-prompt", str(prompt)]) == 2
        assert "field 'system_prompt_sha256' is None" in capsys.readouterr().err
