"""`mmfaith build spd-faith`: COCO scenes in, gated SPD-Faith image pairs out (BUILD_DIR).

Flow (SPD-Faith section 3.1 and appendix A): quotas -> a deterministic stream of slots per quota
(image, visit) -> in workers: plan, edit, gate (spd_pairs.make_pair) -> in the main process, in slot
order: write the PNGs, then append the record to records.jsonl or the reason to rejected.jsonl.

Determinism and resume: the slot streams depend only on the seed and the source, results are
handled in slot order whatever the number of workers, and a quota stops at the same slot every
time. Every handled slot is journaled (its key is in `build.slot` of a record, or in a rejection),
so a re-run with the same arguments skips what is done and continues; a torn last line is cut.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import platform
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from tqdm import tqdm

from mmfaith import __version__
from mmfaith.builders.coco_source import CocoSource, Scene, embedded_sample
from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.builders.planners import PlannerSpec
from mmfaith.builders.planning import MIN_AREA, Slot, difficulty, plan_signature, seeded_rng
from mmfaith.builders.preview import write_preview
from mmfaith.builders.quotas import Quota, make_quotas
from mmfaith.builders.spd_pairs import PairSettings, SlotOutcome, make_pair
from mmfaith.errors import MmfaithError
from mmfaith.images import DEFAULT_MAX_PIXELS, sha256_file
from mmfaith.jsonl import JsonlAppender, canonical_json, read_jsonl, write_atomic
from mmfaith.schema import check_record

MAX_VISITS = 12
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


@dataclass
class BuildRequest:
    """Everything `mmfaith build spd-faith` takes; the recipe part must match to resume a build."""

    out: Path
    annotations: Path | None = None
    images: Path | None = None
    seed: int = 0
    per_tier: int = 0
    multi: int = 0
    paper_mix: int | None = None
    controls: int = 0
    planner: PlannerSpec = field(default_factory=PlannerSpec)
    inpainter: InpainterSpec = field(default_factory=lambda: InpainterSpec("telea"))
    allow_noderivs: bool = False
    workers: int = 1
    dilation: int = 7
    blend_radius: int = 3
    min_delta_e: float = 12.0
    max_pixels: int = DEFAULT_MAX_PIXELS
    preview_pairs: int = 12
    progress: bool = True


@dataclass
class BuildSummary:
    accepted: dict[str, int]
    rejected: dict[str, int]
    shortfall: dict[str, int]
    skipped_images: dict[str, int]
    out: Path


def _source(request: BuildRequest) -> CocoSource:
    if (request.annotations is None) != (request.images is None):
        raise MmfaithError("give both --coco-annotations FILE and --images DIR, or neither for the embedded sample.")
    if request.annotations is None:
        annotations, images = embedded_sample()
        return CocoSource(annotations, images, dataset_name="mmfaith-coco-sample")
    if not request.images.is_dir():
        raise MmfaithError(f"{request.images}: images folder not found (--images).")
    return CocoSource(request.annotations, request.images)


def _recipe(request: BuildRequest, source: CocoSource) -> dict[str, Any]:
    """The settings that decide what each slot makes; resuming with another recipe is refused.

    The counts are not part of it: re-running with larger counts extends a build (the slot streams
    continue where they stopped), and build.json records the counts of the last run.
    """
    return {
        "family": "spd-faith",
        "source": {"dataset": source.dataset_name, "annotations_sha256": sha256_file(source.annotations_path)},
        "seed": request.seed,
        "planner": request.planner.provenance(), "inpainter": {"name": request.inpainter.name},
        "allow_noderivs": request.allow_noderivs, "dilation": request.dilation,
        "blend_radius": request.blend_radius, "min_delta_e": request.min_delta_e,
    }


def _usable_scenes(source: CocoSource, request: BuildRequest) -> tuple[list[Scene], Counter[str]]:
    """Scenes the build may edit: license allows derivatives (or --allow-noderivs) and one instance or more."""
    scenes, skipped = [], Counter()
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        if not scene.license.allows_derivatives and not request.allow_noderivs:
            skipped["noderivs"] += 1
        elif scene.instance_count == 0:
            skipped["no_instances"] += 1
        else:
            scenes.append(scene)
    return scenes, skipped


def _serves(scene: Scene, source: CocoSource, quota: Quota) -> bool:
    """Whether a scene can serve a quota, judged on the annotations' areas (workers re-check on masks)."""
    if quota.subset == "control":
        return True
    pixels = float(scene.width * scene.height)
    areas = [a for a in (source.coco.anns[i.ann_id]["area"] / pixels for i in scene.editable) if a >= MIN_AREA]
    if quota.subset == "single":
        return any(difficulty(scene.instance_count, a) == quota.tier for a in areas)
    return len(areas) >= quota.num_edits


def _slots(quota: Quota, scenes: list[Scene], seed: int) -> Iterator[tuple[Slot, Scene]]:
    """The quota's deterministic stream: every eligible image in a seeded order, visited repeatedly."""
    visits = 1 if quota.subset == "control" else MAX_VISITS
    for visit in range(visits):
        order = seeded_rng(seed, "order", quota.key, visit).permutation(len(scenes))
        for index in order:
            scene = scenes[int(index)]
            yield Slot(quota.subset, quota.tier, quota.num_edits, scene.image_id, visit), scene


class _Journal:
    """records.jsonl and rejected.jsonl of a build dir: what was done, and appending more."""

    def __init__(self, out: Path) -> None:
        self.records_path = out / "records.jsonl"
        self.rejected_path = out / "rejected.jsonl"
        self.done: dict[str, bool] = {}
        self.signatures: set[str] = set()
        self.used: dict[tuple[str, str], set[str]] = {}
        self.rejected_reasons: Counter[str] = Counter()
        for path, accepted in ((self.records_path, True), (self.rejected_path, False)):
            if path.exists():
                for _, line in read_jsonl(path):
                    key = line["build"]["slot"] if accepted else line["slot"]
                    self.done[key] = accepted
                    if accepted:
                        self.remember(line)
                    else:
                        self.rejected_reasons[line["stage"]] += 1
        self.records = JsonlAppender(self.records_path)
        self.rejected = JsonlAppender(self.rejected_path)

    def remember(self, record: dict[str, Any]) -> None:
        """Note a made pair: its signature (duplicates) and its (object, type) options (LLM planner)."""
        self.signatures.add(_signature(record))
        options = self.used.setdefault((record["source"]["file_name"], record["subset"]), set())
        options.update(f"{edit['ann_id']}:{edit['type']}" for edit in record["build"]["plan"])

    def used_options(self, file_name: str, subset: str) -> frozenset[str]:
        return frozenset(self.used.get((file_name, subset), ()))

    def close(self) -> None:
        self.records.close()
        self.rejected.close()


def _signature(record: dict[str, Any]) -> str:
    return plan_signature(record["source"]["file_name"], record["subset"], record["build"]["plan"])


def _pin_worker_threads() -> None:
    cv2.setNumThreads(1)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


PairTask = tuple[Slot, Scene, PairSettings, bool, frozenset[str]]


def _make_pair_task(task: PairTask) -> SlotOutcome:
    return make_pair(*task)


class _Executor:
    """Runs make_pair in-process (workers=1) or in a spawn pool with one library thread per worker."""

    def __init__(self, workers: int) -> None:
        self.pool = None
        if workers > 1:
            saved = {name: os.environ.get(name) for name in THREAD_VARIABLES}
            os.environ.update({name: "1" for name in THREAD_VARIABLES})
            try:
                self.pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_pin_worker_threads)
            finally:
                for name, value in saved.items():
                    if value is None:
                        os.environ.pop(name, None)
                    else:
                        os.environ[name] = value

    def map(self, tasks: list[PairTask]) -> list[SlotOutcome]:
        if self.pool is None:
            return [_make_pair_task(task) for task in tasks]
        return self.pool.map(_make_pair_task, tasks, chunksize=1)

    def close(self, abort: bool = False) -> None:
        """Stop the workers: let them finish, or (after an error or Ctrl-C) end them at once."""
        if self.pool is not None:
            if abort:
                self.pool.terminate()
            else:
                self.pool.close()
            self.pool.join()


def _write_outcome(out: Path, outcome: SlotOutcome, journal: _Journal) -> bool:
    """Journal one outcome (images first, then the line); True when it became a pair."""
    record = outcome.record
    if record is not None and _signature(record) in journal.signatures:
        outcome.rejection = {"slot": outcome.slot_key, "id": record["id"], "image_id": record["source"]["image_id"],
                             "file_name": record["source"]["file_name"], "stage": "duplicate",
                             "reason": "an earlier pair already edits the same objects the same way"}
        record = None
    if record is None:
        assert outcome.rejection is not None
        journal.rejected.append(outcome.rejection)
        journal.rejected_reasons[outcome.rejection["stage"]] += 1
        journal.done[outcome.slot_key] = False
        return False
    check_record("spd_faith_pair", record, f"record {record['id']} (slot {outcome.slot_key})")
    original = out / record["image_a"]
    if outcome.original_png is not None and not original.exists():
        write_atomic(original, outcome.original_png)
    assert outcome.edited_png is not None
    write_atomic(out / record["image_b"], outcome.edited_png)
    journal.records.append(record)
    journal.remember(record)
    journal.done[outcome.slot_key] = True
    return True


def build_spd_faith(request: BuildRequest) -> BuildSummary:
    """Build (or resume) an SPD-Faith set in request.out; see the module docstring for the contract."""
    started = time.time()
    source = _source(request)
    quotas = make_quotas(request.per_tier, request.multi, request.paper_mix, request.controls)
    if not quotas:
        raise MmfaithError("nothing to build: give --per-tier N, --multi N, --paper-mix N or --controls N.")
    out = request.out
    for folder in ("images/original", "images/edited", "images/control"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    recipe = _recipe(request, source)
    build_json = out / "build.json"
    if build_json.exists():
        previous = read_json_object(build_json).get("recipe")
        if previous != recipe:
            changed = sorted(k for k in recipe if (previous or {}).get(k) != recipe[k])
            raise MmfaithError(f"{out} holds a build made with other settings ({', '.join(changed)} differ); "
                               "re-run with the same arguments to resume, or choose a new --out.")
    settings = PairSettings(
        seed=request.seed, dilation=request.dilation, blend_radius=request.blend_radius,
        min_delta_e=request.min_delta_e, max_pixels=request.max_pixels, inpainter=request.inpainter,
        planner=request.planner, dataset=source.dataset_name, split=source.split, version=__version__)
    _write_build_json(build_json, recipe, request, source, started, None, status="running")

    journal = _Journal(out)
    usable, skipped = _usable_scenes(source, request)
    accepted: dict[str, int] = {}
    shortfall: dict[str, int] = {}
    executor = _Executor(request.workers)
    total = sum(q.count for q in quotas)
    bar = tqdm(total=total, unit="pair", desc="spd-faith", disable=not request.progress, dynamic_ncols=True)
    finished = False
    try:
        for quota in quotas:
            scenes = [scene for scene in usable if _serves(scene, source, quota)]
            accepted[quota.key] = _fill_quota(quota, scenes, settings, request, journal, executor, bar)
            if accepted[quota.key] < quota.count:
                shortfall[quota.key] = quota.count - accepted[quota.key]
                tqdm.write(f"warning: {quota.key}: made {accepted[quota.key]} of {quota.count} pairs; "
                           "the source has too few suitable objects (add images or lower the count).",
                           file=sys.stderr)
        finished = True
    finally:
        bar.close()
        executor.close(abort=not finished)
        journal.close()
    write_preview(out, request.preview_pairs)
    summary = BuildSummary(accepted, dict(journal.rejected_reasons), shortfall, dict(skipped), out)
    _write_build_json(build_json, recipe, request, source, started, summary, status="complete")
    return summary


def _fill_quota(quota: Quota, scenes: list[Scene], settings: PairSettings, request: BuildRequest,
                journal: _Journal, executor: _Executor, bar: tqdm) -> int:
    made = 0
    stream = _slots(quota, scenes, request.seed)
    exhausted = False
    while made < quota.count and not exhausted:
        batch: list[PairTask] = []
        # Enough slots to keep every worker busy, and no more: a result past the quota is discarded.
        wanted = max(quota.count - made, request.workers)
        while len(batch) < min(wanted, 16 * request.workers):
            slot_scene = next(stream, None)
            if slot_scene is None:
                exhausted = True
                break
            slot, scene = slot_scene
            if slot.key in journal.done:
                if journal.done[slot.key]:
                    made += 1
                    bar.update(1)
                    if made >= quota.count:
                        return made
                continue
            want_original = not (request.out / f"images/original/{scene.image_id:012d}.png").exists()
            batch.append((slot, scene, settings, want_original, journal.used_options(scene.file_name, slot.subset)))
        for outcome in executor.map(batch):
            if made >= quota.count:
                break
            if _write_outcome(request.out, outcome, journal):
                made += 1
                bar.update(1)
            bar.set_postfix(rejected=sum(journal.rejected_reasons.values()), refresh=False)
    return made


def read_json_object(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise MmfaithError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}).") from exc
    if not isinstance(value, dict):
        raise MmfaithError(f"{path}: expected a JSON object.")
    return value


def _write_build_json(path: Path, recipe: dict[str, Any], request: BuildRequest, source: CocoSource,
                      started: float, summary: BuildSummary | None, status: str) -> None:
    """Provenance of the build; the only file of a build dir that holds wall-clock time."""
    document = {
        "status": status,
        "mmfaith_version": __version__,
        "recipe": recipe,
        "source": {"dataset": source.dataset_name, "annotations": str(source.annotations_path),
                   "images": str(source.images_dir), "split": source.split},
        "inpainter": asdict(request.inpainter) | {"lama_model": str(request.inpainter.lama_model)
                                                   if request.inpainter.lama_model else None},
        "requested": {"per_tier": request.per_tier, "multi": request.multi, "paper_mix": request.paper_mix,
                      "controls": request.controls},
        "workers": request.workers,
        "environment": {"python": platform.python_version(), "numpy": np.__version__, "opencv": cv2.__version__},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
    }
    if summary is not None:
        document.update({
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.time() - started, 2),
            "counts": {"accepted": summary.accepted, "rejected_by_stage": summary.rejected,
                       "shortfall": summary.shortfall, "skipped_images": summary.skipped_images},
        })
    write_atomic(path, (canonical_json(document) + "\n").encode("utf-8"))
