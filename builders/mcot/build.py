"""`mmfaith build mcot`: a source's questions -> an MCoT build dir (records.jsonl, images/, build.json).

Contract
--------
`build_mcot(McotBuildRequest) -> BuildSummary` writes into `out`:
- `images/<sha256>.png`: each source image decoded once and written as deterministic PNG
  (`mmfaith.images.png_bytes`), so what the run shows is lossless and hashed the same way
  everywhere; items on one image share its file.
- `records.jsonl`: one record per question (schemas/mcot_item.schema.json), in source order, written
  whole and atomically (every source is read again on a re-run: adapters are cheap, so a killed
  build is re-run, never half-read).
- `rejected.jsonl`: the COCO source's questions refused by the gold cap (builders/mcot/coco.py), with
  the reason; empty for the published sources, which are kept whole.
- `build.json` (`build_dir.write_build_json`, the shape every family's has): the recipe (`family`
  "mcot", source, origin, columns, seed, rules), status, counts, version, times, and `gold`: each
  category's gold distribution with what always-A and the prior score (mmfaith/gold_balance.py).
- `preview.png` (builders/mcot/preview.py): the first questions, each image with its target boxes.
Same source and arguments give byte-identical files (build.json but for its times). `limit` keeps the first N questions.
A build dir whose build.json holds another recipe (another --seed, --limit, source...) is refused
before anything is written (`build_dir.check_recipe`); images no record names (left by an earlier,
interrupted build) are removed, so the folder holds exactly the build. The build holds the
folder's lock (`mmfaith.dirlock`): a second build into it is refused.
"""
from __future__ import annotations

import io
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from tqdm import tqdm

from mmfaith import __version__
from mmfaith.builders.build_dir import check_recipe, recorded_build
from mmfaith.builders.executors import Executor, ExecutorChoice, open_executor
from mmfaith.builders.mcot.preview import write_preview
from mmfaith.builders.mcot.sources import SourceItem, read_source, resolve_origin
from mmfaith.dirlock import hold_lock
from mmfaith.errors import MmfaithError
from mmfaith.gold_balance import DEFAULT_MARGIN, GoldItem, gold_summary
from mmfaith.images import DEFAULT_MAX_PIXELS, png_bytes, sha256_bytes
from mmfaith.jsonl import canonical_json, read_json_object, write_atomic
from mmfaith.outdir import prepare_out_dir
from mmfaith.schema import check_record

RECORDS = "records.jsonl"
REJECTED = "rejected.jsonl"
BUILD_JSON = "build.json"
PREVIEW_ITEMS = 9
IMAGES = "images"
EMBEDDED_ORIGIN = "embedded COCO sample"  # build.json's origin when no --coco-annotations is given


@dataclass(frozen=True)
class McotBuildRequest:
    """Everything `mmfaith build mcot` takes."""

    out: Path
    source: str = "coco"  # vstar | hrbench-4k | hrbench-8k | coco
    source_path: str | None = None
    columns: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    limit: int | None = None
    max_pixels: int = DEFAULT_MAX_PIXELS
    coco_annotations: Path | None = None
    coco_images: Path | None = None
    max_subject_area: float = 0.01
    gold_margin: float = DEFAULT_MARGIN
    progress: bool = True
    executor: ExecutorChoice = ExecutorChoice()


@dataclass(frozen=True)
class BuildSummary:
    out: Path
    items: int
    images: int
    by_category: dict[str, int]
    gold: dict[str, dict[str, Any]]


def build_mcot(request: McotBuildRequest) -> BuildSummary:
    """Read the source, write the build dir (module docstring)."""
    if request.limit is not None and request.limit < 1:
        raise MmfaithError(f"--limit must be 1 or more, not {request.limit}.")
    started = time.time()
    rejected: list[dict[str, Any]] = []
    if request.source == "coco":
        from mmfaith.builders.mcot.coco import coco_items

        items: Iterable[SourceItem] = coco_items(request, rejected)
        origin, revision = str(request.coco_annotations or EMBEDDED_ORIGIN), None
        rules: dict[str, Any] | None = {"max_subject_area": request.max_subject_area,
                                        "templates": ["color", "relation"], "gold_margin": request.gold_margin}
    else:
        if not request.source_path:
            raise MmfaithError(f"--source {request.source} needs --source-path (a dataset folder, a parquet/TSV file "
                               "or a Hub id ORG/NAME[@REVISION]).")
        path, revision = resolve_origin(request.source, request.source_path)
        items = read_source(request.source, path, request.columns)
        origin, rules = request.source_path, None
    prepare_out_dir(request.out, "build")
    build = {"mmfaith_version": __version__, "seed": request.seed, "source": request.source,
             "columns": dict(sorted(request.columns.items())), "rules": rules}
    recipe = {"family": "mcot", **build, "origin": origin, "limit": request.limit}
    with hold_lock(request.out, "build --out"):
        # records.jsonl is written whole at the end and stray images removed: a build that did not complete
        # leaves nothing a retry with other settings could mix with, so only a complete one binds the folder
        if (request.out / BUILD_JSON).is_file() and \
                read_json_object(request.out / BUILD_JSON, "").get("status") == "complete":
            check_recipe(request.out / BUILD_JSON, recipe)
        return recorded_build(
            request.out / BUILD_JSON, recipe, {"executor": asdict(request.executor)}, started,
            lambda: _build(request, items, rejected, build, origin, revision),
            lambda summary: {"counts": {"items": summary.items, "images": summary.images,
                                        "by_category": summary.by_category, "rejected": len(rejected)},
                             "gold": summary.gold})


def _build(request: McotBuildRequest, items: Iterable[SourceItem], rejected: list[dict[str, Any]],
           build: dict[str, Any], origin: str, revision: str | None) -> BuildSummary:
    (request.out / IMAGES).mkdir(exist_ok=True)
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    by_source_hash: dict[str, tuple[str, int, int]] = {}  # the source bytes' sha256 -> the PNG written
    pool = open_executor(request.executor, reads=[], writes=[request.out / IMAGES])
    bar = tqdm(unit="question", desc="build mcot", disable=not request.progress, total=request.limit)
    try:
        for chunk in _chunks(islice(items, request.limit), pool.window):
            _write_new_images(request, origin, chunk, seen, by_source_hash, pool)
            records += [_record(request, item, origin, revision, build, by_source_hash) for item in chunk]
            bar.update(len(chunk))
    except BaseException:
        pool.close(abort=True)
        raise
    else:
        pool.close()
    finally:
        bar.close()
    if not records:
        raise MmfaithError(f"{origin}: the source gave no questions; check --source and --source-path.")
    write_atomic(request.out / RECORDS, "".join(canonical_json(r) + "\n" for r in records).encode("utf-8"))
    write_atomic(request.out / REJECTED, "".join(canonical_json(r) + "\n" for r in rejected).encode("utf-8"))
    by_category: dict[str, int] = {}
    for record in records:
        by_category[record["category"]] = by_category.get(record["category"], 0) + 1
    _remove_orphans(request.out / IMAGES, {f"{sha}.png" for sha, _, _ in by_source_hash.values()})
    write_preview(request.out, PREVIEW_ITEMS)
    gold = gold_summary([GoldItem.of_record(r["category"], r["options"], r["answer"]) for r in records])
    return BuildSummary(request.out, len(records), len(by_source_hash), by_category, gold)


def _chunks(items: Iterable[SourceItem], size: int) -> Iterator[list[SourceItem]]:
    chunk: list[SourceItem] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _write_new_images(request: McotBuildRequest, origin: str, chunk: list[SourceItem], seen: set[str],
                      by_source_hash: dict[str, tuple[str, int, int]], pool: Executor) -> None:
    """Check the chunk's ids are new, then decode and write its images not written yet, on the executor's workers
    (results in source order, so the files are the same bytes whatever the executor)."""
    new: dict[str, tuple[bytes, str]] = {}
    for item in chunk:
        record_id, where = f"{request.source}-{item.item_id}", f"{origin}: item {item.item_id}"
        if record_id in seen:
            raise MmfaithError(f"{where}: a second question with id {item.item_id}; ids must be unique.")
        seen.add(record_id)
        key = sha256_bytes(item.image_bytes)
        if key not in by_source_hash and key not in new:
            new[key] = (item.image_bytes, where)
    tasks = [(request.out, data, request.max_pixels, where) for data, where in new.values()]
    by_source_hash.update(zip(new, pool.map(_write_png_task, tasks)))


def _record(request: McotBuildRequest, item: SourceItem, origin: str, revision: str | None, build: dict[str, Any],
            by_source_hash: dict[str, tuple[str, int, int]]) -> dict[str, Any]:
    """The item's record, schema-checked."""
    record_id = f"{request.source}-{item.item_id}"
    sha, width, height = by_source_hash[sha256_bytes(item.image_bytes)]
    record = {
        "id": record_id, "question": item.question,
        "options": [{"label": label, "text": text} for label, text in item.options],
        "answer": item.answer, "category": item.category, "image": f"{IMAGES}/{sha}.png", "image_sha256": sha,
        "width": width, "height": height, "targets": [dict(target) for target in item.targets],
        "source": {"dataset": request.source, "origin": origin, "revision": revision,
                   "item_id": item.item_id, "file_name": item.file_name, **item.extra},
        "verification": {"status": "pending", "annotators": [], "notes": None, "task_id": None, "time": None},
        "build": build,
    }
    check_record("mcot_item", record, f"{origin}: item {item.item_id}")
    return record


def _remove_orphans(images: Path, kept: set[str]) -> None:
    """Remove the files of images/ that no record names (an earlier build's, left by a kill)."""
    for path in images.iterdir():
        if path.name not in kept:
            path.unlink()


def _write_png_task(task: tuple[Path, bytes, int, str]) -> tuple[str, int, int]:
    return _write_png(*task)


def _write_png(out: Path, data: bytes, max_pixels: int, where: str) -> tuple[str, int, int]:
    """Decode the source image (bounded), write it as PNG once; (sha256, width, height)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                if image.size[0] * image.size[1] > max_pixels:
                    raise MmfaithError(f"{where}: {image.size[0]}x{image.size[1]} pixels exceeds --max-pixels {max_pixels}.")
                rgb = np.asarray(image.convert("RGB"))
    except MmfaithError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise MmfaithError(f"{where}: the image cannot be decoded ({exc}).") from exc
    png = png_bytes(rgb)
    sha = sha256_bytes(png)
    path = out / IMAGES / f"{sha}.png"
    if not path.is_file():
        write_atomic(path, png)
    return sha, rgb.shape[1], rgb.shape[0]
