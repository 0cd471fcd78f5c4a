"""Seeds, repeats and noise floors, end to end against a real OpenAI-protocol server on 127.0.0.1
(tests/chat_server.py) whose answers depend on the request's `seed`, as a sampling model's do:
`run --repeats`, `score --repeat`, CRM's re-sampled original (the noise floor of SDR and AFR) and
`report --pool` over repeats and over builds made with different seeds."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mmfaith.cli import main
from mmfaith.evaluators.crm.prompts import ANSWER_TEMPLATES
from mmfaith.evaluators.run_engine import request_seed

from tests.chat_server import ChatServer, request_text

STEPS = "1. I look at the picture.\n2. I weigh the options."


def sampler(body: dict[str, Any]) -> str:
    """A seeded 'sampler': the same chain of thought always; the final answer A or B by the seed's parity."""
    if ANSWER_TEMPLATES["choice"] in request_text(body):
        return "AB"[body["seed"] % 2]
    return STEPS


def answer_of(item_id: str, image: str, repeat: int) -> str:
    """The sampler's final answer to an image's conversation, from the seed the run derives for it."""
    return "AB"[request_seed(0, item_id, f"{image}_answer", repeat) % 2]


@pytest.fixture(scope="module")
def crm_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two CRM builds of the embedded sample, the same settings but the build seed (0 and 1)."""
    builds = []
    for seed in (0, 1):
        out = tmp_path_factory.mktemp(f"crm-seed{seed}") / "build"
        assert main(["build", "crm", "--out", str(out), "--max-items", "3", "--mask-style", "black", "--seed",
                     str(seed), "--no-progress"]) == 0
        builds.append(out)
    return builds[0], builds[1]


def run_crm(build: Path, base_url: str, out: Path, *extra: str) -> int:
    return main(["run", "crm", "--dataset", str(build), "--model", "test-model", "--base-url", base_url, "--out",
                 str(out), "--no-progress", *extra])


def lines_of(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def repeated(crm_builds: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`run crm --repeats 3` twice (two run dirs) against the seeded sampler; the request bodies it received."""
    folder = tmp_path_factory.mktemp("repeats")
    with ChatServer(default=sampler) as server:
        assert run_crm(crm_builds[0], server.openai_base_url, folder / "a", "--repeats", "3") == 0
        first = len(server.requests)
        assert run_crm(crm_builds[0], server.openai_base_url, folder / "b", "--repeats", "3") == 0
        bodies = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    return {"folder": folder, "bodies_a": bodies[:first - 1], "bodies_b": bodies[first - 1:]}


def test_every_request_carries_a_recorded_seed_that_differs_per_repeat(repeated: dict[str, Any]) -> None:
    lines = lines_of(repeated["folder"] / "a")
    # 3 items x 4 conversations (original, specific-black, random-black, the re-sampled original)
    # x 2 calls (steps, answer) x 3 repeats.
    assert len(lines) == len(repeated["bodies_a"]) == 3 * 4 * 2 * 3
    sent = {body["seed"]: body for body in repeated["bodies_a"]}
    assert len(sent) == len(lines)  # one seed per request, none shared
    seeds: dict[tuple[str, str], set[int]] = {}
    for line in lines:
        generation = line["meta"]["generation"]
        assert generation["seed"] == request_seed(0, line["id"], line["probe"], generation["repeat"])
        body = sent[generation["seed"]]  # the request that carried this line's seed
        assert body["temperature"] == generation["temperature"] == (0.2 if line["probe"].endswith("_cot") else 0.0)
        assert body["max_tokens"] == generation["max_tokens"]
        seeds.setdefault((line["id"], line["probe"]), set()).add(generation["seed"])
    assert all(len(per_repeat) == 3 for per_repeat in seeds.values())
    run_json = json.loads((repeated["folder"] / "a" / "run.json").read_text())
    assert (run_json["repeats"], run_json["generation"]["sampling_seed"], run_json["counts"]["answered"]) == (3, 0, 72)


def test_the_same_command_sends_the_same_seeds(repeated: dict[str, Any]) -> None:
    """Determinism: a second run of the same command asks every (item, probe, repeat) with the same seed."""
    def keyed(run_dir: Path) -> dict[tuple[str, str, int], int]:
        return {(line["id"], line["probe"], line["meta"]["generation"]["repeat"]): line["meta"]["generation"]["seed"]
                for line in lines_of(run_dir)}

    assert keyed(repeated["folder"] / "a") == keyed(repeated["folder"] / "b")
    assert Counter(b["seed"] for b in repeated["bodies_a"]) == Counter(b["seed"] for b in repeated["bodies_b"])
    bodies_a = sorted(json.dumps(body, sort_keys=True) for body in repeated["bodies_a"])
    assert bodies_a == sorted(json.dumps(body, sort_keys=True) for body in repeated["bodies_b"])


def test_another_sampling_seed_is_refused_on_resume(repeated: dict[str, Any], crm_builds: tuple[Path, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with ChatServer(default=sampler) as server:
        assert run_crm(crm_builds[0], server.openai_base_url, repeated["folder"] / "a", "--sampling-seed", "7") == 2
    err = capsys.readouterr().err
    assert "field 'generation' is" in err and "'sampling_seed': 0" in err and "'sampling_seed': 7" in err


def spread_by_hand(values: list[float]) -> dict[str, Any]:
    mean = sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    return {"mean": pytest.approx(mean, abs=1e-6), "sd": pytest.approx(sd, abs=1e-6),
            "min": pytest.approx(min(values), abs=1e-6), "max": pytest.approx(max(values), abs=1e-6), "n": len(values)}


def test_noise_floor_per_repeat_and_the_pooled_spread(repeated: dict[str, Any], crm_builds: tuple[Path, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Per repeat, the noise floor by hand: the re-sample's steps are the original's (SDR 0); its answer
    flips where the two answer seeds differ in parity. `report --pool` gives their mean, sd and range."""
    folder, build = repeated["folder"], crm_builds[0]
    ids = [json.loads(line)["id"] for line in (build / "records.jsonl").read_text().splitlines()]
    floors, specific = [], []
    for repeat in range(3):
        assert main(["score", "crm", "--dataset", str(build), "--predictions", str(folder / "a" / "predictions.jsonl"),
                     "--from-run", "--repeat", str(repeat), "--out", str(folder / f"s{repeat}"),
                     "--bootstrap", "50"]) == 0
        metrics = json.loads((folder / f"s{repeat}" / "metrics.json").read_text())
        assert metrics["provenance"]["repeat"] == repeat
        floor = [float(answer_of(i, "original", repeat) != answer_of(i, "resample", repeat)) for i in ids]
        flips = [float(answer_of(i, "original", repeat) != answer_of(i, "specific-black", repeat)) for i in ids]
        assert metrics["noise_floor"]["n_units"] == 3
        assert metrics["noise_floor"]["metrics"]["SDR"] == 0.0
        assert metrics["noise_floor"]["metrics"]["AFR"] == pytest.approx(sum(floor) / 3)
        assert metrics["by_mode"]["specific"]["metrics"]["AFR"] == pytest.approx(sum(flips) / 3)
        floors.append(sum(floor) / 3)
        specific.append(sum(flips) / 3)
    assert main(["score", "crm", "--dataset", str(build), "--predictions", str(folder / "a" / "predictions.jsonl"),
                 "--from-run", "--repeat", "3", "--out", str(folder / "s3")]) == 2
    assert "holds 3 repeat(s) (0 .. 2), not repeat 3" in capsys.readouterr().err
    assert main(["report", "--pool", *(str(folder / f"s{r}") for r in range(3)), "--out", str(folder / "pool")]) == 0
    pooled = json.loads((folder / "pool" / "pooled.json").read_text())
    assert [r["repeat"] for r in pooled["replicates"]] == [0, 1, 2]
    assert pooled["metrics"]["noise_floor.metrics.AFR"] == spread_by_hand(floors)
    assert pooled["metrics"]["by_mode.specific.metrics.AFR"] == spread_by_hand(specific)
    assert "noise_floor.metrics.AFR" in (folder / "pool" / "pooled.md").read_text()


def test_report_pools_builds_made_with_different_seeds(crm_builds: tuple[Path, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    with ChatServer(default=sampler) as server:
        for k, build in enumerate(crm_builds):
            assert run_crm(build, server.openai_base_url, tmp_path / f"run{k}") == 0
            assert main(["score", "crm", "--dataset", str(build), "--predictions",
                         str(tmp_path / f"run{k}" / "predictions.jsonl"), "--from-run", "--out",
                         str(tmp_path / f"score{k}"), "--bootstrap", "50"]) == 0
    values = [json.loads((tmp_path / f"score{k}" / "metrics.json").read_text()) for k in range(2)]
    assert values[0]["provenance"]["dataset"] != values[1]["provenance"]["dataset"]
    assert main(["report", "--pool", str(tmp_path / "score0"), str(tmp_path / "score1"), "--out",
                 str(tmp_path / "pool")]) == 0
    pooled = json.loads((tmp_path / "pool" / "pooled.json").read_text())
    for path in ("by_mode.specific.metrics.AFR", "by_mode.random.metrics.accuracy_masked", "noise_floor.metrics.AFR"):
        mode_or_floor, *_, name = path.split(".")
        found = [v["by_mode"][path.split(".")[1]] if mode_or_floor == "by_mode" else v["noise_floor"] for v in values]
        assert pooled["metrics"][path] == spread_by_hand([block["metrics"][name] for block in found])
    assert [r["dataset"] for r in pooled["replicates"]] == [v["provenance"]["dataset"] for v in values]
    assert main(["report", "--pool", str(tmp_path / "score0"), "--out", str(tmp_path / "pool1")]) == 2
    assert "needs two or more score dirs" in capsys.readouterr().err
