"""Reading predictions.jsonl (a run's, or a submission) for any family's scorer.

Contract (`read_predictions(path, expected_probes, from_run, images_by_id, drop_stale, shown_by_id, repeat,
scored_meta, workers)`)
-------------------------------------------------------------------------------------------------------------
- A submission (the default) is validated as a whole and every problem is reported at once, each
  with its line number: bad JSON, schema violations (schemas/prediction.schema.json), unknown
  ids, probes the item does not have, a second answered line for one (id, probe), and lines of a
  second model. With `from_run` (predictions `mmfaith run` wrote, where retries append lines) the
  last answered line of an (id, probe) wins and a torn last line (a crash mid-write) is ignored.
- A line whose response is null is a failed call (counted in `n_errors`), never an answer; the
  (id, probe)s with a failed call and no answer are `failed` (evaluators/coverage.py).
- Stale lines: a line that records the images its request showed (`meta.images`) must have shown
  this dataset's images for that item: each image's sha256, or for a derived image (a canvas, a
  crop) every source's sha256, must be among `images_by_id[id]`. A line that showed other images
  (the dataset was rebuilt after the run) is an error listing the lines, or with `drop_stale`
  is dropped and counted (`n_stale`). Lines without `meta.images` (submissions) are not checked.
  Likewise a line that records what its item showed (`meta.shown_sha256`, written by `mmfaith
  run`: `shown_digest` of the plan's `shows`: images, question, options) must match
  `shown_by_id[id]`: a build with the same ids and images but options in another order (MCoT or
  VFaith built with another seed) is refused, or with `drop_stale` only the matching lines are
  scored and the others counted (a warning says how many).
- A line longer than MAX_LINE_BYTES is an error naming it (a file of one endless line, `/dev/zero`,
  is refused after reading that much, not read whole).
- Cost: the file is cut into blocks of BLOCK_BYTES on line boundaries (mmfaith/jsonl.py `line_blocks`: its
  sha256 computed on the way, the bytes read once here), and each block's lines are parsed and checked by the
  compiled schema on one of `workers` forked processes (mmfaith/ordered_pool.py; with one, here), which sends
  back a compact tuple per line (`_checked`): what the rules above need of it, and its kept line where it may
  be an answer. The rules that need earlier lines (one model, a second answer, the last answer wins) are
  applied here in file order, so the result and the errors are the same whatever `workers`. The per-item
  mappings (expected probes, images, shown digests) are looked up by the workers; a `PerItem` makes each value
  there, for the items a worker reads, instead of every item's up front here. A kept line is
  only its response and the meta a scorer reads (`kept_line`; a family may reduce the meta further with
  `scored_meta`, e.g. MCoT's traces), so memory is that of the answers.
- Errors count: one line naming the file, the number of bad lines and the first few with their
  line numbers (`errors.first_few`), never the whole list.
- Repeats: a line's repeat is `meta.generation.repeat` (0 where absent; `run --repeats N` writes
  0 .. N-1). Every line is validated; only the lines of `repeat` are read as answers and errors,
  and `repeats` says how many repeats the file holds (the highest repeat seen, plus one).
- `no_image`: every answered line was asked without images (`mmfaith run --no-image` sets
  `meta.no_image`); a file mixing answers with and without images is refused.
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from mmfaith.errors import SHOWN, MmfaithError, first_few
from mmfaith.gc_pause import gc_paused
from mmfaith.jsonl import LineBlock, block_lines, canonical_json, line_blocks
from mmfaith.evaluators.prediction_index import AnswerIndex, ItemTable, kept_line
from mmfaith.ordered_pool import ordered_map
from mmfaith.records import Shared
from mmfaith.schema import schema_errors

Key = tuple[str, str]
Item = TypeVar("Item")
Value = TypeVar("Value")
MAX_LINE_BYTES = 64 << 20
"""The longest prediction line read (64 MiB; `mmfaith run` stores answers of at most 100000 characters)."""
BLOCK_BYTES = 1 << 20
"""Bytes of the file parsed at a time by one worker (mmfaith/jsonl.py `line_blocks`)."""


@dataclass(frozen=True)
class PredictionSet:
    """The answered lines of one model, by (id, probe), and what the file held besides."""

    answered: Mapping[Key, Any]
    """(id, probe) -> its kept line (`kept_line`); read with an `ItemTable`, an `AnswerIndex` (its line's place)."""
    model: str
    n_errors: int
    n_stale: int
    sha256: str
    failed: Collection[Key] = frozenset()
    """(id, probe)s with a failed call and no answered line (read with an `ItemTable`: the `AnswerIndex`)."""
    no_image: bool = False
    repeats: int = 1


def repeat_of(line: dict[str, Any]) -> int:
    """The repeat a prediction line answers (`meta.generation.repeat`, 0 where absent)."""
    return int(((line.get("meta") or {}).get("generation") or {}).get("repeat", 0))


def shown_digest(shows: Mapping[str, Any]) -> str:
    """sha256 of what one item shows (a plan's `shows`: images' sha256, question, options): `meta.shown_sha256`."""
    return hashlib.sha256(canonical_json(shows).encode("utf-8")).hexdigest()


class PerItem(Mapping[str, Value], Generic[Item, Value]):
    """`make(item)` by item id, each made when first looked up and kept: a scorer's per-item expectations
    (`read_predictions`' expected probes, images, shown digests) made on the workers that read the items' lines,
    for those items only, not all up front in the scorer's process."""

    def __init__(self, items: Mapping[str, Item], make: Callable[[Item], Value]) -> None:
        self._items = items
        self._make = make
        self._made: dict[str, Value] = {}

    def __getitem__(self, item_id: str) -> Value:
        if item_id not in self._made:
            self._made[item_id] = self._make(self._items[item_id])  # KeyError for an id not among the items
        return self._made[item_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def read_predictions(path: Path, expected_probes: Mapping[str, Sequence[str]], from_run: bool,
                     images_by_id: Mapping[str, set[str]] | None = None, drop_stale: bool = False,
                     shown_by_id: Mapping[str, str | None] | None = None, repeat: int = 0,
                     scored_meta: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                     workers: int = 1, index: ItemTable | None = None,
                     fact: Callable[[dict[str, Any]], Any] | None = None) -> PredictionSet:
    """Read and validate predictions (module docstring); raise one MmfaithError listing every bad line. With
    `index` (the dataset's items, evaluators/prediction_index.py), `answered` and `failed` are an `AnswerIndex`:
    the winning lines' places, read again a chunk of items at a time (`AnswerIndex.lines`), not the kept lines;
    `fact(line)` (hashable, a few distinct values) is kept with each answer's place (`AnswerIndex.facts`)."""
    digest = hashlib.sha256()
    try:
        blocks = line_blocks(path, BLOCK_BYTES, MAX_LINE_BYTES, digest)
    except OSError as exc:
        raise MmfaithError(f"{path}: cannot read the predictions ({exc.strerror}); pass --predictions FILE.") from exc
    problems: list[str] = []
    stale: list[int] = []
    answered: MutableMapping[Key, tuple[int, Any]] = {} if index is None else AnswerIndex(index, path)
    model: tuple[str, int] | None = None
    n_errors = 0
    failed: set[Key] = set()
    repeats = 1

    def read(block: LineBlock) -> list[tuple[Any, ...]]:
        shared, offset, checked = Shared(), block.start, []
        for number, raw in block_lines(block):
            if raw.strip():
                where = None if index is None else (offset if block.data is None else raw)
                checked.append(_checked(number, raw, expected_probes, from_run, images_by_id, shown_by_id, repeat,
                                        scored_meta, shared, where, fact))
            offset += len(raw)
        return [line for line in checked if line is not None]

    with gc_paused():  # many objects, no garbage (mmfaith/gc_pause.py)
        for lines in ordered_map(read, blocks, workers):
            for line in lines:
                if len(line) == 2:  # not JSON, or not a prediction line
                    problems.append(line[1])
                    continue
                number, item_id, probe, name, line_repeat, bad, is_stale, given, kept = line
                repeats = max(repeats, line_repeat + 1)
                if model is not None and name != model[0]:
                    bad += (f"model {name!r} differs from {model[0]!r} of line {model[1]} (one model per file)",)
                model = model or (name, number)
                key = (item_id, sys.intern(probe))
                if given and key in answered and not from_run and line_repeat == repeat:
                    bad += (f"a second answer to {key[0]} / {key[1]} (first on line {answered[key][0]}; "
                            "predictions of `mmfaith run` are scored with --from-run)",)
                if bad:
                    problems.append(f"line {number}: " + "; ".join(bad))
                elif line_repeat != repeat:
                    continue
                elif is_stale:
                    stale.append(number)
                elif not given:
                    n_errors += 1
                    if isinstance(answered, AnswerIndex):
                        answered.fail(key)
                    else:
                        failed.add(key)
                else:
                    answered[key] = (number, kept)
    if problems:
        raise MmfaithError(f"{path}: {len(problems)} bad line(s), fix them and score again (the first "
                           f"{min(len(problems), SHOWN)} shown): {first_few(problems)}")
    if stale and not drop_stale:
        shown = first_few([str(number) for number in stale], sep=", ")
        raise MmfaithError(f"{path}: {len(stale)} line(s) answered about other images, questions or options than "
                           f"this dataset's (lines {shown}): the predictions were made on another build; run again "
                           "into a new --out, or add --drop-stale to score only the lines that match.")
    if repeat >= repeats:
        raise MmfaithError(f"{path}: holds {repeats} repeat(s) (0 .. {repeats - 1}), not repeat {repeat}; "
                           "pass --repeat with one of them.")
    if stale:
        print(f"mmfaith: warning: {path}: {len(stale)} line(s) made on another build dropped (--drop-stale); "
              f"scoring the {len(answered)} answered line(s) that match.", file=sys.stderr, flush=True)
    if model is None:
        raise MmfaithError(f"{path}: holds no predictions; write one line per (id, probe) as in "
                           "schemas/prediction.schema.json.")
    if isinstance(answered, AnswerIndex):
        blind = answered.no_image()
    else:
        blind = {bool((line.get("meta") or {}).get("no_image")) for _, line in answered.values()}
    if len(blind) > 1:
        raise MmfaithError(f"{path}: mixes answers asked with and without images (meta.no_image); score a "
                           "--no-image run apart from the run with images.")
    if isinstance(answered, AnswerIndex):
        return PredictionSet(answered, model[0], n_errors, len(stale), digest.hexdigest(), answered.failed(),
                             blind == {True}, repeats)
    return PredictionSet({key: line for key, (_, line) in answered.items()}, model[0], n_errors, len(stale),
                         digest.hexdigest(), frozenset(failed - set(answered)), blind == {True},
                         repeats)


def _checked(number: int, raw: bytes, probes_of: Mapping[str, Sequence[str]], from_run: bool,
             images_by_id: Mapping[str, set[str]] | None, shown_by_id: Mapping[str, str] | None, repeat: int,
             scored_meta: Callable[[dict[str, Any]], dict[str, Any]] | None,
             shared: Shared, where: int | bytes | None = None,
             fact: Callable[[dict[str, Any]], Any] | None = None) -> tuple[Any, ...] | None:
    """What the reader needs of one non-blank line, made where the line is parsed (a worker), compact to send back:
    (number, problem) for a line that is not JSON or breaks the schema; None for a torn last line of a run that
    is not JSON; else (number, id, probe, model, repeat, its problems that need no other line (unknown id or
    probe), whether it is stale, whether it holds a response, and its `kept_line` where it is an answer of
    `repeat` that may be kept, else None). With `where` (the line's byte offset, or its bytes where the file
    cannot be read twice), the kept answer is (where, length, asked without images, `fact(line)` or None):
    evaluators/prediction_index.py."""
    try:
        line = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        return None if from_run and not raw.endswith(b"\n") else (number, f"line {number}: not valid JSON ({exc})")
    errors = schema_errors("prediction", line)
    if errors:
        return number, f"line {number}: " + "; ".join(errors)
    item_id, probe, line_repeat = line["id"], sys.intern(line["probe"]), repeat_of(line)
    given = line["response"] is not None
    probes = probes_of.get(item_id)
    bad: tuple[str, ...] = ()
    if probes is None:
        bad = (f"unknown id {item_id!r} (not in the dataset)",)
    elif probe not in probes:
        bad = (f"unknown probe {probe!r} (use {', '.join(probes)})",)
    is_stale = line_repeat == repeat and not bad and (
        (images_by_id is not None and not _shows_dataset_images(line, images_by_id.get(item_id, set())))
        or not _shows_dataset_content(line, (shown_by_id or {}).get(item_id)))
    keep = given and line_repeat == repeat and not bad and not is_stale
    if keep and where is not None:
        kept: Any = (where, len(raw), bool((line.get("meta") or {}).get("no_image")), fact and fact(line))
    else:
        kept = kept_line(line, shared, scored_meta) if keep else None
    return (number, item_id, probe, sys.intern(line["model"]), line_repeat, bad, is_stale, given, kept)


def _shows_dataset_images(line: dict[str, Any], dataset_images: set[str]) -> bool:
    shown = (line.get("meta") or {}).get("images")
    if not shown:
        return True
    return all(set(image.get("sources") or [image["sha256"]]) <= dataset_images for image in shown)


def _shows_dataset_content(line: dict[str, Any], expected: str | None) -> bool:
    recorded = (line.get("meta") or {}).get("shown_sha256")
    return recorded is None or expected is None or recorded == expected
