"""A score dir, for every family's scorer: refuse to overwrite what is not a score of the same inputs, and
replace the folder whole.

- `check_score_dir(out, inputs, dataset, predictions_sha256, overwrite)`: a non-empty `out` is
  refused unless its metrics.json's provenance names the same dataset ({"id", "revision"}) and
  predictions sha256, or `overwrite`; an `out` holding one of the `inputs` (flag -> path) is always
  refused (the score replaces the folder whole).
- `replace_folder(out, staging)`: put `staging` where `out` is, the old folder moved aside first
  and removed last, so a failed score leaves the old one intact and no file of an older score survives.
- `ItemSpool(out, fields)`: items.jsonl written while a scorer makes its items, before its metrics: `keep(item)`
  writes the item's canonical JSON line (redacted, a batch of lines at a time) to a file beside `out` and
  returns the item with only `fields` (what the family's summary reads; mmfaith/records.py; none by default, for a
  scorer that folds its items into its summary as they come), equal kept values held once, so a scorer's memory
  is that of what it summarises, not of items.jsonl. A scorer that makes its items a chunk at a time on worker
  processes (mmfaith/ordered_pool.py) renders each chunk there (`spooled(items, fields)`: the chunk's redacted
  lines and kept items) and `add`s the chunks here in order: the same file as `keep` item by item.
- `publish_scores(out, items, metrics, write_report)`: items.jsonl (canonical JSON lines, written as `items`
  yields them, so a generator is never held whole; or moved into place from the `ItemSpool` given), metrics.json
  (indented, sorted keys) and whatever `write_report(metrics, folder)` writes, staged beside `out` and
  then put in its place (`replace_folder`); every text file of it passes `mmfaith.redact` (a
  submission's answers may quote a key). Inside `metrics_only()`, `write_report` is not called: a score read
  only for its metrics.json (`evaluate`'s reference ends, scored in a scratch folder) skips its report and plots,
  most of a small score's cost.
- `load_score_dir(path, fields)`: (metrics.json, items.jsonl) of a score dir (the explorer's pages), each
  item with only `fields` when given (mmfaith/records.py), equal kept values held once; `mmfaith report` reads
  items.jsonl line by line into numbers instead (evaluators/scored_items.py); `load_metrics(path)`:
  metrics.json alone (items.jsonl is not read); `score_labels(paths, metrics)`: each score's model name ("(no image)" added for a --no-image score), with its
  folder where two share one.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.jsonl import canonical_json, read_jsonl, write_lines_atomic, write_text_atomic
from mmfaith.records import Fields, Shared, keep_fields
from mmfaith.redact import redact


TEXT_SUFFIXES = (".md", ".json", ".jsonl", ".html", ".csv", ".txt", ".svg")
"""The files of a score dir that are text, redacted as written."""
_METRICS_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("metrics_only", default=False)


@contextlib.contextmanager
def metrics_only() -> Iterator[None]:
    """Scores published inside this block hold items.jsonl and metrics.json only, no report (module docstring)."""
    token = _METRICS_ONLY.set(True)
    try:
        yield
    finally:
        _METRICS_ONLY.reset(token)


def check_score_dir(out: Path, inputs: Mapping[str, Path | None], dataset: Mapping[str, Any], predictions_sha256: str,
                    overwrite: bool) -> None:
    """Refuse a non-empty --out that is not a previous score of these inputs, unless `overwrite` (module docstring)."""
    held = sorted(p.name for p in out.iterdir())
    if not held:
        return
    for flag, source in inputs.items():
        if source is not None and source.exists() and source.resolve().is_relative_to(out.resolve()):
            raise MmfaithError(f"score --out {out}: holds the {flag} input {source}, and a score replaces its folder "
                               "whole; choose another --out.")
    if overwrite:
        return
    try:
        previous = json.loads((out / "metrics.json").read_text(encoding="utf-8"))["provenance"]
        same = previous["dataset"] == dict(dataset) and previous["predictions_sha256"] == predictions_sha256
    except (OSError, ValueError, KeyError, TypeError):
        same = False
    if not same:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise MmfaithError(f"score --out {out}: not empty ({shown}) and not a score of these predictions on this "
                           "dataset; choose a new --out, or pass --overwrite to replace the folder whole.")


def replace_folder(out: Path, staging: Path) -> None:
    """Put `staging` where `out` is, whole: the old folder is moved aside first and removed last."""
    old = out.parent / f".{out.name}.replaced"
    shutil.rmtree(old, ignore_errors=True)
    os.replace(out, old)
    os.replace(staging, out)
    shutil.rmtree(old, ignore_errors=True)


@dataclass(frozen=True)
class SpooledChunk:
    """A chunk of items as `ItemSpool.add` takes it: their items.jsonl lines (redacted) and the items kept small."""

    lines: str
    kept: list[dict[str, Any]]


def spooled(items: Iterable[dict[str, Any]], fields: Fields = ()) -> SpooledChunk:
    """`items`' lines and kept fields (module docstring), equal kept values held once within the chunk; no fields
    (a scorer folding its items into its summary): nothing kept."""
    shared, lines, kept = Shared(), [], []
    for item in items:
        lines.append(canonical_json(item) + "\n")
        if fields:
            kept.append(keep_fields(item, fields, shared))
    return SpooledChunk(redact("".join(lines)), kept)


class ItemSpool:
    """items.jsonl written as a scorer makes its items (module docstring); `close` before publishing."""

    def __init__(self, out: Path, fields: Fields = (), batch: int = 4096) -> None:
        self.path = out.parent / f".{out.name}.items.jsonl"
        self._fields, self._batch, self._shared = fields, batch, Shared()
        self._pending: list[str] = []
        self._handle = open(self.path, "wb")

    def keep(self, item: dict[str, Any]) -> dict[str, Any]:
        """Write `item`'s line; return it with only the spool's fields."""
        self.write(item)
        return keep_fields(item, self._fields, self._shared)

    def write(self, item: dict[str, Any]) -> None:
        """Write `item`'s line (a scorer folding its items into its summary keeps nothing of it)."""
        self._pending.append(canonical_json(item) + "\n")
        if len(self._pending) >= self._batch:
            self._flush()

    def add(self, chunk: SpooledChunk) -> list[dict[str, Any]]:
        """Write a chunk `spooled` made (after the items `keep` wrote); its kept items."""
        self._flush()
        self._handle.write(chunk.lines.encode("utf-8"))
        return chunk.kept

    def _flush(self) -> None:
        if self._pending:
            self._handle.write(redact("".join(self._pending)).encode("utf-8"))
            self._pending.clear()

    def close(self) -> Path:
        """Write what is pending and close the file (flushed to disk); its path."""
        if not self._handle.closed:
            self._flush()
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
        return self.path


def publish_scores(out: Path, items: Iterable[Mapping[str, Any]] | ItemSpool, metrics: Mapping[str, Any],
                   write_report: Callable[[Mapping[str, Any], Path], Any]) -> None:
    """Write a score dir whole (module docstring)."""
    staging = out.parent / f".{out.name}.scoring"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    if isinstance(items, ItemSpool):
        os.replace(items.close(), staging / "items.jsonl")
    else:
        write_lines_atomic(staging / "items.jsonl", (canonical_json(item) + "\n" for item in items))
    write_text_atomic(staging / "metrics.json", json.dumps(metrics, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    if not _METRICS_ONLY.get():
        write_report(metrics, staging)
    for path in staging.rglob("*"):
        if path.suffix in TEXT_SUFFIXES and path.name not in ("items.jsonl", "metrics.json"):
            write_text_atomic(path, path.read_text(encoding="utf-8"))
    replace_folder(out, staging)


def load_metrics(path: Path) -> dict[str, Any]:
    """metrics.json of a score dir (its items.jsonl must be there too, but is not read)."""
    metrics_path, items_path = path / "metrics.json", path / "items.jsonl"
    if not metrics_path.is_file() or not items_path.is_file():
        raise MmfaithError(f"{path}: not a score dir (needs metrics.json and items.jsonl); "
                           "make one with `mmfaith score FAMILY --out DIR`.")
    return json.loads(metrics_path.read_text(encoding="utf-8"))


def load_score_dir(path: Path, fields: Fields | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics.json, items.jsonl) of a score dir; each item with only `fields` when given (module docstring)."""
    metrics, shared = load_metrics(path), Shared()
    return metrics, [keep_fields(item, fields, shared) for _, item in read_jsonl(path / "items.jsonl")]


def score_labels(paths: Sequence[Path], metrics: Sequence[dict[str, Any]]) -> list[str]:
    """Each score's model name (with " (no image)" for a `run --no-image` score); with the folder's name where
    two scores still share a label."""
    models = [m["provenance"]["model"] + (" (no image)" if m["provenance"].get("no_image") else "") for m in metrics]
    return [model if models.count(model) == 1 else f"{model} ({path.name})" for model, path in zip(models, paths)]

