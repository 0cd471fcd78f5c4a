"""Guards of the shared run and score paths: a run dir bound to its dataset, stale answers refused,
causes named when every call fails, base URLs checked first, no credentials written, one-line
errors for every verb's bad --out, serve-reference that will not hand out gold by accident, and a
help line with its default for every option. Real servers on 127.0.0.1 throughout.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith
from mmfaith.builders.inpainters import resolve_inpainter
from mmfaith.cli import main, parser
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.loaders.spd_faith import open_spd_dataset

from tests.chat_server import ChatServer


def run(dataset: Path, base_url: str, out: Path, model: str = "pixel-diff", *extra: str) -> int:
    return main(["run", "spd-faith", "--dataset", str(dataset), "--model", model, "--base-url", base_url,
                 "--out", str(out), "--no-progress", *extra])


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same counts and seed built twice, with two inpainters: same ids, some images differ."""
    telea, ns = tmp_path_factory.mktemp("telea"), tmp_path_factory.mktemp("ns")
    for out, name in ((telea, "telea"), (ns, "ns")):
        build_spd_faith(BuildRequest(out=out, per_tier=2, multi=2, seed=0, progress=False,
                                     inpainter=resolve_inpainter(name, None)))
    return telea, ns


def changed_pairs(a: Path, b: Path) -> int:
    first, second = (open_spd_dataset(folder).by_id() for folder in (a, b))
    assert first.keys() == second.keys()  # ids do not change with the inpainter
    return sum(first[i].record["image_b_sha256"] != second[i].record["image_b_sha256"] for i in first)


def test_a_run_dir_is_bound_to_its_dataset_and_stale_answers_are_not_scored(
        rebuilt: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    telea, ns = rebuilt
    assert changed_pairs(telea, ns) > 0
    out = tmp_path / "rX"
    with ReferenceServer(open_spd_dataset(telea), "pixel-diff", family="spd-faith") as server:
        assert run(telea, server.base_url, out) == 0
    with ReferenceServer(open_spd_dataset(ns), "pixel-diff", family="spd-faith") as server:
        requests_before = server.requests_seen
        assert run(ns, server.base_url, out) == 2
        assert server.requests_seen == requests_before  # refused before asking anything
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "another dataset" in err and "use a new --out" in err
    # Scoring the old answers against the rebuilt images: refused, or dropped and counted.
    predictions = str(out / "predictions.jsonl")
    assert main(["score", "spd-faith", "--dataset", str(ns), "--predictions", predictions, "--from-run",
                 "--out", str(tmp_path / "s1")]) == 2
    err = capsys.readouterr().err
    assert "answered about other images" in err and "--drop-stale" in err
    assert main(["score", "spd-faith", "--dataset", str(ns), "--predictions", predictions, "--from-run",
                 "--out", str(tmp_path / "s2"), "--drop-stale"]) == 0
    counts = json.loads((tmp_path / "s2" / "metrics.json").read_text())["counts"]
    assert counts["n_stale"] == 4 * changed_pairs(telea, ns)  # every probe of every changed pair
    # The same dataset again still resumes (nothing asked twice).
    with ReferenceServer(open_spd_dataset(telea), "pixel-diff", family="spd-faith") as server:
        assert run(telea, server.base_url, out) == 0 and server.requests_seen == 0


def test_every_call_failing_names_the_cause_and_exits_non_zero(mixed_build: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with ChatServer(default=401) as server:
        assert run(mixed_build, server.openai_base_url, tmp_path / "r", "test-model", "--limit", "2") == 1
        # a 401 is a client error: one attempt per call, never retried
        assert len(server.completion_requests()) == 2 * 3  # same, different, count; describe waits on count
    out = capsys.readouterr().out
    assert "0/8 answered" in out and "most common error: 6 x HTTP 401" in out
    assert "check the key: OPENAI_API_KEY or --api-key-env" in out and "re-run" not in out


def test_a_base_url_is_checked_before_the_first_call(mixed_build: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    dataset = open_spd_dataset(mixed_build)
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        root = server.base_url.removesuffix("/v1")
        assert run(mixed_build, root, tmp_path / "a", "oracle") == 2  # no /v1
        err = capsys.readouterr().err
        assert "HTTP 404" in err and "ends in /v1" in err and server.requests_seen == 0
        assert run(mixed_build, server.base_url, tmp_path / "b", "not-served", "--limit", "1",
                   "--max-attempts", "1") == 1
        err = capsys.readouterr().err
        assert "warning: model 'not-served' is not among the 1 listed" in err and "oracle" in err
    assert run(mixed_build, "ftp://127.0.0.1/v1", tmp_path / "c", "oracle") == 2
    assert "not an http(s) URL" in capsys.readouterr().err


def test_url_credentials_never_reach_run_json(mixed_build: Path, tmp_path: Path) -> None:
    dataset = open_spd_dataset(mixed_build)
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        with_password = server.base_url.replace("http://", "http://user:hunter2secret@")
        assert run(mixed_build, with_password, tmp_path / "r", "oracle", "--limit", "1") == 0
    written = "".join(p.read_text() for p in (tmp_path / "r").iterdir())
    assert "hunter2secret" not in written
    assert json.loads((tmp_path / "r" / "run.json").read_text())["servers"] == [
        server.base_url.replace("http://", "http://***@")]


@pytest.mark.parametrize("verb", ["build", "run", "score", "report", "release", "quickstart"])
def test_every_verb_refuses_an_out_that_is_a_file_in_one_line(verb: str, mixed_build: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    predictions = tmp_path / "p.jsonl"
    first = open_spd_dataset(mixed_build).pairs[0].id
    predictions.write_text(json.dumps({"id": first, "probe": "count", "response": "\\boxed{1}", "model": "m"}) + "\n")
    score_dir = tmp_path / "score"
    assert main(["score", "spd-faith", "--dataset", str(mixed_build), "--predictions", str(predictions),
                 "--out", str(score_dir)]) == 0
    argv = {
        "build": ["build", "spd-faith", "--per-tier", "1", "--out", str(taken), "--no-progress"],
        "run": ["run", "spd-faith", "--dataset", str(mixed_build), "--model", "m", "--base-url",
                "http://127.0.0.1:9/v1", "--out", str(taken)],
        "score": ["score", "spd-faith", "--dataset", str(mixed_build), "--predictions", str(predictions),
                  "--out", str(taken)],
        "report": ["report", str(score_dir), "--out", str(taken)],
        "release": ["release", str(mixed_build), "--out", str(taken), "--name", "x/y", "--version", "1.0.0",
                    "--include", "all"],
        "quickstart": ["quickstart", "--out", str(taken), "--no-progress"],
    }[verb]
    done = subprocess.run([sys.executable, "-m", "mmfaith", *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("mmfaith: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert str(taken) in done.stderr and "Traceback" not in done.stderr
    assert taken.read_text() == "mine\n"


@pytest.mark.parametrize("flags, says", [
    (["--port", "80000"], "a TCP port is 1-65535"),
    (["--port", "-1"], "a TCP port is 1-65535"),
    (["--port", "0", "--host", "0.0.0.0"], "--i-know-this-serves-gold"),
])
def test_serve_reference_refuses_bad_ports_and_public_hosts(flags: list[str], says: str, mixed_build: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve-reference", "--model", "oracle", "--dataset", str(mixed_build), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmfaith: error: ") and says in err


def test_every_option_of_every_verb_has_a_help_line_with_its_default() -> None:
    missing, defaults = [], []

    def walk(node: argparse.ArgumentParser, name: str) -> None:
        for action in node._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(child, f"{name} {sub}")
            elif action.option_strings and action.dest != "help":
                if not action.help:
                    missing.append(f"{name} {action.option_strings[0]}")
                elif action.default not in (None, False, [], argparse.SUPPRESS):
                    defaults.append((name, action, node.format_help()))

    walk(parser(), "mmfaith")
    assert not missing, missing
    assert defaults  # some options have defaults, and each one's is shown in its verb's help
    for name, action, help_text in defaults:
        assert "default" in " ".join(help_text.split()), f"{name} {action.option_strings[0]}"


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("x")
    argv = [sys.executable, "-m", "mmfaith", "build", "spd-faith", "--per-tier", "1", "--out", str(taken)]
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    debug = subprocess.run([*argv[:3], "--debug", *argv[3:]], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in plain.stderr and plain.returncode == 2
    assert "Traceback" in debug.stderr and "MmfaithError" in debug.stderr
