"""Shared fixtures: builds of the embedded COCO sample (real images, real annotations)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.builders.coco_source import embedded_sample
from mmfaith.builders.spd_faith import BuildRequest, build_spd_faith


def write_subset_annotations(sample: tuple[Path, Path], out: Path, image_ids: list[int]) -> Path:
    """A COCO instances file holding only the given images of the embedded sample (images stay where they are)."""
    data = json.loads(sample[0].read_text())
    keep = set(image_ids)
    data["images"] = [im for im in data["images"] if im["id"] in keep]
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] in keep]
    out.write_text(json.dumps(data))
    return out


def read_records(build_dir: Path, name: str = "records.jsonl") -> list[dict]:
    path = build_dir / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def sample() -> tuple[Path, Path]:
    """(annotations file, images folder) of the embedded sample."""
    return embedded_sample()


@pytest.fixture(scope="session")
def mixed_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small build with every subset: 2 pairs per tier, 4 multi-difference pairs, 2 controls."""
    out = tmp_path_factory.mktemp("mixed")
    build_spd_faith(BuildRequest(out=out, per_tier=2, multi=4, controls=2, seed=0, progress=False))
    return out


@pytest.fixture(scope="session")
def builds_by_type(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small single-difference build per edit type."""
    from mmfaith.builders.planners import PlannerSpec

    outs = {}
    for kind in ("color", "remove", "position"):
        out = tmp_path_factory.mktemp(f"only-{kind}")
        build_spd_faith(BuildRequest(out=out, per_tier=1, seed=3, progress=False,
                                     planner=PlannerSpec("rule", None, (kind,))))
        outs[kind] = out
    return outs
