"""`mmfaith build spd-faith`: COCO scenes in, gated SPD-Faith image pairs out (BUILD_DIR).

Flow (SPD-Faith section 3.1 and appendix A): quotas -> a deterministic stream of slots per quota
(image, visit) -> in workers (local processes or Ray tasks, builders/executors.py): plan, edit,
gate (pairs.make_pair), and write the PNGs into the build's staging folder -> in the main process,
in slot order: move the PNGs into place, then append the record to records.jsonl or the reason to
rejected.jsonl.

Determinism and resume: the slot streams depend only on the seed and the source, results are
handled in slot order whatever the number of workers, and a quota stops at the same slot every
time. Every handled slot is journaled (its key is in `build.slot` of a record, or in a rejection),
so a re-run with the same arguments skips what is done and continues; a torn last line is cut.
"""
from __future__ import annotations

import sys
import time
from collections import Counter, deque
from collections.abc import Iterator
from itertools import islice
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mmfaith import __version__
from mmfaith.builders.build_dir import (check_recipe, check_requested, coco_source_fields, inpainter_fields,
                                       open_coco, recorded_build, usable_scenes)
from mmfaith.dirlock import hold_lock
from mmfaith.builders.coco_source import CocoSource, Scene
from mmfaith.builders.gates import MIN_FILL_TEXTURE
from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.builders.journal import BuildJournal
from mmfaith.builders.spd_faith.planners import PlannerSpec
from mmfaith.builders.spd_faith.planning import MAX_AREA, MIN_AREA, Slot, difficulty, plan_signature, seeded_rng
from mmfaith.builders.spd_faith.preview import write_preview
from mmfaith.builders.spd_faith.quotas import Quota, make_quotas
from mmfaith.builders.spd_faith.pairs import PairSettings, SlotOutcome, duplicate_rejection, make_pair, original_path
from mmfaith.builders.stage_clock import BuildClock
from mmfaith.builders.targets import TargetRules
from mmfaith.builders.executors import Executor, ExecutorChoice, choice_for, open_executor
from mmfaith.builders.staging import clear_staging, commit_files, discard_files, hole_cache_dir, stage_files
from mmfaith.builders.worker_pool import Pending
from mmfaith.errors import MmfaithError
from mmfaith.images import DEFAULT_MAX_PIXELS, sha256_file
from mmfaith.jsonl import write_atomic
from mmfaith.outdir import prepare_out_dir
from mmfaith.schema import check_record

MAX_VISITS = 12
TRIES_PER_PAIR = 40
"""A quota gives up after this many slots per pair it asks for (its stream is cut there): on a source too small
for it (five edits on one image of a 32-image sample), visiting every image MAX_VISITS times costs hundreds of
plans and fills for nothing."""


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
    recolor_people: bool = False
    workers: int = 1
    executor: ExecutorChoice | None = None
    """Where work units run (builders/executors.py); None: the local pool of `workers` processes."""
    dilation: int = 7
    blend_radius: int = 3
    min_delta_e: float = 12.0
    min_fill_texture: float = MIN_FILL_TEXTURE
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
    clock: BuildClock = field(default_factory=BuildClock)


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
        "allow_noderivs": request.allow_noderivs, "recolor_people": request.recolor_people,
        "dilation": request.dilation,
        "blend_radius": request.blend_radius, "min_delta_e": request.min_delta_e,
        "min_fill_texture": request.min_fill_texture,
    }


def _serves(scene: Scene, source: CocoSource, quota: Quota, request: BuildRequest) -> bool:
    """Whether a scene can serve a quota, judged on the annotations' areas (workers re-check on masks)."""
    if quota.subset == "control":
        return True
    pixels = float(scene.width * scene.height)
    largest = max(MAX_AREA[kind] for kind in request.planner.edit_types)
    areas = [a for a in (source.coco.anns[i.ann_id]["area"] / pixels for i in scene.editable)
             if MIN_AREA <= a <= largest]
    if quota.subset == "single":
        return any(difficulty(scene.instance_count, a) == quota.tier for a in areas)
    return len(areas) >= quota.num_edits


def _slots(quota: Quota, scenes: list[Scene], seed: int) -> Iterator[tuple[Slot, Scene]]:
    """The quota's deterministic stream: every eligible image in a seeded order, visited repeatedly, cut after
    TRIES_PER_PAIR slots per pair asked for (controls: one visit)."""
    if quota.subset == "control":
        yield from _visits(quota, scenes, seed, 1)
    else:
        yield from islice(_visits(quota, scenes, seed, MAX_VISITS), TRIES_PER_PAIR * quota.count)


def _visits(quota: Quota, scenes: list[Scene], seed: int, visits: int) -> Iterator[tuple[Slot, Scene]]:
    for visit in range(visits):
        order = seeded_rng(seed, "order", quota.key, visit).permutation(len(scenes))
        for index in order:
            scene = scenes[int(index)]
            yield Slot(quota.subset, quota.tier, quota.num_edits, scene.image_id, visit), scene


class _Journal(BuildJournal):
    """records.jsonl and rejected.jsonl of a build dir (builders/journal.py): which slots are done, the made
    pairs' signatures and options. `repairs` lists the accepted pairs whose PNG files are missing (deleted
    since), with the "ann_id:type" options that earlier pairs of their image and subset had taken when they
    were made.
    """

    TITLE = "SPD-Faith"
    FILES = {"records": "records.jsonl", "rejected": "rejected.jsonl"}
    NEEDS = {"records": "id, image_a, image_b, subset, source, build.slot", "rejected": "slot, stage"}

    def __init__(self, out: Path) -> None:
        self.done: dict[str, bool] = {}
        self.signatures: set[str] = set()
        self.taken_by: dict[tuple[str, str], set[str]] = {}
        self.clock = BuildClock()
        self.used: dict[tuple[str, str], set[str]] = {}
        self.rejected_reasons: Counter[str] = Counter()
        self.repairs: list[tuple[dict[str, Any], frozenset[str]]] = []
        super().__init__(out)

    def note(self, kind: str, line: dict[str, Any], where: str) -> None:
        accepted = kind == "records"
        key = line["build"]["slot"] if accepted else line["slot"]
        if not isinstance(key, str):
            raise TypeError(f"slot {key!r} is not a string")
        if not accepted:
            self.rejected_reasons[str(line["stage"])] += 1
            self.done[key] = False
            return
        missing = [side for side in ("image_a", "image_b") if not (self.out / line[side]).is_file()]
        if missing:
            self.repairs.append((line, self.used_options(line["source"]["file_name"], line["subset"])))
        self.remember(line)
        self.done[key] = True

    def remember(self, record: dict[str, Any]) -> None:
        """Note a made pair: its signature (duplicates) and its (object, type) options (LLM planner)."""
        self.signatures.add(_signature(record))
        self.taken_by.setdefault((record["source"]["file_name"], record["subset"]), set()).add(_signature(record))
        options = self.used.setdefault((record["source"]["file_name"], record["subset"]), set())
        options.update(f"{edit['ann_id']}:{edit['type']}" for edit in record["build"]["plan"])

    def used_options(self, file_name: str, subset: str) -> frozenset[str]:
        return frozenset(self.used.get((file_name, subset), ()))

    def taken(self, file_name: str, subset: str) -> frozenset[str]:
        """The plan signatures of the pairs made so far of this image and subset."""
        return frozenset(self.taken_by.get((file_name, subset), ()))


def _signature(record: dict[str, Any]) -> str:
    return plan_signature(record["source"]["file_name"], record["subset"], record["build"]["plan"])


PairTask = tuple[Slot, Scene, PairSettings, "str | None", frozenset[str], frozenset[str], Path]


def _make_pair_task(task: PairTask) -> SlotOutcome:
    """In a worker: make the slot's pair and write its PNGs into the build's staging folder."""
    *arguments, out = task
    outcome = make_pair(*arguments)
    if outcome.record is not None:
        assert outcome.edited_png is not None
        files = {outcome.record["image_b"]: outcome.edited_png}
        if outcome.original_png is not None:
            files[outcome.record["image_a"]] = outcome.original_png
        outcome.staged = stage_files(out, outcome.slot_key, files)
        outcome.original_png = outcome.edited_png = None
    return outcome


def _duplicate(outcome: SlotOutcome, journal: _Journal) -> dict[str, Any] | None:
    """The duplicate rejection of a made or gate-rejected candidate whose plan an earlier pair took.

    Checked before the gates' verdict, so a candidate is a duplicate whether or not its gates
    passed, and whether the worker saw the earlier pair (make_pair's `taken`) or only the driver did.
    """
    if outcome.record is not None:
        line, plan, source = outcome.record, outcome.record["build"]["plan"], outcome.record["source"]
    else:
        line = source = outcome.rejection or {}
        plan = line.get("plan")  # a gate rejection's; plan and source rejections have none
    if plan is None:
        return None
    if plan_signature(source["file_name"], Slot.from_key(outcome.slot_key).subset, plan) not in journal.signatures:
        return None
    return duplicate_rejection(outcome.slot_key, line["id"], source["image_id"], source["file_name"])


def _write_outcome(out: Path, outcome: SlotOutcome, journal: _Journal) -> bool:
    """Journal one outcome (images first, then the line); True when it became a pair."""
    duplicate = _duplicate(outcome, journal)
    if duplicate is not None:
        outcome.rejection = duplicate
        outcome.record = None
    record = outcome.record
    journal.clock.count(outcome.clock, record is not None)
    if record is None:
        assert outcome.rejection is not None
        discard_files(out, outcome.staged)
        journal.rejected.append(outcome.rejection)
        journal.rejected_reasons[outcome.rejection["stage"]] += 1
        journal.done[outcome.slot_key] = False
        return False
    check_record("spd_faith_pair", record, f"record {record['id']} (slot {outcome.slot_key})")
    commit_files(out, outcome.staged, keep_existing=frozenset({record["image_a"]}))
    journal.records.append(record)
    journal.remember(record)
    journal.done[outcome.slot_key] = True
    return True


def build_spd_faith(request: BuildRequest) -> BuildSummary:
    """Build (or resume) an SPD-Faith set in request.out; see the module docstring for the contract.

    Before anything is written into request.out, the folder is checked (`prepare_out_dir`), and so
    are its journal (every line mmfaith's) and build.json (same recipe). A resumed build rebuilds
    the PNGs of journaled pairs that were deleted since, byte-identical. Once build.json says
    "running", any error ends it as "failed" (with the error) or "interrupted", never "running".
    """
    started = time.time()
    if request.max_pixels < 1:
        raise MmfaithError(f"--max-pixels must be 1 or more, not {request.max_pixels}; leave it out for the default "
                           f"({DEFAULT_MAX_PIXELS}).")
    source = open_coco(request.annotations, request.images)
    quotas = make_quotas(request.per_tier, request.multi, request.paper_mix, request.controls)
    if not quotas:
        raise MmfaithError("nothing to build: give --per-tier N, --multi N, --paper-mix N or --controls N.")
    out = prepare_out_dir(request.out, "build")
    journal = _Journal(out)
    recipe = _recipe(request, source)
    build_json = out / "build.json"
    check_recipe(build_json, recipe)
    check_requested(build_json, {"per_tier": request.per_tier, "multi": request.multi,
                                 "paper_mix": request.paper_mix, "controls": request.controls})
    for folder in ("images/original", "images/edited", "images/control"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    settings = PairSettings(
        seed=request.seed, dilation=request.dilation, blend_radius=request.blend_radius,
        min_delta_e=request.min_delta_e, min_fill_texture=request.min_fill_texture, max_pixels=request.max_pixels,
        inpainter=request.inpainter,
        planner=request.planner, dataset=source.dataset_name, split=source.split, version=__version__,
        targets=TargetRules(request.inpainter.name, request.recolor_people), hole_cache=hole_cache_dir(out))

    fields = {"source": coco_source_fields(source), "inpainter": inpainter_fields(request.inpainter),
              "requested": {"per_tier": request.per_tier, "multi": request.multi, "paper_mix": request.paper_mix,
                            "controls": request.controls},
              "executor": asdict(choice_for(request.executor, request.workers))}
    with hold_lock(out, "build --out"):
        return recorded_build(build_json, recipe, fields, started,
                              lambda: _build(request, source, quotas, settings, journal), _result_fields)


def _build(request: BuildRequest, source: CocoSource, quotas: list[Quota], settings: PairSettings,
           journal: _Journal) -> BuildSummary:
    """Repair, fill the quotas and write the preview; the summary for build.json."""
    out = request.out
    journal.open()
    clear_staging(out)
    try:
        _repair_missing_images(out, journal, source, settings)
        usable, skipped = usable_scenes(source, request.allow_noderivs)
        runs = [_QuotaRun(quota, _slots(quota, [s for s in usable if _serves(s, source, quota, request)],
                                        request.seed)) for quota in quotas]
        pool = open_executor(choice_for(request.executor, request.workers),
                             reads=[source.annotations_path, source.images_dir], writes=[out])
        bar = tqdm(total=sum(q.count for q in quotas), unit="pair", desc="spd-faith", disable=not request.progress,
                   dynamic_ncols=True)
        finished = False
        try:
            _Pipeline(request, settings, journal, pool, bar).run(runs)
            write_preview(out, request.preview_pairs, pool.map)
            finished = True
        finally:
            bar.close()
            pool.close(abort=not finished)
            clear_staging(out)
    finally:
        journal.close()
    accepted = {run.quota.key: run.made for run in runs}
    shortfall = {run.quota.key: run.quota.count - run.made for run in runs if run.made < run.quota.count}
    for key, missing in shortfall.items():
        print(f"warning: {key}: made {accepted[key]} of {accepted[key] + missing} pairs; the source has too few "
              "suitable objects (add images, allow more edit types, or lower the count).", file=sys.stderr)
    return BuildSummary(accepted, dict(journal.rejected_reasons), shortfall, dict(skipped), out, journal.clock)


def _repair_missing_images(out: Path, journal: _Journal, source: CocoSource, settings: PairSettings) -> None:
    """Rebuild the PNGs of journaled pairs whose files were deleted (the same slot makes the same bytes).

    MmfaithError when the rebuilt pair is not the journaled one (its id or image hashes differ).
    """
    for record, used in journal.repairs:
        slot = Slot.from_key(record["build"]["slot"])
        outcome = make_pair(slot, source.scene(slot.image_id), settings, None, used)
        made = outcome.record or {}
        if [made.get(k) for k in ("id", "image_a_sha256", "image_b_sha256")] != \
                [record[k] for k in ("id", "image_a_sha256", "image_b_sha256")]:
            raise MmfaithError(f"{out / record['image_b']}: missing, and remaking pair {record['id']} does not give "
                               "the same images (did the source images change?); restore the file or choose a new "
                               "--out.")
        for side, data in (("image_a", outcome.original_png), ("image_b", outcome.edited_png)):
            if not (out / record[side]).is_file():
                assert data is not None
                write_atomic(out / record[side], data)


@dataclass
class _QuotaRun:
    """A quota being filled: its slot stream, pairs made, and submitted slots in stream order."""

    quota: Quota
    stream: Iterator[tuple[Slot, Scene]]
    made: int = 0
    exhausted: bool = False
    submitted: deque[Pending] = field(default_factory=deque)

    @property
    def wants_more(self) -> bool:
        return not self.exhausted and self.made + len(self.submitted) < self.quota.count


class _Pipeline:
    """Fills the quotas in order with a window of tasks in flight across quota boundaries.

    Results are handled per quota in stream order, and a quota stops at the same slot whatever the
    window: so the files do not depend on --workers. Later quotas are submitted only while the
    current one has enough slots in flight, and a result past a full quota is discarded unwritten.
    """

    def __init__(self, request: BuildRequest, settings: PairSettings, journal: _Journal, pool: Executor,
                 bar: tqdm) -> None:
        self.request, self.settings, self.journal, self.pool, self.bar = request, settings, journal, pool, bar
        self.original_sha256: dict[int, str] = {}

    def run(self, runs: list[_QuotaRun]) -> None:
        for index, current in enumerate(runs):
            while current.made < current.quota.count:
                self._submit(runs[index:])
                if not current.submitted:
                    break  # the stream is exhausted: a shortfall
                self._handle(current, current.submitted.popleft().get())
            current.submitted.clear()

    def _submit(self, runs: list[_QuotaRun]) -> None:
        room = self.pool.window - sum(len(run.submitted) for run in runs)
        for position, run in enumerate(runs):
            # The current quota may always submit one slot, or a full window could starve it.
            while run.wants_more and (room > 0 or (position == 0 and not run.submitted)):
                if self._submit_next(run):
                    room -= 1
            if run.wants_more or run.exhausted:
                return  # later quotas wait until this one has all the slots it needs in flight

    def _submit_next(self, run: _QuotaRun) -> bool:
        """Submit the stream's next new slot; journaled slots are counted instead. True if submitted."""
        slot_scene = next(run.stream, None)
        if slot_scene is None:
            run.exhausted = True
            return False
        slot, scene = slot_scene
        if slot.key in self.journal.done:
            if self.journal.done[slot.key]:
                run.made += 1
                self.bar.update(1)
            return False
        task = (slot, scene, self.settings, self._known_original(scene),
                self.journal.used_options(scene.file_name, slot.subset),
                self.journal.taken(scene.file_name, slot.subset), self.request.out)
        run.submitted.append(self.pool.submit(_make_pair_task, task))
        return True

    def _known_original(self, scene: Scene) -> str | None:
        """The sha256 of the scene's original PNG once written, so workers need not encode it again."""
        if scene.image_id not in self.original_sha256:
            path = self.request.out / original_path(scene)
            if not path.exists():
                return None
            self.original_sha256[scene.image_id] = sha256_file(path)
        return self.original_sha256[scene.image_id]

    def _handle(self, run: _QuotaRun, outcome: SlotOutcome) -> None:
        if _write_outcome(self.request.out, outcome, self.journal):
            run.made += 1
            self.bar.update(1)
            record = outcome.record
            assert record is not None
            self.original_sha256[record["source"]["image_id"]] = record["image_a_sha256"]
        self.bar.set_postfix(rejected=sum(self.journal.rejected_reasons.values()), refresh=False)


def _result_fields(summary: BuildSummary) -> dict[str, Any]:
    return {"counts": {"accepted": summary.accepted, "rejected_by_stage": summary.rejected,
                       "shortfall": summary.shortfall, "skipped_images": summary.skipped_images},
            "cpu_seconds": summary.clock.as_json()}
