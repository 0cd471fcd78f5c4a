"""mmfaith.loaders: one typed view of SPD-Faith from a build dir, a release folder, a Hub repo and the official release."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmfaith.release.declaration import declaration_of
from mmfaith.release.writer import ReleaseRequest, write_release
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.reference_server import ReferenceServer
from mmfaith.evaluators.spd_faith.run import RunRequest, run_spd_faith
from mmfaith.evaluators.spd_faith.score import ScoreRequest, score_spd_faith
from mmfaith.loaders import Difference, load_spd_faith, spd_pairs
from mmfaith.loaders.spd_faith.dataset import open_spd_dataset
from tests.hub_server import FakeHub
from tests.shared.test_quickstart import PERFECT

FROM_HUB = """
import json, sys
from pathlib import Path
from mmfaith.release.push import push_release
from mmfaith.loaders import load_spd_faith, spd_pairs
from mmfaith.loaders.spd_faith.dataset import open_spd_dataset
push_release(Path(sys.argv[1]), "org/spd", token=sys.argv[2])
views = {c: [v.id for v in spd_pairs(load_spd_faith("org/spd", c, revision="v1.0.0"))] for c in ("single", "multi")}
opened = open_spd_dataset(Path("org/spd@v1.0.0"), cache_dir=Path("cache"))
print(json.dumps({"views": views, "records": [p.record for p in opened.pairs], "id": opened.dataset_id}))
"""

OFFICIAL_CARD = """---
configs:
- config_name: default
  data_files:
  - split: test
    path: data/test-*.parquet
---
# SPD-Faith-Bench (fixture in the official layout)
"""


@pytest.fixture(scope="module")
def released(mixed_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("loaders") / "release"
    write_release(declaration_of("spd-faith"), ReleaseRequest(build=mixed_build, out=out, name="org/spd", version="1.0.0", include="all"))
    return out


def pixels(image: Image.Image) -> np.ndarray:
    return np.asarray(image.convert("RGB"))


@pytest.mark.parametrize("config", ["single", "multi", "control"])
def test_release_folder_and_build_dir_give_the_same_dataset_and_views(released: Path, mixed_build: Path,
                                                                      config: str) -> None:
    from_release = load_spd_faith(released, config=config)
    from_build = load_spd_faith(mixed_build, config=config)
    assert from_release.features == from_build.features and len(from_release) == len(from_build) > 0
    for a, b in zip(spd_pairs(from_release), spd_pairs(from_build)):
        assert (a.id, a.subset, a.difficulty, a.differences, a.license) == (b.id, b.subset, b.difficulty,
                                                                           b.differences, b.license)
        assert np.array_equal(pixels(a.image_a), pixels(b.image_a)) and np.array_equal(pixels(a.image_b), pixels(b.image_b))
        assert all(isinstance(d, Difference) for d in a.differences) and a.num_differences == len(a.differences)
        assert a.subset == config


def test_open_spd_dataset_reads_a_release_folder_like_its_build(released: Path, mixed_build: Path, tmp_path: Path) -> None:
    release = open_spd_dataset(released, cache_dir=tmp_path / "cache")
    build = open_spd_dataset(mixed_build).by_id()
    assert release.dataset_id == "release:org/spd" and release.revision.startswith("v1.0.0+")
    assert sorted(pair.id for pair in release.pairs) == sorted(build)
    for pair in release.pairs:
        assert pair.record == build[pair.id].record and pair.source_key == build[pair.id].source_key
        assert pair.image_a_path.read_bytes() == build[pair.id].image_a_path.read_bytes()
        assert pair.image_b_path.read_bytes() == build[pair.id].image_b_path.read_bytes()
        assert pair.image_b_path.parent == tmp_path / "cache" / "images"
    again = open_spd_dataset(released, cache_dir=tmp_path / "cache")
    assert [p.image_a_path for p in again.pairs] == [p.image_a_path for p in release.pairs]


def test_run_and_score_accept_a_release_folder(released: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MMFAITH_CACHE", str(tmp_path / "cache"))
    dataset = open_spd_dataset(released)
    with ReferenceServer(dataset, "oracle", family="spd-faith") as server:
        summary = run_spd_faith(RunRequest(dataset=released, model="oracle", base_urls=(server.base_url,),
                                           out=tmp_path / "run", progress=False))
    assert summary.failed == 0 and summary.answered == summary.expected == 4 * len(dataset.pairs)
    score_spd_faith(ScoreRequest(dataset=released, predictions=tmp_path / "run" / "predictions.jsonl",
                                 out=tmp_path / "score", from_run=True, n_bootstrap=50))
    metrics = json.loads((tmp_path / "score" / "metrics.json").read_text())
    assert {key: metrics["overall"][key] for key in PERFECT} == {key: 1.0 for key in PERFECT}
    assert metrics["provenance"]["dataset"]["id"] == "release:org/spd"


def test_a_hub_repo_id_loads_a_tagged_release(released: Path, mixed_build: Path, tmp_path: Path) -> None:
    """Pushed to the local fake Hub, then read back by repo id and tag, in a process whose HF_ENDPOINT is the fake."""
    hub = FakeHub("tok").start()
    env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_TOKEN": "tok", "HF_HUB_DISABLE_XET": "1",
           "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HOME": str(tmp_path / "hf"),
           "PYTHONPATH": str(Path(__file__).parent.parent.parent)}
    try:
        done = subprocess.run([sys.executable, "-c", FROM_HUB, str(released), "tok"], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
    finally:
        hub.stop()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    build = {p.id: p.record for p in open_spd_dataset(mixed_build).pairs}
    for config, ids in result["views"].items():
        assert ids == sorted(i for i, r in build.items() if r["subset"] == config)
    assert {r["id"]: r for r in result["records"]} == build and result["id"] == "release:org/spd"


def test_unknown_sources_are_refused_with_the_fix(mixed_build: Path, tmp_path: Path) -> None:
    with pytest.raises(MmfaithError, match="not a SPD-Faith release folder .manifest.json., build dir .records.jsonl. "
                                           "or Hub repo id"):
        load_spd_faith(tmp_path, config="single")
    with pytest.raises(MmfaithError, match="config 'nope' is not one of this build's .single, multi, control."):
        load_spd_faith(mixed_build, config="nope")
    with pytest.raises(MmfaithError, match="not a SPD-Faith release folder"):
        open_spd_dataset(tmp_path)
    with pytest.raises(MmfaithError, match="a local folder has no revisions"):
        load_spd_faith(mixed_build, revision="v1.0.0")


def official_fixture(build: Path, out: Path) -> list[dict]:
    """A folder in the official SPD-Faith-Bench layout made from three pairs of a build: each pair's two
    images merged side by side (the second canvas with a 1-px separator column), and its differences as
    `modifications` in the official vocabulary."""
    from datasets import Dataset, Features, Image as ImageFeature, List, Value

    official_type = {"color": "color", "remove": "removal", "position": "move"}
    pairs = {p.record["subset"]: p for p in open_spd_dataset(build).pairs}
    rows = []
    for qid, subset in enumerate(("single", "multi", "control")):
        pair = pairs[subset]
        a, b = Image.open(pair.image_a_path).convert("RGB"), Image.open(pair.image_b_path).convert("RGB")
        gap = 1 if qid == 1 else 0
        canvas = Image.new("RGB", (a.width + gap + b.width, a.height), (255, 255, 255))
        canvas.paste(a, (0, 0))
        canvas.paste(b, (a.width + gap, 0))
        buffer = io.BytesIO()
        canvas.save(buffer, format="PNG")
        rows.append({"qid": 100 + qid, "image": {"bytes": buffer.getvalue(), "path": None},
                     "modifications": [{"type": official_type[d["type"]], "category": d["category"].title()}
                                       for d in pair.record["differences"]],
                     "question": "Are the two pictures the same?", "pair": pair})
    features = Features({"qid": Value("int64"), "image": ImageFeature(),
                         "modifications": List({"type": Value("string"), "category": Value("string")}),
                         "question": Value("string")})
    (out / "data").mkdir(parents=True)
    Dataset.from_list([{k: v for k, v in r.items() if k != "pair"} for r in rows], features=features).to_parquet(
        str(out / "data" / "test-00000-of-00001.parquet"))
    (out / "README.md").write_text(OFFICIAL_CARD)
    return rows


def test_official_release_rows_load_into_the_same_typed_view(mixed_build: Path, tmp_path: Path) -> None:
    import datasets

    rows = official_fixture(mixed_build, tmp_path / "official")
    # the official layout is not an mmfaith release (no manifest.json): plain `datasets` loads it, the
    # loaders refuse it (import it with `mmfaith build spd-faith --from-official` instead)
    with pytest.raises(MmfaithError, match="not a SPD-Faith release folder"):
        load_spd_faith(tmp_path / "official", config=None)
    dataset = datasets.load_dataset(str(tmp_path / "official"), split="test")
    assert set(dataset.column_names) == {"qid", "image", "modifications", "question"}
    views = list(spd_pairs(dataset))
    assert [v.id for v in views] == ["100", "101", "102"]
    for view, row in zip(views, rows):
        pair = row["pair"]
        assert view.subset == pair.record["subset"] and view.difficulty is None
        assert view.question == "Are the two pictures the same?"
        assert view.differences == [Difference(type=d["type"], category=d["category"])
                                    for d in pair.record["differences"]]
        assert np.array_equal(pixels(view.image_a), pixels(Image.open(pair.image_a_path)))
        assert np.array_equal(pixels(view.image_b), pixels(Image.open(pair.image_b_path)))


def test_official_row_without_a_category_is_refused_by_qid() -> None:
    from mmfaith.loaders import official_pair_view

    row = {"qid": 7, "image": Image.new("RGB", (4, 2)), "modifications": [{"type": "color", "category": ""}]}
    with pytest.raises(MmfaithError, match=r"qid 7: modifications\[0\] needs type and category"):
        official_pair_view(row)
