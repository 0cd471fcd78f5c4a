"""Every registered family, and a toy one defined only here, through every shared stage.

For each family: a small real build (the toy one writes its own), `mmfaith run` against the family's
first reference model over HTTP, `mmfaith score`, `mmfaith release` (the summary counts the family's
own records), `mmfaith verify`, loading the release folder and the build dir (the evaluator's opener and
`loaders.load.load_config`), loading the same release pushed to a local fake Hub by repo id and tag,
`--previous` (the changelog names what was added and changed), and the help of each verb naming no
other family. The toy family ("toy-suite": one image and a yes/no question per item) goes through all
of it with its own parts and release declaration only: nothing in the shared code knows it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mmfaith import families
from mmfaith.cli import main
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.image_payload import ImageRef
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.run_engine import PredictionLog
from mmfaith.families import Family, FamilyParts
from mmfaith.images import png_bytes, sha256_bytes, sha256_file
from mmfaith.jsonl import canonical_json
from mmfaith.loaders.load import load_config
from mmfaith.loaders.release_files import cached_image
from mmfaith.loaders.source import resolve
from mmfaith.release.declaration import CardFacts, ReleaseDeclaration
from tests.hub_server import FakeHub
from tests.mcot_fixtures import write_vstar_folder
from tests.shared.test_family_seam import TOY, LookPlan, ToyDataset, ToyItem, ToyReference

TOY_NAME = "toy-suite"
REPO = Path(__file__).resolve().parents[2]


# -- the toy family: its loader, scorer and release declaration, nothing more -------------------------

def toy_records(build: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (build / "records.jsonl").read_text().splitlines()]


def open_toy(source: Path | str) -> ToyDataset:
    """A toy build dir, release folder or Hub id, through the shared resolver."""
    found = resolve(source, TOY_NAME)
    items = []
    if found.kind == "build":
        for record in toy_records(found.path):
            items.append(ToyItem(record["id"], record["image"], ImageRef(record["image_sha256"],
                                 found.path / record["image"]), record["question"], record["answer"]))
    else:
        import pyarrow.parquet as pq

        from mmfaith.cache import cache_dir

        images = cache_dir() / "images"
        images.mkdir(parents=True, exist_ok=True)
        for name in sorted(n for n, entry in found.manifest["files"].items() if "config" in entry):
            for row in pq.read_table(found.path / name).to_pylist():
                record = json.loads(row["record"])
                path = cached_image(images, row["image"]["bytes"], record["image_sha256"], name)
                items.append(ToyItem(record["id"], record["image"], ImageRef(record["image_sha256"], path),
                                     record["question"], record["answer"]))
    return ToyDataset(items, str(source), "local")


def toy_score(args: argparse.Namespace) -> int:
    dataset = open_toy(args.dataset)
    log = PredictionLog(args.predictions)
    right = [log.answered.get((item.id, "look"), {}).get("response") == item.answer for item in dataset.items]
    args.out.mkdir(parents=True, exist_ok=True)
    metrics = {"overall": {"accuracy": sum(right) / len(right)}, "provenance": {"family": TOY_NAME}}
    (args.out / "metrics.json").write_text(json.dumps(metrics))
    return 0


def toy_features(config: str) -> Any:
    from datasets import Features, Image, Value

    return Features({"id": Value("string"), "image": Image(), "question": Value("string"),
                     "answer": Value("string"), "record": Value("string")})


def toy_to_row(build: Path, config: str, unit: tuple[dict[str, Any], Any]) -> dict[str, Any]:
    record = unit[0]
    return {"id": record["id"], "image": {"bytes": (build / record["image"]).read_bytes(), "path": record["image"]},
            "question": record["question"], "answer": record["answer"], "record": canonical_json(record)}


def toy_check_row(where: str, config: str, row: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    record = json.loads(row["record"])
    ok = sha256_bytes(row["image"]["bytes"]) == record["image_sha256"]
    return record, [] if ok else [f"{where}: image bytes do not hash to image_sha256."]


def toy_card(facts: CardFacts) -> str:
    from mmfaith.release.card import changelog_text, hub_configs

    front = {"license": "cc0-1.0", "configs": hub_configs(facts)}
    return (f"---\n{json.dumps(front)}\n---\n# {facts.name} {facts.version}\n\n"
            f"{changelog_text(facts.changelog, 'items')}\n")


def toy_select(records: list[dict[str, Any]], include: str, allow_noderivs: bool, build: Path):
    from mmfaith.release.writer import select_records

    return select_records(records, include, allow_noderivs, build, noun="item", derivative=lambda record: False)


TOY_RELEASE = ReleaseDeclaration(
    family=TOY_NAME, noun="items", read_build=toy_records, select=toy_select,
    units=lambda records: {"items": [(record, None) for record in records]}, features=toy_features,
    to_row=toy_to_row, check_row=toy_check_row, card=toy_card)

TOY_SUITE = Family(
    name=TOY_NAME, title="Toy suite", summary=TOY.summary, record_kinds=TOY.record_kinds, probes=TOY.probes,
    metrics=TOY.metrics, reference_models=TOY.reference_models,
    parts_source=FamilyParts(open_dataset=open_toy, add_run_options=lambda parser: None,
                             probe_plan=lambda options: LookPlan(), add_score_options=lambda parser: None,
                             score=toy_score, reference_model=ToyReference, release=lambda: TOY_RELEASE))


def write_toy_build(folder: Path) -> Path:
    """A toy build dir: three items on distinct images, pending verification, and its build.json."""
    (folder / "images").mkdir(parents=True)
    lines = []
    for number, answer in enumerate(("yes", "no", "yes")):
        data = png_bytes(np.full((16, 16, 3), 40 * number, dtype=np.uint8))
        (folder / "images" / f"{number}.png").write_bytes(data)
        lines.append(canonical_json({
            "id": f"toy-{number}", "image": f"images/{number}.png", "image_sha256": sha256_bytes(data),
            "question": f"Is picture {number} bright?", "answer": answer, "verification": {"status": "pending"},
            "source": {"license": {"name": "CC0"}}}))
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "build.json").write_text(json.dumps({"family": TOY_NAME, "status": "complete"}) + "\n")
    return folder


# -- one small build per family ---------------------------------------------------------------------

FAMILIES = ["spd-faith", "vfaith", "crm", "mcot", TOY_NAME]


@pytest.fixture(scope="module", autouse=True)
def toy_registered() -> Iterator[None]:
    families.register(TOY_SUITE)
    yield
    families.unregister(TOY_NAME)


def test_every_registered_family_is_in_the_suite(toy_registered: None) -> None:
    """A family added to the registry without a case here fails this test."""
    assert [family.name for family in families.all_families()] == FAMILIES


@pytest.fixture(scope="module")
def builds(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Filled lazily: the build of a family, made the first time a test asks for it."""
    return {}


def build_of(family: str, builds: dict[str, Path], request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Path:
    if family not in builds:
        root = tmp_path_factory.mktemp(f"suite-{family}")
        if family == "spd-faith":
            builds[family] = request.getfixturevalue("mixed_build")
        elif family == "vfaith":
            builds[family] = request.getfixturevalue("vfaith_build")
        elif family == "crm":
            assert main(["build", "crm", "--out", str(root / "build"), "--max-items", "3", "--mask-style", "black",
                         "--no-progress"]) == 0
            builds[family] = root / "build"
        elif family == "mcot":
            assert main(["build", "mcot", "--source", "vstar", "--source-path",
                         str(write_vstar_folder(root / "vstar", 4)), "--out", str(root / "build")]) == 0
            builds[family] = root / "build"
        else:
            builds[family] = write_toy_build(root / "build")
    return builds[family]


@pytest.fixture()
def build(request: pytest.FixtureRequest, builds: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_of(request.node.callspec.params["family"], builds, request, tmp_path_factory)


def release_of(family: str, build: Path, out: Path, *flags: str) -> str:
    """`mmfaith release` of the build (every record, verified or not); its printed summary."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["release", str(build), "--out", str(out), "--name", f"org/{family}", "--include", "all",
                     *flags]) == 0
    return printed.getvalue()


def ids_of(dataset: Any) -> list[str]:
    return sorted(item.id for item in dataset.items)


# -- the stages -------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_run_against_the_reference_server_and_score(family: str, build: Path, tmp_path: Path) -> None:
    declared = families.get(family)
    model = declared.reference_models[0][0]
    dataset = declared.parts().open_dataset(build)
    with ReferenceServer(dataset, model, family=family) as server:
        assert main(["run", family, "--dataset", str(build), "--model", model, "--base-url", server.base_url,
                     "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    assert main(["score", family, "--dataset", str(build), "--predictions", str(tmp_path / "run" / "predictions.jsonl"),
                 "--from-run", "--out", str(tmp_path / "score"), "--bootstrap", "20"]) == 0
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    assert metrics["provenance"]["family"] == family


@pytest.mark.parametrize("family", FAMILIES)
def test_release_verify_and_load_from_the_folder(family: str, build: Path, tmp_path: Path) -> None:
    noun = families.get(family).part("release", "release format")().noun
    printed = release_of(family, build, tmp_path / "r", "--version", "1.0.0")
    built = families.get(family).parts().open_dataset(build)
    assert f"released {len([i for i in built.items if type(i) is type(built.items[0])])} {noun} to" in printed
    if noun != "pairs":
        assert "pair" not in printed
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["family"] == family and manifest["format"] == f"mmfaith-{family}-release/1"
    assert manifest["changelog"] is None and manifest["verification"]["released_statuses"]
    assert main(["verify", str(tmp_path / "r")]) == 0
    released = families.get(family).parts().open_dataset(tmp_path / "r")
    assert ids_of(released) == ids_of(built)
    # the first config, loaded from the release and from the build dir, holds the same rows
    config = next(iter(manifest["configs"]))
    from_release, from_build = load_config(family, tmp_path / "r", config), load_config(family, build, config)
    assert from_release["id"] == from_build["id"] and len(from_release) == manifest["configs"][config]
    # one strictness and one message for every family: no revision on a local folder, unknown sources named
    with pytest.raises(MmfaithError, match="a local folder has no revisions"):
        load_config(family, tmp_path / "r", config, revision="v1.0.0")
    with pytest.raises(MmfaithError, match=rf"not a {re.escape(families.get(family).title)} release folder "
                                           r"\(manifest.json\), build dir \(records.jsonl\) or Hub repo id"):
        families.get(family).parts().open_dataset(tmp_path / "nothing")
    # a changed shard is refused by the loaders, named
    shard = next((tmp_path / "r" / "data").rglob("*.parquet"))
    shard.write_bytes(shard.read_bytes()[:-9] + b"x" * 9)
    with pytest.raises(Exception, match="sha256 differs from the manifest"):
        families.get(family).parts().open_dataset(tmp_path / "r")


@pytest.mark.parametrize("family", FAMILIES)
def test_the_release_is_byte_reproducible(family: str, build: Path, tmp_path: Path) -> None:
    for name in ("a", "b"):
        release_of(family, build, tmp_path / name, "--version", "1.0.0", "--shard-rows", "2")
    files = {p.relative_to(tmp_path / "a"): sha256_file(p) for p in (tmp_path / "a").rglob("*") if p.is_file()}
    assert files == {p.relative_to(tmp_path / "b"): sha256_file(p) for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert sum(1 for name in files if name.suffix == ".parquet") >= 2


@pytest.mark.parametrize("family", FAMILIES)
def test_previous_gives_the_changelog(family: str, build: Path, tmp_path: Path) -> None:
    release_of(family, build, tmp_path / "v1", "--version", "1.0.0")
    previous = tmp_path / "previous"
    previous.mkdir()
    manifest = json.loads((tmp_path / "v1" / "manifest.json").read_text())
    ids = sorted(manifest["rows"])
    dropped, changed = ids[0], ids[-1]
    del manifest["rows"][dropped]
    manifest["rows"][changed] = "0" * 64
    (previous / "manifest.json").write_text(json.dumps(manifest))
    release_of(family, build, tmp_path / "v2", "--version", "1.1.0", "--previous", str(previous))
    changes = json.loads((tmp_path / "v2" / "manifest.json").read_text())["changelog"]
    assert changes == {"previous_name": f"org/{family}", "previous_version": "1.0.0", "added": [dropped],
                       "removed": [], "changed": [changed]}
    assert re.search(r"\b1 \w+ added, 0 removed, 1 changed", (tmp_path / "v2" / "README.md").read_text())


HUB_SCRIPT = """
import json, sys
from pathlib import Path
from mmfaith import families
from mmfaith.loaders.load import load_config
from mmfaith.release.push import push_release
import tests.shared.test_family_suite as suite
families.register(suite.TOY_SUITE)
family, folder, token = sys.argv[1:4]
push_release(Path(folder), f"org/{family}", token=token)
opened = families.get(family).parts().open_dataset(f"org/{family}@v1.0.0")
config = next(iter(json.loads((Path(folder) / "manifest.json").read_text())["configs"]))
loaded = load_config(family, f"org/{family}", config, revision="v1.0.0")
print(json.dumps({"ids": sorted(item.id for item in opened.items), "loaded": sorted(loaded["id"]),
                  "config": config}))
"""


@pytest.mark.parametrize("family", FAMILIES)
def test_a_hub_id_opens_the_pushed_release(family: str, build: Path, tmp_path: Path) -> None:
    """Pushed to the local fake Hub, then opened by repo id and tag, in a process whose HF_ENDPOINT is the fake."""
    release_of(family, build, tmp_path / "r", "--version", "1.0.0")
    hub = FakeHub("tok").start()
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": "tok", "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(REPO)}
    try:
        done = subprocess.run([sys.executable, "-c", HUB_SCRIPT, family, str(tmp_path / "r"), "tok"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    finally:
        hub.stop()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ids"] == ids_of(families.get(family).parts().open_dataset(build))
    assert result["loaded"] == sorted(load_config(family, build, result["config"])["id"])


@pytest.mark.parametrize("family", FAMILIES)
def test_help_names_no_other_family(family: str, capsys: pytest.CaptureFixture[str]) -> None:
    others = [other for other in families.all_families() if other.name != family]
    parts = families.get(family).parts()
    verbs = ["run", "score"] + (["build"] if parts.build is not None else [])
    for verb in verbs:
        with pytest.raises(SystemExit):
            main([verb, family, "--help"])
        shown = capsys.readouterr().out
        for other in others:
            for word in {other.name, other.title}:
                assert not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", shown), \
                    f"`mmfaith {verb} {family} --help` names {word!r}"


def test_release_help_names_no_family_and_no_pairs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["release", "--help"])
    shown = capsys.readouterr().out
    assert "pair" not in shown
    for family in families.all_families():
        assert not re.search(rf"(?<![\w-]){re.escape(family.title)}(?![\w-])", shown), family.title
        assert not re.search(rf"(?<![\w-]){re.escape(family.name)}(?![\w-])", shown), family.name


def test_a_crm_release_never_speaks_of_pairs(builds: dict[str, Path], request: pytest.FixtureRequest,
                                             tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    build = build_of("crm", builds, request, tmp_path_factory)
    printed = release_of("crm", build, tmp_path / "r", "--version", "1.0.0")
    written = (tmp_path / "r" / "README.md").read_text() + (tmp_path / "r" / "manifest.json").read_text()
    assert "pair" not in printed.lower() and "pair" not in written.lower()
    shutil.rmtree(tmp_path / "r")
