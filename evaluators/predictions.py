"""Reading predictions.jsonl (a run's, or a submission) for any family's scorer.

Contract (`read_predictions(path, expected_probes, from_run, images_by_id, drop_stale, repeat)`)
-------------------------------------------------------------------------------------------------
- A submission (the default) is validated as a whole and every problem is reported at once, each
  with its line number: bad JSON, schema violations (schemas/prediction.schema.json), unknown
  ids, probes the item does not have, a second answered line for one (id, probe), and lines of a
  second model. With `from_run` (predictions `mmfaith run` wrote, where retries append lines) the
  last answered line of an (id, probe) wins and a torn last line (a crash mid-write) is ignored.
- A line whose response is null is a failed call (counted in `n_errors`), never an answer.
- Stale lines: a line that records the images its request showed (`meta.images`) must have shown
  this dataset's images for that item: each image's sha256, or for a derived image (a canvas, a
  crop) every source's sha256, must be among `images_by_id[id]`. A line that showed other images
  (the dataset was rebuilt after the run) is an error listing the lines, or with `drop_stale`
  is dropped and counted (`n_stale`). Lines without `meta.images` (submissions) are not checked.
- Repeats: a line's repeat is `meta.generation.repeat` (0 where absent; `run --repeats N` writes
  0 .. N-1). Every line is validated; only the lines of `repeat` are read as answers and errors,
  and `repeats` says how many repeats the file holds (the highest repeat seen, plus one).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes
from mmfaith.schema import schema_errors

Key = tuple[str, str]


@dataclass(frozen=True)
class PredictionSet:
    """The answered lines of one model, by (id, probe), and what the file held besides."""

    answered: dict[Key, dict[str, Any]]
    model: str
    n_errors: int
    n_stale: int
    sha256: str
    repeats: int = 1


def repeat_of(line: dict[str, Any]) -> int:
    """The repeat a prediction line answers (`meta.generation.repeat`, 0 where absent)."""
    return int(((line.get("meta") or {}).get("generation") or {}).get("repeat", 0))


def read_predictions(path: Path, expected_probes: Mapping[str, Iterable[str]], from_run: bool,
                     images_by_id: Mapping[str, set[str]] | None = None, drop_stale: bool = False,
                     repeat: int = 0) -> PredictionSet:
    """Read and validate predictions (module docstring); raise one MmfaithError listing every bad line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MmfaithError(f"{path}: cannot read the predictions ({exc.strerror}); pass --predictions FILE.") from exc
    probes_of = {item_id: tuple(probes) for item_id, probes in expected_probes.items()}
    problems: list[str] = []
    stale: list[int] = []
    answered: dict[Key, tuple[int, dict[str, Any]]] = {}
    model: tuple[str, int] | None = None
    n_errors = 0
    repeats = 1
    for number, raw, torn in _lines(data):
        try:
            line = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
            if not (torn and from_run):
                problems.append(f"line {number}: not valid JSON ({exc})")
            continue
        errors = schema_errors("prediction", line)
        if errors:
            problems.append(f"line {number}: " + "; ".join(errors))
            continue
        repeats = max(repeats, repeat_of(line) + 1)
        probes = probes_of.get(line["id"])
        bad = [f"unknown id {line['id']!r} (not in the dataset)"] if probes is None else []
        if probes is not None and line["probe"] not in probes:
            bad.append(f"unknown probe {line['probe']!r} (use {', '.join(probes)})")
        if model is not None and line["model"] != model[0]:
            bad.append(f"model {line['model']!r} differs from {model[0]!r} of line {model[1]} (one model per file)")
        model = model or (line["model"], number)
        key = (line["id"], line["probe"])
        if line["response"] is not None and key in answered and not from_run and repeat_of(line) == repeat:
            bad.append(f"a second answer to {key[0]} / {key[1]} (first on line {answered[key][0]}; "
                       "predictions of `mmfaith run` are scored with --from-run)")
        if bad:
            problems.append(f"line {number}: " + "; ".join(bad))
        elif repeat_of(line) != repeat:
            continue
        elif images_by_id is not None and not _shows_dataset_images(line, images_by_id.get(line["id"], set())):
            stale.append(number)
        elif line["response"] is None:
            n_errors += 1
        else:
            answered[key] = (number, line)
    if problems:
        raise MmfaithError(f"{path}: {len(problems)} bad line(s), fix them and score again: " + "; ".join(problems))
    if stale and not drop_stale:
        shown = ", ".join(str(number) for number in stale[:20]) + (" ..." if len(stale) > 20 else "")
        raise MmfaithError(f"{path}: {len(stale)} line(s) answered about other images than this dataset's (lines "
                           f"{shown}): the dataset was rebuilt after the run; run again into a new --out, or add "
                           "--drop-stale to score without them.")
    if repeat >= repeats:
        raise MmfaithError(f"{path}: holds {repeats} repeat(s) (0 .. {repeats - 1}), not repeat {repeat}; "
                           "pass --repeat with one of them.")
    if model is None:
        raise MmfaithError(f"{path}: holds no predictions; write one line per (id, probe) as in "
                           "schemas/prediction.schema.json.")
    return PredictionSet({key: line for key, (_, line) in answered.items()}, model[0], n_errors, len(stale),
                         sha256_bytes(data), repeats)


def _shows_dataset_images(line: dict[str, Any], dataset_images: set[str]) -> bool:
    shown = (line.get("meta") or {}).get("images")
    if not shown:
        return True
    return all(set(image.get("sources") or [image["sha256"]]) <= dataset_images for image in shown)


def _lines(data: bytes) -> Iterable[tuple[int, bytes, bool]]:
    """(line number, raw line, whether it is a last line without newline) for each non-blank line."""
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            yield number, raw, number == len(lines) and raw != b""
