"""What every COCO builder does around its own work: open the source, keep the usable scenes, refuse a
build dir made with another recipe, and record the build's status in build.json whatever happens.

- `open_coco(annotations, images)`: the user's COCO (both given) or the embedded sample (neither).
- `usable_scenes(source, allow_noderivs)`: scenes whose licence allows derivatives (or
  `allow_noderivs`) and that have an annotated instance, in image id order; and how many were
  skipped, by reason (`noderivs`, `no_instances`).
- `check_recipe(build_json, recipe)`: MmfaithError naming the settings that differ when build.json
  holds another recipe (resuming it would mix two builds).
- `check_requested(build_json, requested)`: MmfaithError when a count asked for now (--per-template,
  --max-items, --per-tier...) is smaller than the one build.json records: the folder holds more than
  asked, and keeping it would make build.json lie (a larger count resumes the build and grows it).
- `resume_note(out, made, total, unit)`: the "resuming: 14 of 26 pairs" line a resumed build prints.
- `recorded_build(build_json, recipe, fields, started, body, result_fields)`: build.json says
  "running" while `body` runs, then "complete" (with `result_fields(result)`, its counts), or "failed"
  (an MmfaithError, with it) or "interrupted" (anything else, Ctrl-C included), never "running" after
  the fact.
- `write_build_json(...)`: build.json, one shape for every family: `status`, `family` (the recipe's),
  `mmfaith_version`, `recipe`, the family's `fields` (source, requested counts, executor...),
  `environment` (library versions), `started`, and `error` or `finished`, `seconds` and the result's
  fields. It is the only file of a build dir that holds wall-clock time.
- `coco_source_fields(source)`, `inpainter_fields(spec)`: how build.json records a COCO source and an
  inpainter.
"""
from __future__ import annotations

import platform
import sys
import time
from dataclasses import asdict
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import cv2
import numpy as np

from mmfaith import __version__
from mmfaith.builders.coco_source import CocoSource, Scene, embedded_sample
from mmfaith.errors import MmfaithError
from mmfaith.jsonl import canonical_json, read_json_object, write_atomic

if TYPE_CHECKING:
    from mmfaith.builders.inpainters import InpainterSpec

T = TypeVar("T")


def open_coco(annotations: Path | None, images: Path | None) -> CocoSource:
    """The COCO source of a build (module docstring)."""
    if (annotations is None) != (images is None):
        raise MmfaithError("give both --coco-annotations FILE and --images DIR, or neither for the embedded sample.")
    if annotations is None or images is None:
        sample_annotations, sample_images = embedded_sample()
        return CocoSource(sample_annotations, sample_images, dataset_name="mmfaith-coco-sample")
    if not images.is_dir():
        raise MmfaithError(f"{images}: images folder not found (--images).")
    return CocoSource(annotations, images)


def usable_scenes(source: CocoSource, allow_noderivs: bool) -> tuple[list[Scene], Counter[str]]:
    """Scenes a build may edit, in image id order, and the skipped ones counted by reason."""
    scenes, skipped = [], Counter()
    for image_id in source.image_ids():
        scene = source.scene(image_id)
        if not scene.license.allows_derivatives and not allow_noderivs:
            skipped["noderivs"] += 1
        elif scene.instance_count == 0:
            skipped["no_instances"] += 1
        else:
            scenes.append(scene)
    return scenes, skipped


def check_recipe(build_json: Path, recipe: dict[str, Any]) -> None:
    """Refuse to resume a build dir whose build.json holds another recipe."""
    if not build_json.exists():
        return
    previous = read_json_object(build_json, "").get("recipe")
    if previous != recipe:
        changed = sorted(k for k in recipe if (previous or {}).get(k) != recipe[k])
        raise MmfaithError(f"{build_json.parent} holds a build made with other settings ({', '.join(changed)} differ); "
                           "re-run with the same arguments to resume, or choose a new --out.")


def check_requested(build_json: Path, requested: dict[str, Any]) -> None:
    """Refuse counts smaller than those of the build the folder holds (module docstring)."""
    if not build_json.exists():
        return
    previous = read_json_object(build_json, "").get("requested") or {}
    smaller = [f"--{name.replace('_', '-')} {value} < {previous[name]}" for name, value in requested.items()
               if isinstance(value, int) and isinstance(previous.get(name), int) and value < previous[name]]
    if smaller:
        raise MmfaithError(f"{build_json.parent} holds a larger build ({', '.join(smaller)}); re-run with its counts "
                           "(or larger ones, to grow it), or choose a new --out for a smaller build.")


def resume_note(out: Path, made: int, total: int, unit: str) -> None:
    """Say what a resumed build found (nothing for a fresh one)."""
    if made:
        print(f"resuming: {min(made, total)} of {total} {unit} already in {out}", file=sys.stderr, flush=True)


def recorded_build(build_json: Path, recipe: dict[str, Any], fields: dict[str, Any], started: float,
                   body: Callable[[], T], result_fields: Callable[[T], dict[str, Any]]) -> T:
    """Run `body` with build.json's status kept true (module docstring); returns its result."""
    def write(status: str, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        write_build_json(build_json, recipe, fields, started, status, result, error)

    write("running")
    try:
        result = body()
    except MmfaithError as exc:
        write("failed", error=str(exc))
        raise
    except BaseException as exc:
        write("interrupted", error=f"{type(exc).__name__}: {exc}")
        raise
    write("complete", result=result_fields(result))
    return result


def write_build_json(path: Path, recipe: dict[str, Any], fields: dict[str, Any], started: float, status: str,
                     result: dict[str, Any] | None = None, error: str | None = None) -> None:
    """build.json in the one shape every family writes (module docstring)."""
    document = {"status": status, "family": recipe["family"], "mmfaith_version": __version__, "recipe": recipe,
                **fields, "environment": environment(), "started": _utc(started)}
    if error is not None:
        document["error"] = error
    if result is not None:
        document |= {"finished": _utc(time.time()), "seconds": round(time.time() - started, 2), **result}
    write_atomic(path, (canonical_json(document) + "\n").encode("utf-8"))


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def coco_source_fields(source: CocoSource) -> dict[str, Any]:
    """How build.json records a COCO source."""
    return {"dataset": source.dataset_name, "annotations": str(source.annotations_path),
            "images": str(source.images_dir), "split": source.split}


def inpainter_fields(spec: InpainterSpec) -> dict[str, Any]:
    """How build.json records an inpainter (its LaMa checkpoint as a path string)."""
    return asdict(spec) | {"lama_model": str(spec.lama_model) if spec.lama_model else None}


def environment() -> dict[str, str]:
    """The library versions every build.json records."""
    return {"python": platform.python_version(), "numpy": np.__version__, "opencv": cv2.__version__}
