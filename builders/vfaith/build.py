"""`mmfaith build vfaith`: COCO scenes in, gated VFaith pairs and perception items out (BUILD_DIR).

Flow (VFaith section 3.1, offline): a deterministic stream of images (a seeded order) -> in workers
(builders/worker_pool.py): the image's questions (builders/coco_questions.py), each cue's edit and
its gates (builders/vfaith/offline.py) -> in the main process, in stream order: write the PNGs,
then append the pair to records.jsonl and its perception item to perception.jsonl, or the reason
to rejected.jsonl. Each template has its own quota (`per_template`); a pair past a full quota is
discarded unwritten, and the build stops when every quota is full or the images run out.

BUILD_DIR: build.json (recipe, counts, letter balance, provenance; the only file with wall-clock
time), records.jsonl, perception.jsonl, rejected.jsonl, images/original/, images/edited/,
preview.png.

Determinism and resume: the stream depends only on the seed and the source, results are handled in
stream order whatever the number of workers, and every handled question is journaled (its key in
`build.slot` of a record, or in a rejection). A re-run with the same recipe skips what is done and
continues (larger quotas extend a build); a torn last line is cut; a pair whose perception line was
lost in a crash gets it again (it depends only on the pair); deleted edited PNGs are remade.
Licence: images whose licence forbids derivatives (NoDerivs) are not edited unless
`allow_noderivs`.
"""
from __future__ import annotations

import sys
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mmfaith import __version__
from mmfaith.builders.coco_questions import TEMPLATES
from mmfaith.builders.build_dir import (check_recipe, check_requested, coco_source_fields, inpainter_fields,
                                       open_coco, recorded_build, resume_note, usable_scenes)
from mmfaith.dirlock import hold_lock
from mmfaith.builders.coco_source import CocoSource, Scene
from mmfaith.builders.executors import Executor, ExecutorChoice, choice_for, open_executor
from mmfaith.builders.gates import DEFAULT_MIN_DELTA_E, MIN_FILL_TEXTURE
from mmfaith.builders.inpainters import InpainterSpec
from mmfaith.builders.journal import BuildJournal
from mmfaith.builders.scene_view import seeded_rng
from mmfaith.builders.stage_clock import BuildClock
from mmfaith.builders.staging import clear_staging, commit_files, hole_cache_dir, stage_files
from mmfaith.builders.targets import TargetRules
from mmfaith.gold_balance import DEFAULT_MARGIN, GoldCap, gold_summary
from mmfaith.builders.vfaith.offline import (QUESTION_RULES, ImageOutcome, OfflineSettings, QuestionOutcome,
                                             make_image_pairs, original_path)
from mmfaith.builders.vfaith.perception import perception_item
from mmfaith.builders.vfaith.presentation import PHOTO_SIDES, PairPresenter, gold_items, source_photo
from mmfaith.builders.vfaith.preview import write_preview
from mmfaith.builders.worker_pool import Pending
from mmfaith.errors import MmfaithError
from mmfaith.images import DEFAULT_MAX_PIXELS, sha256_file
from mmfaith.jsonl import write_atomic
from mmfaith.outdir import prepare_out_dir
from mmfaith.schema import check_record


@dataclass
class BuildRequest:
    """Everything `mmfaith build vfaith` takes; the recipe part must match to resume a build."""

    out: Path
    annotations: Path | None = None
    images: Path | None = None
    seed: int = 0
    per_template: int = 5
    templates: tuple[str, ...] = TEMPLATES
    per_image: int = 2
    inpainter: InpainterSpec = field(default_factory=lambda: InpainterSpec("telea"))
    allow_noderivs: bool = False
    workers: int = 1
    executor: ExecutorChoice | None = None
    """Where work units run (builders/executors.py); None: the local pool of `workers` processes."""
    dilation: int = 7
    blend_radius: int = 3
    min_delta_e: float = DEFAULT_MIN_DELTA_E
    min_fill_texture: float = MIN_FILL_TEXTURE
    max_pixels: int = DEFAULT_MAX_PIXELS
    preview_pairs: int = 8
    progress: bool = True
    gold_margin: float = DEFAULT_MARGIN
    """The per-template cap on one gold's share (mmfaith/gold_balance.py), above chance."""


@dataclass
class BuildSummary:
    accepted: dict[str, int]
    rejected: dict[str, int]
    shortfall: dict[str, int]
    skipped_images: dict[str, int]
    letters: dict[str, dict[str, int]]
    """How often each letter is the gold answer, of the original and of the edited question."""
    out: Path
    gold: dict[str, dict[str, Any]]
    """mmfaith/gold_balance.py's summary, templates as `<template>:original` and `<template>:edited`."""
    clock: BuildClock = field(default_factory=BuildClock)


def _recipe(request: BuildRequest, source: CocoSource) -> dict[str, Any]:
    """The settings that decide what each question makes; resuming with another recipe is refused."""
    return {
        "family": "vfaith", "path": "offline",
        "source": {"dataset": source.dataset_name, "annotations_sha256": sha256_file(source.annotations_path)},
        "seed": request.seed, "templates": list(request.templates), "per_image": request.per_image,
        "inpainter": {"name": request.inpainter.name}, "allow_noderivs": request.allow_noderivs,
        "dilation": request.dilation, "blend_radius": request.blend_radius, "min_delta_e": request.min_delta_e,
        "min_fill_texture": request.min_fill_texture, "question_rules": asdict(QUESTION_RULES),
        "gold_margin": request.gold_margin, "presentation": "vfaith-balanced/1",
    }


class Journal(BuildJournal):
    """records.jsonl, perception.jsonl and rejected.jsonl of a build dir (builders/journal.py): which slots are
    done, the pairs made per template, the pairs whose perception items exist."""

    TITLE = "VFaith"
    FILES = {"records": "records.jsonl", "perception": "perception.jsonl", "rejected": "rejected.jsonl"}
    NEEDS = {"records": "build.slot, build.template", "perception": "pair_id", "rejected": "slot, stage"}

    def __init__(self, out: Path) -> None:
        self.done: set[str] = set()
        self.made: Counter[str] = Counter()
        self.rejected_reasons: Counter[str] = Counter()
        self.pairs: list[dict[str, Any]] = []
        self.perceived: set[str] = set()
        self.clock = BuildClock()
        super().__init__(out)

    def note(self, kind: str, line: dict[str, Any], where: str) -> None:
        if kind == "perception":
            self.perceived.add(line["pair_id"])
        elif kind == "rejected":
            self.done.add(line["slot"])
            self.rejected_reasons[line["stage"]] += 1
        else:
            self.done.add(line["build"]["slot"])
            self.made[line["build"]["template"]] += 1
            self.pairs.append(line)


class Keeper:
    """What decides whether and how a made pair is kept: the presentation balance
    (builders/vfaith/presentation.py) and the gold cap (mmfaith/gold_balance.py), over the kept pairs."""

    def __init__(self, seed: int, margin: float, kept: list[dict[str, Any]]) -> None:
        self.presenter = PairPresenter(seed, QUESTION_RULES.n_options)
        self.cap = GoldCap(margin, gold_items(kept))
        for record in kept:
            self.presenter.record(record)

    def admit(self, outcome: QuestionOutcome) -> dict[str, Any] | None:
        """Present a made pair; its perception item, or None with the outcome turned into a rejection (stage
        `gold_balance`) when its original or edited gold would break the cap."""
        assert outcome.record is not None
        record, perception = self.presenter.present(outcome.record)
        reason = next((r for item in gold_items([record]) if (r := self.cap.refusal(item)) is not None), None)
        if reason is not None:
            source = record["source"]
            outcome.rejection = {"image_id": source["image_id"], "file_name": source["file_name"],
                                 "slot": outcome.key, "template": outcome.template, "question": record["question"],
                                 "id": record["id"], "stage": "gold_balance", "reason": reason}
            outcome.record = None
            return None
        outcome.record = record
        for item in gold_items([record]):
            self.cap.add(item)
        self.presenter.record(record)
        return perception


def _scene_order(source: CocoSource, request: BuildRequest) -> tuple[list[Scene], Counter[str]]:
    """The usable scenes (build_dir.usable_scenes: licence, instances) in the build's seeded order."""
    scenes, skipped = usable_scenes(source, request.allow_noderivs)
    order = seeded_rng(request.seed, "vfaith-order").permutation(len(scenes))
    return [scenes[int(i)] for i in order], skipped


ImageTask = tuple[Scene, OfflineSettings, frozenset[str], "str | None", frozenset[str], Path]


def _image_task(task: ImageTask) -> ImageOutcome:
    """In a worker: make one image's pairs and write their PNGs into the build's staging folder."""
    *arguments, out = task
    result = make_image_pairs(*arguments)
    files = {o.record["image_edited"]: o.edited_png for o in result.outcomes if o.record is not None and o.edited_png}
    made = [o.record for o in result.outcomes if o.record is not None]
    if made and result.original_png is not None:
        files[made[0]["image_original"]] = result.original_png
    result.staged = stage_files(out, f"vfaith:{result.image_id}", files)
    result.original_png = None
    for outcome in result.outcomes:
        outcome.edited_png = None
    return result


def build_vfaith(request: BuildRequest) -> BuildSummary:
    """Build (or resume) a VFaith set in request.out; see the module docstring for the contract.

    The folder is checked before anything is written (`prepare_out_dir`), and so are its journal and
    build.json (same recipe). Once build.json says "running", any error ends it as "failed" (with the
    error) or "interrupted", never "running".
    """
    started = time.time()
    if request.per_template < 0 or request.per_image < 1:
        raise MmfaithError("--per-template must be 0 or more, --per-image 1 or more.")
    executor = choice_for(request.executor, request.workers)  # checks --workers
    unknown = [t for t in request.templates if t not in TEMPLATES]
    if unknown or not request.templates:
        raise MmfaithError(f"--templates: use a comma-separated subset of {', '.join(TEMPLATES)} (not {unknown}).")
    source = open_coco(request.annotations, request.images)
    out = prepare_out_dir(request.out, "build")
    journal = Journal(out)
    recipe = _recipe(request, source)
    build_json = out / "build.json"
    check_recipe(build_json, recipe)
    check_requested(build_json, {"per_template": request.per_template})
    for folder in ("images/original", "images/edited"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    settings = OfflineSettings(
        seed=request.seed, templates=tuple(request.templates), per_image=request.per_image, dilation=request.dilation,
        blend_radius=request.blend_radius, min_delta_e=request.min_delta_e, min_fill_texture=request.min_fill_texture,
        max_pixels=request.max_pixels, inpainter=request.inpainter, dataset=source.dataset_name, split=source.split,
        version=__version__, targets=TargetRules(request.inpainter.name), hole_cache=hole_cache_dir(out))

    fields = {"source": coco_source_fields(source), "inpainter": inpainter_fields(request.inpainter),
              "requested": {"per_template": request.per_template}, "executor": asdict(executor)}
    with hold_lock(out, "build --out"):
        return recorded_build(build_json, recipe, fields, started,
                              lambda: _build(request, source, settings, journal, executor), _result_fields)


def _build(request: BuildRequest, source: CocoSource, settings: OfflineSettings, journal: Journal,
           executor: ExecutorChoice) -> BuildSummary:
    out = request.out
    journal.open()
    clear_staging(out)
    try:
        _repair(out, journal, source, settings)
        scenes, skipped = _scene_order(source, request)
        quotas = {template: request.per_template for template in request.templates}
        pool = open_executor(executor, reads=[source.annotations_path, source.images_dir], writes=[out])
        bar = tqdm(total=sum(quotas.values()), unit="pair", desc="vfaith", disable=not request.progress,
                   dynamic_ncols=True)
        bar.update(sum(min(journal.made[t], q) for t, q in quotas.items()))
        resume_note(out, sum(min(journal.made[t], q) for t, q in quotas.items()), sum(quotas.values()), "pairs")
        finished = False
        try:
            keeper = Keeper(settings.seed, request.gold_margin, journal.pairs)
            _fill(out, scenes, settings, journal, quotas, pool, bar, keeper)
            write_preview(out, request.preview_pairs)
            finished = True
        finally:
            bar.close()
            pool.close(abort=not finished)
            clear_staging(out)
    finally:
        journal.close()
    accepted = {t: journal.made[t] for t in request.templates}
    shortfall = {t: q - accepted[t] for t, q in quotas.items() if accepted[t] < q}
    for template, missing in shortfall.items():
        print(f"warning: {template}: made {accepted[template]} of {quotas[template]} pairs; the source has too few "
              "suitable questions (add images, raise --per-image, or lower --per-template).", file=sys.stderr)
    letters = {side: dict(sorted(Counter(pair[f"answer_{side}"] for pair in journal.pairs).items()))
               for side in ("original", "edited")}
    gold = gold_summary(gold_items(journal.pairs))
    return BuildSummary(accepted, dict(journal.rejected_reasons), shortfall, dict(skipped), letters, out, gold,
                        journal.clock)


def _fill(out: Path, scenes: list[Scene], settings: OfflineSettings, journal: Journal, quotas: dict[str, int],
          pool: Executor, bar: tqdm, keeper: Keeper) -> None:
    """Submit images in stream order (a window of them in flight), handle their outcomes in that order."""
    full = lambda: all(journal.made[t] >= q for t, q in quotas.items())  # noqa: E731
    stream = iter(scenes)
    pending: deque[tuple[Scene, Pending]] = deque()
    original_sha256: dict[int, str] = {}
    while not full():
        while len(pending) < pool.window:
            scene = next(stream, None)
            if scene is None:
                break
            path = out / original_path(scene)
            known = original_sha256.get(scene.image_id) or (sha256_file(path) if path.exists() else None)
            open_templates = frozenset(t for t, q in quotas.items() if journal.made[t] < q)
            pending.append((scene, pool.submit(_image_task, (scene, settings, frozenset(journal.done), known,
                                                             open_templates, out))))
        if not pending:
            return
        scene, handle = pending.popleft()
        result: ImageOutcome = handle.get()
        made = 0
        if result.rejection is not None:
            if result.rejection["slot"] not in journal.done:
                journal.rejected.append(result.rejection)
                journal.rejected_reasons[result.rejection["stage"]] += 1
                journal.done.add(result.rejection["slot"])
            continue
        for outcome in result.outcomes:
            if journal.made[outcome.template] >= quotas.get(outcome.template, 0) or outcome.key in journal.done:
                journal.clock.count(outcome.clock, False)
                continue  # past a full quota: discarded unwritten (a larger quota later makes it)
            photo_sha256 = outcome.record["image_original_sha256"] if outcome.record is not None else None
            kept = _write_outcome(out, result, outcome, journal, keeper)
            journal.clock.count(outcome.clock, kept)
            if kept:
                made += 1
                original_sha256[scene.image_id] = photo_sha256  # type: ignore[assignment]
                bar.update(1)
        journal.clock.count(result.clock, made > 0)
        bar.set_postfix(rejected=sum(journal.rejected_reasons.values()), refresh=False)


def _write_outcome(out: Path, image: ImageOutcome, outcome: QuestionOutcome, journal: Journal,
                   keeper: Keeper) -> bool:
    """Present and cap a made pair, then journal the outcome (images first, then the lines); True when it
    became a pair."""
    journal.done.add(outcome.key)
    perception = keeper.admit(outcome) if outcome.record is not None else None
    if outcome.record is None:
        assert outcome.rejection is not None
        journal.rejected.append(outcome.rejection)
        journal.rejected_reasons[outcome.rejection["stage"]] += 1
        return False
    record = outcome.record
    check_record("vfaith_pair", record, f"record {record['id']} (question {outcome.key})")
    sides = (record["image_original"], record["image_edited"])
    commit_files(out, {side: image.staged[side] for side in sides if side in image.staged},
                 keep_existing=frozenset({record[source_photo(record)]}))
    journal.records.append(record)
    journal.made[outcome.template] += 1
    journal.pairs.append(record)
    if perception is not None:
        check_record("vfaith_perception", perception, f"perception item of {record['id']}")
        journal.perception.append(perception)
        journal.perceived.add(record["id"])
    return True


def _repair(out: Path, journal: Journal, source: CocoSource, settings: OfflineSettings) -> None:
    """Give back what a crash or a deletion took: perception lines of journaled pairs, and their PNGs
    (remade from the same question: MmfaithError when the remade pair is not the journaled one)."""
    for record in journal.pairs:
        if record["id"] not in journal.perceived:
            item = perception_item(record, settings.seed)
            if item is not None:
                journal.perception.append(item)
                journal.perceived.add(record["id"])
        missing = [side for side in ("image_original", "image_edited") if not (out / record[side]).is_file()]
        if not missing:
            continue
        remade = make_image_pairs(source.scene(record["source"]["image_id"]), settings,
                                  frozenset(journal.done - {record["build"]["slot"]}), None)
        match = next((o for o in remade.outcomes if o.key == record["build"]["slot"]), None)
        photo = source_photo(record)  # the remade pair has the photo as original; a reversed record swapped them
        edited = next(side for side in PHOTO_SIDES if side != photo)
        if match is None or match.record is None or match.record["id"] != record["id"] or \
                match.record["image_edited_sha256"] != record[f"{edited}_sha256"] or \
                remade.original_sha256 != record[f"{photo}_sha256"]:
            raise MmfaithError(f"{out / record[missing[0]]}: missing, and remaking pair {record['id']} does not give "
                               "the same images (did the source images change?); restore the file or choose a new "
                               "--out.")
        for side, data in ((photo, remade.original_png), (edited, match.edited_png)):
            if not (out / record[side]).is_file():
                assert data is not None
                write_atomic(out / record[side], data)


def _result_fields(summary: BuildSummary) -> dict[str, Any]:
    return {"counts": {"accepted": summary.accepted, "rejected_by_stage": summary.rejected,
                       "shortfall": summary.shortfall, "skipped_images": summary.skipped_images},
            "cpu_seconds": summary.clock.as_json(),
            "gold_letter_counts": summary.letters, "gold": summary.gold}
