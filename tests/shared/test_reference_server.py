"""The reference server over real HTTP: protocol, the three reference models, both layouts, all orders.

The server runs in a thread of the test process on a free 127.0.0.1 port over a real small build
(conftest's `mixed_build`: 2 pairs per tier, 4 multi, 2 controls); models are asked through the
real run loop (`run_spd_faith`, the openai client) or, for protocol checks, plain urllib.
"""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mmfaith.evaluators.image_payload import side_by_side, split_side_by_side
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.answers import read_count, read_yes_no
from mmfaith.evaluators.spd_faith.parse import parse_claims
from mmfaith.evaluators.spd_faith.prompts import PROBES, prompt_text
from mmfaith.evaluators.spd_faith.run import RunRequest, RunSummary, pair_order, run_spd_faith
from mmfaith.images import sha256_bytes
from mmfaith.loaders.spd_faith.dataset import SpdDataset, SpdPair, open_spd_dataset
from mmfaith.schema import schema_errors

from tests.conftest import read_records


# -- helpers shared with test_spd_run.py ----------------------------------------------------------

def run_against(server: ReferenceServer, dataset: Path, out: Path, **options: Any) -> RunSummary:
    """run_spd_faith against a reference server, quiet, with the server's model."""
    return run_spd_faith(RunRequest(dataset=dataset, model=server.model.name, base_urls=(server.base_url,), out=out,
                                    progress=False, **options))


def prediction_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines() if line]


def answers(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(id, probe) -> the answered line (last one wins)."""
    return {(line["id"], line["probe"]): line for line in prediction_lines(run_dir) if line["response"] is not None}


def gold_claims(pair: SpdPair) -> Counter:
    return Counter((d["type"], d["category"]) for d in pair.record["differences"])


def post_chat(server: ReferenceServer, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(server.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def chat_body(model: str, images: list[bytes], text: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}
        for png in images]
    return {"model": model, "messages": [{"role": "user", "content": [*content, {"type": "text", "text": text}]}]}


@pytest.fixture(scope="module")
def dataset(mixed_build: Path) -> SpdDataset:
    return open_spd_dataset(mixed_build)


# -- the canvas ------------------------------------------------------------------------------------

def test_a_split_canvas_gives_back_the_stored_files(dataset: SpdDataset) -> None:
    edited = next(p for p in dataset.pairs if p.record["subset"] == "multi")
    control = next(p for p in dataset.pairs if p.record["subset"] == "control")
    for pair in (edited, control):
        a, b = pair.image_a_path.read_bytes(), pair.image_b_path.read_bytes()
        for left, right in ((a, b), (b, a)):
            canvas = side_by_side(left, right)
            assert side_by_side(left, right) == canvas  # deterministic
            halves = split_side_by_side(canvas)
            assert halves is not None
            assert [sha256_bytes(h) for h in halves] == [sha256_bytes(left), sha256_bytes(right)]
        assert {sha256_bytes(a), sha256_bytes(b)} == {pair.record["image_a_sha256"], pair.record["image_b_sha256"]}
    assert split_side_by_side(a) is None  # a plain picture has no white gap in its middle


# -- protocol --------------------------------------------------------------------------------------

def test_protocol_routes_and_openai_style_errors(dataset: SpdDataset) -> None:
    pair = dataset.pairs[0]
    a, b = pair.image_a_path.read_bytes(), pair.image_b_path.read_bytes()
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=10) as response:
            assert response.status == 200
        with urllib.request.urlopen(server.base_url + "/models", timeout=10) as response:
            assert [m["id"] for m in json.loads(response.read())["data"]] == ["oracle"]

        status, body = post_chat(server, chat_body("oracle", [a, b], prompt_text("count", "separate")))
        assert status == 200
        assert body["object"] == "chat.completion" and body["choices"][0]["finish_reason"] == "stop"
        assert read_count(body["choices"][0]["message"]["content"]) == pair.record["num_differences"]
        assert body["usage"]["prompt_tokens"] > 0 and body["usage"]["completion_tokens"] > 0

        foreign = side_by_side(a, a)  # a PNG that is in no record
        for request, expected in [
            (chat_body("oracle", [foreign, b], prompt_text("same", "separate")), 400),
            (chat_body("oracle", [foreign], prompt_text("same", "side-by-side")), 400),
            (chat_body("oracle", [a, b], "What is in the picture?"), 400),
            (chat_body("gpt-4o", [a, b], prompt_text("same", "separate")), 404),
            (chat_body("oracle", [a], prompt_text("same", "separate")), 400),
        ]:
            status, body = post_chat(server, request)
            assert status == expected
            assert set(body["error"]) == {"message", "type", "param", "code"} and body["error"]["message"]
        assert server.requests_seen == 6


def test_many_concurrent_connections_are_served(dataset: SpdDataset, mixed_build: Path, tmp_path: Path) -> None:
    expected = len(read_records(mixed_build)) * len(PROBES)
    assert expected * 0.2 > 3.0  # one after another, they would take longer than the bound below
    with ReferenceServer(dataset, "blind", family="spd-faith", latency_s=0.2) as server:
        summary = run_against(server, mixed_build, tmp_path, concurrency=expected)
    # `expected` requests (every pair's probes) held 0.2 s each: served together, not one after another.
    assert summary.answered == expected and summary.elapsed_s < 3.0


# -- the three models ------------------------------------------------------------------------------

def test_the_oracle_answers_the_gold_in_every_probe(dataset: SpdDataset, mixed_build: Path, tmp_path: Path) -> None:
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        summary = run_against(server, mixed_build, tmp_path)
    assert (summary.answered, summary.failed) == (len(read_records(mixed_build)) * len(PROBES), 0)
    lines = prediction_lines(tmp_path)
    assert [e for line in lines for e in schema_errors("prediction", line)] == []
    found = answers(tmp_path)
    for pair in dataset.pairs:
        gold, n = gold_claims(pair), pair.record["num_differences"]
        assert read_yes_no(found[pair.id, "same"]["response"], "same") is (n == 0)
        assert read_yes_no(found[pair.id, "different"]["response"], "different") is (n > 0)
        assert read_count(found[pair.id, "count"]["response"]) == n
        describe = found[pair.id, "describe"]
        assert describe["meta"]["count_asked"] == n
        assert read_count(describe["response"]) == n
        for probe in ("same", "different", "describe"):
            claims = parse_claims(found[pair.id, probe]["response"])
            assert Counter((c["type"], c["object"]) for c in claims) == gold
        assert describe["meta"]["prompt_tokens"] > 0


def test_the_blind_model_sees_nothing(dataset: SpdDataset, mixed_build: Path, tmp_path: Path) -> None:
    with ReferenceServer(dataset, "blind", family="spd-faith") as server:
        run_against(server, mixed_build, tmp_path)
    found = answers(tmp_path)
    for pair in dataset.pairs:
        assert read_yes_no(found[pair.id, "same"]["response"], "same") is True
        assert read_yes_no(found[pair.id, "different"]["response"], "different") is False
        assert read_count(found[pair.id, "count"]["response"]) == 0
        assert found[pair.id, "describe"]["meta"]["count_asked"] == 0  # the open "describe any" prompt
        for probe in ("same", "different", "describe"):
            assert parse_claims(found[pair.id, probe]["response"]) == []


def test_pixel_diff_finds_the_edits_and_nothing_in_controls(dataset: SpdDataset, mixed_build: Path,
                                                            tmp_path: Path) -> None:
    with ReferenceServer(dataset, "pixel-diff", family="spd-faith") as server:
        run_against(server, mixed_build, tmp_path)
    found = answers(tmp_path)
    for pair in dataset.pairs:
        count = read_count(found[pair.id, "count"]["response"])
        claims = parse_claims(found[pair.id, "describe"]["response"])
        if pair.record["subset"] == "control":
            assert count == 0 and claims == []
            assert read_yes_no(found[pair.id, "same"]["response"], "same") is True
        else:
            assert count >= 1 and len(claims) == count
            assert read_yes_no(found[pair.id, "different"]["response"], "different") is True
            assert {c["type"] for c in claims} <= {"color", "remove", "position"}
    # Single-difference recolors keep their edges: the cue names them color.
    single_colors = [p for p in dataset.pairs if p.record["subset"] == "single"
                     and p.record["differences"][0]["type"] == "color"]
    assert single_colors
    assert all(parse_claims(found[p.id, "describe"]["response"])[0]["type"] == "color" for p in single_colors)


# -- layouts and orders ----------------------------------------------------------------------------

@pytest.mark.parametrize("layout, order", [("side-by-side", "edited-first"), ("side-by-side", "random"),
                                           ("separate", "edited-first"), ("separate", "random")])
def test_the_oracle_knows_the_pair_and_the_order_in_each_layout(dataset: SpdDataset, mixed_build: Path, tmp_path: Path,
                                                                layout: str, order: str) -> None:
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        summary = run_against(server, mixed_build, tmp_path, layout=layout, order=order, seed=3)
    assert summary.failed == 0
    found = answers(tmp_path)
    orders = set()
    for pair in dataset.pairs:
        shown = pair_order(order, 3, pair.id)
        orders.add(shown)
        assert {found[pair.id, p]["meta"]["order"] for p in ("same", "count", "describe")} == {shown}
        assert found[pair.id, "same"]["meta"]["layout"] == layout
        assert read_count(found[pair.id, "count"]["response"]) == pair.record["num_differences"]
        claims = parse_claims(found[pair.id, "describe"]["response"])
        assert Counter((c["type"], c["object"]) for c in claims) == gold_claims(pair)
        for claim, difference in zip(claims, pair.record["differences"], strict=True):
            if difference["type"] == "remove":  # the object is in the original only
                assert claim["detail"] == ("only in the first picture" if shown == "original-first"
                                           else "only in the second picture")
            if difference["type"] == "color" and difference["color_before"] and difference["color_after"]:
                before, after = difference["color_before"], difference["color_after"]
                shown_colors = (before, after) if shown == "original-first" else (after, before)
                assert claim["detail"] == f"{shown_colors[0]} to {shown_colors[1]}"
    assert orders == ({"original-first", "edited-first"} if order == "random" else {order})
