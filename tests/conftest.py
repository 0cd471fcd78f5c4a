"""Shared fixtures: builds of the embedded COCO sample (real images, real annotations)."""
from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

# A fresh `datasets` cache for each test session, set before any test module imports `datasets`
# (it reads the variable once): its arrow cache is keyed by the folder, so a release rewritten at a
# path an earlier session used would otherwise be read back stale.
_DATASETS_CACHE = tempfile.mkdtemp(prefix="mmfaith-tests-datasets-")
os.environ["HF_DATASETS_CACHE"] = _DATASETS_CACHE

import pytest  # noqa: E402 (after the cache variable)

from mmfaith.builders.coco_source import embedded_sample  # noqa: E402
from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith  # noqa: E402
from mmfaith.evaluators.spd_faith.prompts import LAYOUTS, PROBES, prompt_text  # noqa: E402
from mmfaith.evaluators.vllm_serve import VllmEndpoint, serve_vllm  # noqa: E402


def write_subset_annotations(sample: tuple[Path, Path], out: Path, image_ids: list[int]) -> Path:
    """A COCO instances file holding only the given images of the embedded sample (images stay where they are)."""
    data = json.loads(sample[0].read_text())
    keep = set(image_ids)
    data["images"] = [im for im in data["images"] if im["id"] in keep]
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] in keep]
    out.write_text(json.dumps(data))
    return out


def kill_after_lines(process: subprocess.Popen, journal: Path, lines: int, timeout_s: float = 120) -> int:
    """SIGKILL `process` (started with start_new_session=True) and its children once `journal` holds
    `lines` complete lines; returns the complete lines it left. Fails if the process ended first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if journal.exists() and journal.read_bytes().count(b"\n") >= lines:
            break
        time.sleep(0.01)
    assert process.poll() is None, f"the process finished before {journal.name} held {lines} lines"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return journal.read_bytes().count(b"\n")


def read_records(build_dir: Path, name: str = "records.jsonl") -> list[dict]:
    path = build_dir / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session", autouse=True)
def fresh_datasets_cache() -> Iterator[str]:
    """The session's `datasets` cache, removed at the end."""
    yield _DATASETS_CACHE
    shutil.rmtree(_DATASETS_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets an empty mmfaith cache ($MMFAITH_CACHE, inherited by subprocesses): no test
    reads another's cached judge answers, and none writes to the user's ~/.cache."""
    folder = tmp_path_factory.mktemp("mmfaith-cache")
    monkeypatch.setenv("MMFAITH_CACHE", str(folder))
    return folder


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
    from mmfaith.builders.spd_faith.planners import PlannerSpec

    outs = {}
    for kind in ("color", "remove", "position"):
        out = tmp_path_factory.mktemp(f"only-{kind}")
        build_spd_faith(BuildRequest(out=out, per_tier=1, seed=3, progress=False,
                                     planner=PlannerSpec("rule", None, (kind,))))
        outs[kind] = out
    return outs


# -- a real vLLM server (CPU), shared by the vLLM and run-loop tests -----------------------------

REPO = Path(__file__).resolve().parents[1]
TINY_VLM_SCRIPT = Path(__file__).resolve().parent / "tiny_vlm.py"
TINY_MAX_MODEL_LEN = 8192  # the tiny model's max_position_embeddings (tests/tiny_vlm.py)


def find_vllm_python() -> Path | None:
    """$MMFAITH_VLLM_PYTHON, else <repo>/.venv-vllm/bin/python; None when there is none."""
    named = os.environ.get("MMFAITH_VLLM_PYTHON")
    if named:
        if not Path(named).exists():
            pytest.fail(f"MMFAITH_VLLM_PYTHON={named} does not exist: run tools/install-vllm.sh or unset it")
        return Path(named)
    default = REPO / ".venv-vllm" / "bin" / "python"
    return default if default.exists() else None


def build_tiny_model(python: Path, out: Path) -> Path:
    """The tiny Idefics3 in `out`, its tokenizer trained on every SPD-Faith probe text too."""
    corpus = out.parent / f"{out.name}-corpus.txt"
    corpus.write_text("\n".join(prompt_text(probe, layout, count) for layout in LAYOUTS for probe in PROBES
                                for count in ((None, 1, 2, 3) if probe == "describe" else (None,))),
                      encoding="utf-8")
    subprocess.run([str(python), str(TINY_VLM_SCRIPT), str(out), "--corpus", str(corpus),
                    "--max-position-embeddings", str(TINY_MAX_MODEL_LEN)],
                   check=True, capture_output=True, text=True, timeout=600)
    return out


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The python of the vLLM environment; skips when vLLM is not installed."""
    python = find_vllm_python()
    if python is None:
        pytest.skip("vLLM not installed: run tools/install-vllm.sh (or set MMFAITH_VLLM_PYTHON)")
    return python


@pytest.fixture(scope="session")
def tiny_vlm_dir(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Idefics3 model folder (tests/tiny_vlm.py), built once per session."""
    return build_tiny_model(vllm_python, tmp_path_factory.mktemp("tiny-vlm") / "tiny-idefics3")


@pytest.fixture(scope="session")
def vllm_server(vllm_python: Path, tiny_vlm_dir: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmEndpoint]:
    """One real vLLM server for the session, serving the tiny Idefics3 as model "tiny-idefics3".

    Two images per request at most; --max-model-len 8192. Stopped, whole process group, at the
    end of the session; the teardown fails if any process of the group is left.
    """
    log_path = tmp_path_factory.mktemp("vllm-server") / "server.log"
    with serve_vllm(tiny_vlm_dir, python=vllm_python, served_model_name="tiny-idefics3",
                    max_model_len=TINY_MAX_MODEL_LEN, limit_images=2, dtype="bfloat16",
                    startup_timeout_s=600, log_path=log_path) as endpoint:
        yield endpoint
    with pytest.raises(ProcessLookupError):
        os.killpg(endpoint.pgid, 0)




@pytest.fixture(scope="session")
def vfaith_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A VFaith build of the embedded sample: every template, PatchMatch fills, seed 0 (read-only for tests)."""
    from mmfaith.builders.inpainters import InpainterSpec
    from mmfaith.builders.vfaith.build import BuildRequest, build_vfaith

    out = tmp_path_factory.mktemp("vfaith") / "build"
    build_vfaith(BuildRequest(out=out, per_template=3, inpainter=InpainterSpec("patchmatch"), progress=False))
    return out
