"""Shared fixtures: builds of the embedded COCO sample (real images, real annotations)."""
from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# A fresh `datasets` cache for each test session, set before any test module imports `datasets`
# (it reads the variable once): its arrow cache is keyed by the folder, so a release rewritten at a
# path an earlier session used would otherwise be read back stale.
_DATASETS_CACHE = tempfile.mkdtemp(prefix="mmfaith-tests-datasets-")
os.environ["HF_DATASETS_CACHE"] = _DATASETS_CACHE

import httpx  # noqa: E402 (after the cache variable)
import pytest  # noqa: E402

from mmfaith import redact  # noqa: E402
from mmfaith.annotation.server import ServerSpec, find_label_studio, start_server, stop_server, wait_ready  # noqa: E402
from mmfaith.builders.coco_source import embedded_sample  # noqa: E402
from mmfaith.builders.spd_faith.build import BuildRequest, build_spd_faith  # noqa: E402
from mmfaith.errors import MmfaithError  # noqa: E402
from mmfaith.evaluators.spd_faith.prompts import LAYOUTS, PROBES, prompt_text  # noqa: E402
from mmfaith.evaluators.vllm_serve import VllmEndpoint, serve_vllm  # noqa: E402


# -- running on both cores (pytest-xdist, `-n auto --dist loadgroup` in tools/test-all.sh) ---------

SERVER_GROUPS = {"test_vllm_serve.py": "vllm", "test_run_vllm.py": "vllm", "test_mcot_vllm.py": "vllm",
                 "test_annotate.py": "label-studio", "test_crm_annotate.py": "label-studio",
                 "test_vfaith_annotate.py": "label-studio",
                 "test_install.py": "wheel", "test_plain_install.py": "wheel"}
"""Test files that run on one worker together: those using one session server (`vllm_server`,
`label_studio`: it starts once per run), and those building the wheel in the source tree (build/)."""

SERVER_FIXTURES = ("vllm_server", "label_studio")

ENVIRONMENTS = {"vllm": ("vllm",), "label-studio": ("label-studio",), "test_child_process.py": ("label-studio",),
                "test_harness_inspect.py": ("inspect",), "test_harness_crm.py": ("inspect",),
                "test_harness_mcot.py": ("inspect",), "test_harness_lmms_eval.py": ("lmms-eval",),
                "test_harness_vfaith.py": ("lmms-eval", "inspect")}
"""The environments (tools/install-<name>.sh) a worker group needs, by group or test file name."""
PENDING = "MMFAITH_TEST_ENVIRONMENTS"
"""Set by tools/test-all.sh, which installs the environments while the tests run: a folder where each installer
leaves `<name>.status` (its exit status) and `<name>.log`. Unset: the environments are taken as they are."""
ENVIRONMENT_WAIT_S = 3600.0
"""How long a worker waits for an installer, from the first test that waits for it (later ones share the deadline)."""
_DEADLINES: dict[str, float] = {}


def worker_group(nodeid: str) -> str:
    """The group a test runs in: its file's entry in SERVER_GROUPS, else its file."""
    path = nodeid.split("::", 1)[0]
    return SERVER_GROUPS.get(path.rsplit("/", 1)[-1], path)


def environments_of(group: str) -> tuple[str, ...]:
    """The environments the tests of a worker group need (ENVIRONMENTS)."""
    return ENVIRONMENTS.get(group.rsplit("/", 1)[-1], ())


def installed(names: tuple[str, ...]) -> bool:
    """Whether the installers of these environments have ended (always, when none is pending)."""
    pending = os.environ.get(PENDING)
    return not pending or all((Path(pending) / f"{name}.status").exists() for name in names)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before a test's fixtures: wait for the environments its group needs while tools/test-all.sh installs
    them; fail naming the installer's log when it failed."""
    pending = os.environ.get(PENDING)
    if not pending:
        return
    for name in environments_of(worker_group(item.nodeid)):
        status = Path(pending) / f"{name}.status"
        deadline = _DEADLINES.setdefault(name, time.monotonic() + ENVIRONMENT_WAIT_S)
        while not status.exists():
            if time.monotonic() > deadline:
                pytest.fail(f"tools/install-{name}.sh did not finish in {ENVIRONMENT_WAIT_S:.0f} s: see {pending}/{name}.log")
            time.sleep(1)
        code = status.read_text().strip()
        if code != "0":
            pytest.fail(f"this test's group needs tools/install-{name}.sh, which failed (exit {code}): "
                        f"see {pending}/{name}.log")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup`: whole groups (worker_group) go to one worker, so a file's module fixtures
    and a server's session are set up once; while tools/test-all.sh installs the environments, a group
    waiting for one goes after the groups that can run now. (xdist's own loadgroup reads `xdist_group`
    marks through a node id suffix that pytest 9 no longer takes.)"""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            """The first group in the queue whose environments are installed (the first one when none is)."""
            ready = next((group for group in self.workqueue if installed(environments_of(group))), None)
            if ready is not None:
                self.workqueue.move_to_end(ready, last=False)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use a real server are `e2e` without saying so; a file using one must be listed in
    SERVER_GROUPS (else each worker would start its own). Groups holding an `e2e` test run first
    (with `--no-loadscope-reorder`), so the long ones do not end the run on one worker."""
    for item in items:
        if any(fixture in item.fixturenames for fixture in SERVER_FIXTURES):
            item.add_marker(pytest.mark.e2e)
            if item.path.name not in SERVER_GROUPS:
                raise pytest.UsageError(f"{item.nodeid} uses a session server: add {item.path.name} to "
                                        f"SERVER_GROUPS in tests/conftest.py")
    long_groups = {worker_group(item.nodeid) for item in items if item.get_closest_marker("e2e")}
    items.sort(key=lambda item: worker_group(item.nodeid) not in long_groups)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name`, made by `build(folder)` once per test run and shared by every worker.

    Under pytest-xdist the workers' base temp folders sit in one run folder; the first worker to
    ask builds under a file lock while the others wait, then all read the same folder (fixtures built
    this way are read-only for the tests). Without xdist it is the session's own temp folder.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    shared = root / "shared-fixtures"
    shared.mkdir(exist_ok=True)
    folder, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            done.touch()
    return folder


def write_subset_annotations(sample: tuple[Path, Path], out: Path, image_ids: list[int]) -> Path:
    """A COCO instances file holding only the given images of the embedded sample (images stay where they are)."""
    data = json.loads(sample[0].read_text())
    keep = set(image_ids)
    data["images"] = [im for im in data["images"] if im["id"] in keep]
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] in keep]
    out.write_text(json.dumps(data))
    return out


REMOVABLE_IMAGE, REMOVABLE_CROP = 49, 40
"""COCO 49 of the embedded sample: its potted plant is the one object of the sample (and of the 128-image one)
that VFaith's removal rules let go (issue 29: hole off the border, no reflection, fill gates); the top
REMOVABLE_CROP rows hold no annotation."""
RECOLOUR_IMAGE, RECOLOUR_CROP = 540, 216
"""COCO 540 of the embedded sample without its top RECOLOUR_CROP rows: its white airplane is then the one object of
the samples that VFaith asks the colour of and may recolour (to blue). Since vases are never recoloured
(targets.COLOR_PALETTES), VFaith refuses every colour question of the embedded sample and of the 128-image one. In
the whole photo the airplane's box holds a car and a bus on the highway behind it (it "supports" them:
targets.movable_reason) and its red tail fin leaves the refined outline loose (recolour.ObjectPaint.refusal); cut at
RECOLOUR_CROP, those cars, the crowd of cars above and the fin's top are out of frame, and the airplane is cut only
there."""
VARIANTS = ((REMOVABLE_IMAGE, True, 0), (REMOVABLE_IMAGE, False, REMOVABLE_CROP),
            (REMOVABLE_IMAGE, True, REMOVABLE_CROP), (RECOLOUR_IMAGE, False, RECOLOUR_CROP))
"""The variants write_removable_sample adds: (image id, mirrored left to right, top rows cut)."""


def clipped_below(polygon: list[float], top: float) -> list[float]:
    """A COCO polygon (x1, y1, x2, y2, ...) clipped to y >= top (Sutherland-Hodgman against one line): what of it a
    crop starting at row `top` keeps ([] for nothing)."""
    points = list(zip(polygon[::2], polygon[1::2]))
    kept: list[tuple[float, float]] = []
    for (px, py), (qx, qy) in zip([points[-1], *points[:-1]], points):
        if (py >= top) != (qy >= top):
            kept.append((px + (qx - px) * (top - py) / (qy - py), top))
        if qy >= top:
            kept.append((qx, qy))
    return [v for point in kept for v in point] if len(kept) >= 3 else []


def write_removable_sample(out: Path) -> tuple[Path, Path]:
    """The embedded sample plus the VARIANTS (three of COCO 49: mirrored, its top REMOVABLE_CROP rows cut, both; COCO
    540 without its top RECOLOUR_CROP rows), as new images with their annotations carried along (clipped where the
    cut crosses them, left out where it leaves nothing), so that a VFaith build can remove the potted plant in four
    scenes and recolour the airplane: (annotations, images) under `out`. The variants are PNG (lossless), so every
    run makes the same ones."""
    import numpy as np
    from PIL import Image
    from pycocotools import mask as coco_mask

    annotations, images = embedded_sample()
    data = json.loads(annotations.read_text())
    folder = out / "train2017"
    folder.mkdir(parents=True)
    for image in data["images"]:
        shutil.copyfile(images / image["file_name"], folder / image["file_name"])
    for number, (source_id, mirrored, crop) in enumerate(VARIANTS, start=1):
        original = next(im for im in data["images"] if im["id"] == source_id)
        pixels = np.asarray(Image.open(images / original["file_name"]).convert("RGB"))
        anns = [a for a in data["annotations"] if a["image_id"] == source_id and a["bbox"][1] + a["bbox"][3] > crop]
        image_id = 1_000_000 * number + source_id
        width, height = original["width"], original["height"] - crop
        made = pixels[crop:, ::-1] if mirrored else pixels[crop:]
        name = f"variant{number}_{original['file_name'].replace('.jpg', '.png')}"
        Image.fromarray(np.ascontiguousarray(made)).save(folder / name)
        data["images"].append({**original, "id": image_id, "file_name": name, "height": height})
        for ann in anns:
            if not isinstance(ann["segmentation"], list):
                raise ValueError(f"variant {number}: annotation {ann['id']} is RLE; only polygons are carried")
            x, y, w, h = ann["bbox"]
            polygons = ann["segmentation"]
            cut = y < crop
            if cut:  # its polygons clipped at the cut, its box remeasured
                polygons = [clipped for clipped in (clipped_below(poly, crop) for poly in polygons) if clipped]
                xs, ys = [v for poly in polygons for v in poly[::2]], [v for poly in polygons for v in poly[1::2]]
                x, y, w, h = min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)
            carried = {**ann, "id": 1_000_000_000 * number + ann["id"], "image_id": image_id,
                       "bbox": [width - x - w if mirrored else x, y - crop, w, h],
                       "segmentation": [[v for px, py in zip(poly[::2], poly[1::2])
                                         for v in ((width - px if mirrored else px), py - crop)] for poly in polygons]}
            if cut:
                rles = coco_mask.frPyObjects(carried["segmentation"], height, width)
                carried["area"] = float(coco_mask.area(coco_mask.merge(rles)))
            data["annotations"].append(carried)
    written = out / "annotations" / "instances_train2017.json"
    written.parent.mkdir()
    written.write_text(json.dumps(data))
    return written, folder


@pytest.fixture(scope="session")
def removable_sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """write_removable_sample, made once per test run (read-only for tests)."""
    folder = built_once(tmp_path_factory, "removable-sample", write_removable_sample)
    return folder / "annotations" / "instances_train2017.json", folder / "train2017"


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
def own_secret_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets a test registers (`mmfaith.redact.register_secret`, process-wide by design) are forgotten after it:
    a later test on the same worker would otherwise see its own text masked (a token of 40 "x" masks a line of
    "x" padding), and pass or fail by the order tests ran in."""
    monkeypatch.setattr(redact, "_registered", set(redact._registered))


@pytest.fixture(autouse=True)
def own_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets an empty mmfaith cache ($MMFAITH_CACHE, inherited by subprocesses): no test
    reads another's cached judge answers, and none writes to the user's ~/.cache."""
    folder = tmp_path_factory.mktemp("mmfaith-cache")
    monkeypatch.setenv("MMFAITH_CACHE", str(folder))
    return folder


@pytest.fixture(scope="module")
def suite_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mmfaith cache for a test module: the default suite's builds (and reference ends) are paid once there."""
    return tmp_path_factory.mktemp("suite-cache")


@pytest.fixture
def cached(suite_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$MMFAITH_CACHE set to the module's `suite_cache` for this test (instead of its own empty cache)."""
    monkeypatch.setenv("MMFAITH_CACHE", str(suite_cache))
    return suite_cache


@pytest.fixture(scope="session")
def sample() -> tuple[Path, Path]:
    """(annotations file, images folder) of the embedded sample."""
    return embedded_sample()


@pytest.fixture(scope="session")
def mixed_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small build with every subset: 2 pairs per tier, 4 multi-difference pairs, 2 controls."""
    def build(out: Path) -> None:
        out.mkdir()
        build_spd_faith(BuildRequest(out=out, per_tier=2, multi=4, controls=2, seed=0, progress=False))

    return built_once(tmp_path_factory, "mixed", build)


@pytest.fixture(scope="session")
def mmfaith_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mmfaith's wheel built from this checkout (`pip wheel --no-deps --no-build-isolation`), once per run: the
    wheel group's files (SERVER_GROUPS) install it. The build writes the checkout's egg-info: it holds
    $MMFAITH_EDITABLE_LOCK, as the installs tools/test-all.sh runs beside the tests do."""
    def build(out: Path) -> None:
        out.mkdir()
        lock = os.environ.get("MMFAITH_EDITABLE_LOCK")
        with open(lock or os.devnull, "a") as held:
            if lock:
                fcntl.flock(held, fcntl.LOCK_EX)
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(out), str(REPO)], check=True, cwd=out)

    return next(built_once(tmp_path_factory, "wheel", build).glob("mmfaith-*.whl"))


@pytest.fixture(scope="session")
def builds_by_type(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One small single-difference build per edit type. The moves use PatchMatch: since SPD-Faith no longer moves
    people, fixtures or held things (issue 29), the embedded sample's one movable planter passes the fill gates only
    with a textured fill."""
    from mmfaith.builders.inpainters import InpainterSpec
    from mmfaith.builders.spd_faith.planners import PlannerSpec

    def build(kind: str, out: Path) -> None:
        out.mkdir()
        inpainter = InpainterSpec("patchmatch" if kind == "position" else "telea")
        build_spd_faith(BuildRequest(out=out, per_tier=1, seed=3, progress=False, inpainter=inpainter,
                                     planner=PlannerSpec("rule", None, (kind,))))

    return {kind: built_once(tmp_path_factory, f"only-{kind}", lambda out, kind=kind: build(kind, out))
            for kind in ("color", "remove", "position")}


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
def vfaith_build(tmp_path_factory: pytest.TempPathFactory, removable_sample: tuple[Path, Path]) -> Path:
    """A VFaith build of the removable sample (write_removable_sample: the embedded sample with COCO 49's
    removable potted plant in four scenes, so removals are made beside the crops, and COCO 540's recolourable
    airplane, so a colour pair is made): every template, 4 pairs of each at most (with 3 the crops fill the
    count and existence quotas before any removal), PatchMatch fills, seed 0 (read-only for tests)."""
    from mmfaith.builders.inpainters import InpainterSpec
    from mmfaith.builders.vfaith.build import BuildRequest, build_vfaith

    annotations, images = removable_sample
    return built_once(tmp_path_factory, "vfaith-build", lambda out: build_vfaith(
        BuildRequest(out=out, annotations=annotations, images=images, per_template=4,
                     inpainter=InpainterSpec("patchmatch"), progress=False)))


# -- a real Label Studio server, shared by the annotation tests of every family ------------------

ADMIN = "admin@example.com"
LABEL_STUDIO_START_S = 600.0
"""How long the session's server may take to start: its first start migrates a fresh SQLite database,
minutes on a loaded 2-core machine running the other worker's tests beside it."""


def free_port() -> int:
    """A port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real Label Studio on 127.0.0.1 for the whole session, stopped by process group at the end.
    Yields url, token (the admin's), files_root (its local-files document root) and startup_s."""
    try:
        executable = find_label_studio()
    except MmfaithError as exc:
        pytest.skip(f"Label Studio server not installed: {exc}")
    base = tmp_path_factory.mktemp("label-studio")
    spec = ServerSpec(executable=executable, data_dir=base / "data", files_root=base / "files", port=free_port(),
                      username=ADMIN, password="admin-pass-1234", token=secrets.token_hex(20))
    spec.files_root.mkdir()
    log = base / "server.log"
    process = start_server(spec, log)
    try:
        waited = wait_ready(spec, process, log, timeout_s=LABEL_STUDIO_START_S)
        yield {"url": spec.url, "token": spec.token, "files_root": spec.files_root, "startup_s": waited}
    finally:
        stop_server(process)


def _signup(url: str, email: str) -> str:
    """Sign a new user up through the web form, as a person would; returns their API token."""
    with httpx.Client(base_url=url, follow_redirects=True) as web:
        web.get("/user/signup/")
        web.post("/user/signup/", data={"email": email, "password": "annotator-pass-1234",
                                        "csrfmiddlewaretoken": web.cookies["csrftoken"]},
                 headers={"Referer": f"{url}/user/signup/"})
        reply = web.get("/api/current-user/token")
        reply.raise_for_status()
        return reply.json()["token"]


@pytest.fixture(scope="session")
def annotators(label_studio: dict[str, Any]) -> dict[str, Any]:
    """Three users with their own tokens (label_studio_sdk clients): the admin and two annotators who signed up."""
    from label_studio_sdk import LabelStudio

    url = label_studio["url"]
    clients = {ADMIN: LabelStudio(base_url=url, api_key=label_studio["token"])}
    for email in ("ann1@example.com", "ann2@example.com"):
        clients[email] = LabelStudio(base_url=url, api_key=_signup(url, email))
    return clients
