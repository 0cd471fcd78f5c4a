"""A family's small build answered by two models, as a user makes them: the family's oracle (its first reference
model, which reads the gold) run over HTTP with `mmfaith run`, and an always-A model whose predictions are the
oracle's lines with every response replaced by "A". Shared by the score golden test and the explorer's tests."""
from __future__ import annotations

import json
from pathlib import Path

from mmfaith.cli import main
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.families import get as family


def oracle_and_always_a(folder: Path, name: str, build_args: list[str]) -> tuple[Path, dict[str, Path]]:
    """(folder/build, {"oracle": its predictions, "always-a": the always-A predictions})."""
    build = folder / "build"
    assert main(["build", name, "--out", str(build), "--no-progress", "--seed", "0", *build_args]) == 0
    oracle = family(name).reference_models[0][0]
    with ReferenceServer(family(name).parts().open_dataset(build), oracle, family=name) as server:
        assert main(["run", name, "--dataset", str(build), "--model", oracle, "--base-url", server.base_url,
                     "--out", str(folder / "run"), "--no-progress"]) == 0
    lines = [json.loads(line) for line in (folder / "run" / "predictions.jsonl").read_text().splitlines()]
    always_a = [{**line, "model": "always-a", "response": None if line["response"] is None else "A"} for line in lines]
    (folder / "always-a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in always_a))
    return build, {"oracle": folder / "run" / "predictions.jsonl", "always-a": folder / "always-a.jsonl"}
