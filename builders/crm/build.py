"""`mmfaith build crm`: region-annotated questions in, masked CRM items out (BUILD_DIR).

Flow: a source adapter (builders/crm/sources.py: COCO through the shared question generator, or
VisArgs-style rows) yields candidates in a fixed order -> in workers (local processes or Ray tasks,
builders/executors.py): `variants.make_item` masks each one in every mode and style, gates it and
writes its PNGs into the build's staging folder -> in candidate order: the files moved into place,
then the record to records.jsonl or the reason to rejected.jsonl. A made item whose gold would
break the per-template cap (mmfaith/gold_balance.py: one gold text's share at most chance +
`gold_margin`, by one item) is rejected there too (stage `gold_balance`, the reason names the
share), and build.json's `gold` gives each template's gold distribution with what an always-A and
the prior model score (docs/questions.md).

Determinism and resume: candidates come in the same order for the same source and seed, and every
handled candidate is journaled under its key, so a re-run with the same arguments skips what is
done and continues until `max_items` records exist; the same inputs give byte-identical files.

Corrected regions: before anything new is made, every record whose `regions` no longer hash to
its `build.regions_sha256` (a box moved in Label Studio and pulled) gets its variants remade from
the new regions (the same seeds, so nothing else about it changes), and records.jsonl is rewritten
with those items replaced; every other item and file is left untouched.

preview.png (builders/crm/preview.py): the first items, each original with its evidence outlined beside
its specific and random variants with their masks outlined.
"""
from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mmfaith.builders.build_dir import check_requested, recorded_build, resume_note
from mmfaith.builders.coco_questions import TEMPLATES
from mmfaith.builders.coco_source import CocoSource, License, embedded_sample
from mmfaith.builders.crm.sources import (VISARGS_QUESTION, Candidate, ColumnMap, coco_candidates,
                                          visargs_candidates)
from mmfaith.builders.crm.preview import write_preview
from mmfaith.builders.journal import BuildJournal
from mmfaith.builders.crm.variants import ItemOutcome, MaskSettings, make_item, regions_sha256
from mmfaith.builders.executors import ExecutorChoice, choice_for, open_executor
from mmfaith.builders.staging import clear_staging, commit_files, stage_files
from mmfaith.builders.worker_pool import Pending
from mmfaith.dirlock import hold_lock
from mmfaith.errors import MmfaithError, first_few
from mmfaith.gold_balance import DEFAULT_MARGIN, GoldCap, GoldItem, gold_summary
from mmfaith.images import sha256_file
from mmfaith.jsonl import canonical_json, read_json_object, write_atomic
from mmfaith.outdir import prepare_out_dir
from mmfaith.schema import check_record

PREVIEW_ITEMS = 6


@dataclass
class CrmBuildRequest:
    """Everything `mmfaith build crm` takes; the recipe part must match to resume a build."""

    out: Path
    annotations: Path | None = None
    images: Path | None = None
    visargs: Path | None = None
    columns: ColumnMap = field(default_factory=ColumnMap)
    question_template: str | None = None
    license_name: str = "unknown"
    templates: tuple[str, ...] = TEMPLATES
    per_image: int = 2
    max_items: int = 50
    allow_noderivs: bool = False
    mask: MaskSettings = field(default_factory=MaskSettings)
    gold_margin: float = DEFAULT_MARGIN
    """The cap on a template's majority gold: chance + this (mmfaith/gold_balance.py)."""
    progress: bool = True
    workers: int = 1
    executor: ExecutorChoice | None = None
    """Where work units run (builders/executors.py); None: the local pool of `workers` processes."""


@dataclass
class CrmBuildSummary:
    accepted: int
    rejected: dict[str, int]
    regenerated: list[str]
    skipped_images: dict[str, int]
    out: Path
    gold: dict[str, dict[str, Any]]


def gold_items(records: list[dict[str, Any]]) -> list[GoldItem]:
    """The multiple-choice records as the gold balance sees them (free-form VisArgs items have no options)."""
    return [GoldItem.of_record(r["question_type"], r["options"], r["answer"]) for r in records if r["options"]]


class _Source:
    """The request's source: its candidates in order, its name and its recipe part."""

    def __init__(self, request: CrmBuildRequest) -> None:
        self.request = request
        self.skipped: dict[str, int] = {}
        if request.visargs is not None:
            if request.annotations is not None:
                raise MmfaithError("give --visargs or --coco-annotations, not both.")
            if request.mask.shape == "segment":
                raise MmfaithError("--mask-shape segment needs instance masks; VisArgs-style data has boxes only: "
                                   "use --mask-shape box.")
            if not request.visargs.exists():
                raise MmfaithError(f"{request.visargs}: not found (--visargs).")
            self.kind, self.path = "visargs", request.visargs
            return
        if (request.annotations is None) != (request.images is None):
            raise MmfaithError("give both --coco-annotations FILE and --images DIR, or neither for the embedded sample.")
        if request.annotations is None:
            annotations, images = embedded_sample()
            self.coco = CocoSource(annotations, images, dataset_name="mmfaith-coco-sample")
        else:
            if not request.images.is_dir():
                raise MmfaithError(f"{request.images}: images folder not found (--images).")
            self.coco = CocoSource(request.annotations, request.images)
        self.kind, self.path = "coco", self.coco.annotations_path

    def paths(self) -> list[Path]:
        """What every worker must read: the data file or folder and the images."""
        images = self.coco.images_dir if self.kind == "coco" else self.request.images
        return [self.path] + ([images] if images is not None else [])

    def recipe(self) -> dict[str, Any]:
        request = self.request
        data_file = self.path if self.path.is_file() else None
        part: dict[str, Any] = {"kind": self.kind, "sha256": sha256_file(data_file) if data_file else None}
        if self.kind == "coco":
            part |= {"dataset": self.coco.dataset_name, "templates": list(request.templates),
                     "per_image": request.per_image, "allow_noderivs": request.allow_noderivs}
        else:
            part |= {"columns": vars(request.columns), "question_template": self._question(),
                     "license": request.license_name}
        return part

    def _question(self) -> str:
        return self.request.question_template or VISARGS_QUESTION

    def candidates(self) -> Iterator[Candidate]:
        request = self.request
        if self.kind == "coco":
            return coco_candidates(self.coco, request.mask.seed, request.templates, request.per_image,
                                   request.allow_noderivs, request.mask.max_pixels, self.skipped)
        lic = License(-1, request.license_name, "")
        if not lic.allows_derivatives and not request.allow_noderivs:
            raise MmfaithError(f"--license {request.license_name!r} forbids derivatives and masked variants are "
                               "derivatives; pass --allow-noderivs only if you will not publish them.")
        return visargs_candidates(self.path, request.images, request.columns, self._question(), lic)


class _Journal(BuildJournal):
    """records.jsonl and rejected.jsonl (builders/journal.py): which keys are done, the items made (`items`,
    each checked against the schema) and the rejections per stage (`rejected_stages`)."""

    TITLE = "CRM"
    FILES = {"records": "records.jsonl", "rejected": "rejected.jsonl"}
    NEEDS = {"records": "build.key", "rejected": "key, stage"}

    def __init__(self, out: Path) -> None:
        self.items: list[dict[str, Any]] = []
        self.done: set[str] = set()
        self.rejected_stages: Counter[str] = Counter()
        super().__init__(out)

    def note(self, kind: str, line: dict[str, Any], where: str) -> None:
        if kind == "records":
            key = line["build"]["key"]
            check_record("crm_item", line, where)
            self.items.append(line)
        else:
            key = line["key"]
            self.rejected_stages[str(line["stage"])] += 1
        self.done.add(key)


ItemTask = tuple[Candidate, MaskSettings, Path]


def _item_task(task: ItemTask) -> ItemOutcome:
    """In a worker: mask and gate one candidate and write its PNGs into the build's staging folder."""
    candidate, settings, out = task
    outcome = make_item(candidate, settings)
    if outcome.files is not None:
        outcome.staged = stage_files(out, f"crm:{candidate.key}", outcome.files)
        outcome.files = None
    return outcome


def _write_files(out: Path, outcome: ItemOutcome) -> None:
    assert outcome.files is not None
    for relative, data in outcome.files.items():
        path = out / relative
        if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)


def _regenerate(out: Path, journal: _Journal, source: _Source, settings: MaskSettings) -> list[str]:
    """Remake the variants of records whose regions changed (module docstring); their ids."""
    stale = [r for r in journal.items if regions_sha256(r["regions"]) != r["build"]["regions_sha256"]]
    if not stale:
        return []
    by_key = {r["build"]["key"]: r for r in stale}
    remade: dict[str, dict[str, Any]] = {}
    for candidate in source.candidates():
        record = by_key.get(candidate.key)
        if record is None:
            continue
        original = (out / record["image_original"]).read_bytes()
        outcome = make_item(candidate, settings, record["regions"], original)
        if outcome.record is None:
            raise MmfaithError(f"{out / 'records.jsonl'}: item {record['id']}: its corrected regions cannot be masked "
                               f"({outcome.rejection['reason']}); correct the boxes again.")
        new = outcome.record
        for kept in ("verification", "regions_history"):
            if kept in record:
                new[kept] = record[kept]
        check_record("crm_item", new, f"item {new['id']}")
        _write_files(out, outcome)
        remade[candidate.key] = new
        if len(remade) == len(by_key):
            break
    missing = sorted(set(by_key) - set(remade))
    if missing:
        raise MmfaithError(f"{out}: {len(missing)} item(s) have corrected regions but their source no longer yields "
                           f"them ({first_few(missing)}); rebuild from the same source.")
    journal.items = [remade.get(r["build"]["key"], r) for r in journal.items]
    write_atomic(journal.path("records"), "".join(canonical_json(r) + "\n" for r in journal.items).encode("utf-8"))
    return sorted(r["id"] for r in remade.values())


def build_crm(request: CrmBuildRequest) -> CrmBuildSummary:
    """Build (or resume, or regenerate corrected items of) a CRM set in request.out; module docstring."""
    started = time.time()
    if request.max_items < 1:
        raise MmfaithError(f"--max-items must be 1 or more, not {request.max_items}.")
    source = _Source(request)
    out = prepare_out_dir(request.out, "build")
    journal = _Journal(out)
    recipe = {"family": "crm", "source": source.recipe(), "seed": request.mask.seed,
              "mask": request.mask.provenance(), "gold_margin": request.gold_margin}
    build_json = out / "build.json"
    if build_json.exists():
        previous = read_json_object(build_json, "").get("recipe")
        if previous != recipe:
            changed = sorted(k for k in recipe if (previous or {}).get(k) != recipe[k])
            raise MmfaithError(f"{out} holds a build made with other settings ({', '.join(changed)} differ); "
                               "re-run with the same arguments to resume, or choose a new --out.")
    check_requested(build_json, {"max_items": request.max_items})
    fields = {"requested": {"max_items": request.max_items},
              "executor": asdict(choice_for(request.executor, request.workers))}
    with hold_lock(out, "build --out"):
        return recorded_build(build_json, recipe, fields, started, lambda: _build(request, source, journal),
                              _result_fields)


def _build(request: CrmBuildRequest, source: _Source, journal: _Journal) -> CrmBuildSummary:
    out = request.out
    regenerated = _regenerate(out, journal, source, request.mask)
    made = len(journal.items)
    journal.open()
    clear_staging(out)
    resume_note(out, made, request.max_items, "items")
    bar = tqdm(total=request.max_items, initial=min(made, request.max_items), unit="item", desc="crm",
               disable=not request.progress, dynamic_ncols=True)
    cap = GoldCap(request.gold_margin, gold_items(journal.items))
    pool = open_executor(choice_for(request.executor, request.workers), reads=source.paths(), writes=[out])
    finished = False
    try:
        stream = (c for c in source.candidates() if c.key not in journal.done)
        pending: deque[Pending] = deque()
        while made < request.max_items:
            while len(pending) < pool.window and made + len(pending) < request.max_items:
                candidate = next(stream, None)
                if candidate is None:
                    break
                pending.append(pool.submit(_item_task, (candidate, request.mask, out)))
            if not pending:
                break
            outcome: ItemOutcome = pending.popleft().get()
            _apply_cap(cap, outcome)
            if outcome.record is None:
                assert outcome.rejection is not None
                journal.rejected.append(outcome.rejection)
                journal.rejected_stages[outcome.rejection["stage"]] += 1
            else:
                check_record("crm_item", outcome.record, f"item {outcome.record['id']} ({outcome.key})")
                commit_files(out, outcome.staged)
                journal.records.append(outcome.record)
                journal.items.append(outcome.record)
                for item in gold_items([outcome.record]):
                    cap.add(item)
                made += 1
                bar.update(1)
            journal.done.add(outcome.key)
        finished = True
    finally:
        bar.close()
        pool.close(abort=not finished)
        clear_staging(out)
        journal.close()
    write_preview(out, PREVIEW_ITEMS)
    return CrmBuildSummary(made, dict(journal.rejected_stages), regenerated, dict(source.skipped), out,
                           gold_summary(gold_items(journal.items)))


def _apply_cap(cap: GoldCap, outcome: ItemOutcome) -> None:
    """Settle a made item's letters over the kept items (`GoldCap.lettered`), then turn it into a rejection
    (stage `gold_balance`) with the reason when its gold breaks the cap."""
    items = gold_items([outcome.record]) if outcome.record is not None else []
    if items:
        item = cap.lettered(items[0])
        outcome.record["options"] = [{"label": label, "text": text} for label, text in item.options]
        outcome.record["answer"] = item.answer
        items = [item]
    reason = cap.refusal(items[0]) if items else None
    if reason is not None:
        record = outcome.record
        outcome.rejection = {"key": outcome.key, "id": record["id"], "stage": "gold_balance", "reason": reason,
                             "file_name": record["source"]["file_name"]}
        outcome.record = None


def _result_fields(summary: CrmBuildSummary) -> dict[str, Any]:
    return {"counts": {"accepted": summary.accepted, "rejected_by_stage": summary.rejected,
                       "regenerated": summary.regenerated, "skipped_images": summary.skipped_images},
            "gold": summary.gold}
