"""A score dir's items as `mmfaith report` holds them: numbers per item, not dicts (issue 34: a comparison of two
million-item score dirs in bounded memory).

- `ItemFold`: what a family's comparison keeps of an items.jsonl line: its `key` (what pairs it with another score's
  line: its id, CRM's id and variant), its metric `components` and `cluster` (the source image), and named `labels`
  (short strings: a template, a mode) and `numbers` (floats; NaN for null).
- `read_scored(paths, fold, metrics_of)`: each score dir's metrics.json (`metrics_of`, checked for every dir before
  any items are read) and its items.jsonl read line by line (one line held at a time, `mmfaith.jsonl.read_jsonl`'s
  errors) and folded into a `ScoredItems`, each dir on its own forked process at once (up to the usable cores).
  A `ScoredItems` holds per item its key, its components in a `stats.Components` table (8 bytes a value), a
  pointer per label (each distinct label held once) and 8 bytes per number: about 100 bytes and the key's string.
- `number(value)`: a line's value as a number (NaN for null: equal to neither 0 nor 1, as null is not).
- `one_per_key(items)`: the items a `{key: item}` table of them holds (a repeated key: its last line).
- `match(a, b, use_a, use_b)`: the positions of the pairs a comparison reads, in `a`'s order: exactly the pairs
  `by_key = {key(y): y for y in b if use_b(y)}; [(x, by_key[key(x)]) for x in a if use_a(x) and key(x) in by_key]`
  gives (a key repeated in `b`: its last line), `use_a`/`use_b` naming a number (true where non-zero) or None;
  score dirs listing the same keys in the same order (one dataset revision's) are matched by position.
- `paired(a, b, pos_a, pos_b, statistic, n, seed)`: `stats.paired_bootstrap` of those pairs, clustered by `a`'s
  clusters: the same numbers as the components of the pairs' lines in lists (`stats.take`).
"""
from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mmfaith.evaluators.score_dir import load_metrics
from mmfaith.evaluators.stats import Components, Statistic, paired_bootstrap, take
from mmfaith.jsonl import read_jsonl
from mmfaith.ordered_pool import ordered_map
from mmfaith.step_pool import available_cores

Line = dict[str, Any]


@dataclass(frozen=True)
class ItemFold:
    """What a comparison keeps of each items.jsonl line (module docstring)."""

    key: Callable[[Line], str]
    components: Callable[[Line], Mapping[str, float]]
    cluster: Callable[[Line], str]
    labels: Mapping[str, Callable[[Line], str]] = field(default_factory=dict)
    numbers: Mapping[str, Callable[[Line], float]] = field(default_factory=dict)


@dataclass
class ScoredItems:
    """A score dir's items folded by an `ItemFold`, in items.jsonl order (module docstring)."""

    keys: list[str]
    table: Components
    labels: dict[str, list[str]]
    numbers: dict[str, np.ndarray]


def fold_items(lines: Iterable[Line], fold: ItemFold) -> ScoredItems:
    """`lines` folded one at a time (module docstring)."""
    keys: list[str] = []
    table = Components()
    labels: dict[str, list[str]] = {name: [] for name in fold.labels}
    numbers = {name: array("d") for name in fold.numbers}
    held: dict[str, str] = {}
    for line in lines:
        keys.append(fold.key(line))
        table.add(fold.components(line), fold.cluster(line))
        for name, label in fold.labels.items():
            value = label(line)
            labels[name].append(held.setdefault(value, value))
        for name, number in fold.numbers.items():
            numbers[name].append(number(line))
    return ScoredItems(keys, table, labels,
                       {name: np.array(values, dtype=np.float64) for name, values in numbers.items()})


def read_scored(paths: Sequence[Path], fold: ItemFold, metrics_of: Callable[[Path], dict[str, Any]] = load_metrics
                ) -> list[tuple[dict[str, Any], ScoredItems]]:
    """Each score dir's metrics.json and folded items.jsonl, the dirs read side by side (module docstring)."""
    metrics = [metrics_of(path) for path in paths]  # a folder that is not a score dir is refused before any read

    def read(path: Path) -> ScoredItems:
        return fold_items((line for _, line in read_jsonl(path / "items.jsonl")), fold)

    return list(zip(metrics, ordered_map(read, paths, available_cores())))


def one_per_key(items: ScoredItems) -> ScoredItems:
    """`items` with one item per key, as `{key(x): x for x in items}` holds them: a repeated key's last item, in its
    first item's place (the items themselves when no key repeats)."""
    last = {key: p for p, key in enumerate(items.keys)}
    if len(last) == len(items.keys):
        return items
    kept = np.array(list(last.values()), dtype=np.int64)
    chosen = kept.tolist()
    return ScoredItems(list(last), take(items.table, kept), {name: [values[p] for p in chosen]
                                                              for name, values in items.labels.items()},
                       {name: values[kept] for name, values in items.numbers.items()})


def number(value: Any) -> float:
    """A line's value as a `numbers` entry: NaN for null (equal to nothing, as null is to 0 and 1)."""
    return float("nan") if value is None else float(value)


def match(a: ScoredItems, b: ScoredItems, use_a: str | None = None,
          use_b: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(positions in `a`, positions in `b`) of the pairs compared (module docstring). Score dirs of one dataset
    list the same keys in the same order: where the keys are equal position by position and none repeats, the
    pairs are the positions both use (no table by key)."""
    if a.keys == b.keys and len(set(a.keys)) == len(a.keys):
        used = np.ones(len(a.keys), dtype=bool)
        for name, items in ((use_a, a), (use_b, b)):
            if name is not None:
                used &= items.numbers[name] != 0
        aligned = np.flatnonzero(used)
        return aligned, aligned.copy()
    wanted_b = None if use_b is None else b.numbers[use_b].tolist()
    by_key = {key: p for p, key in enumerate(b.keys) if wanted_b is None or wanted_b[p]}
    wanted_a = None if use_a is None else a.numbers[use_a].tolist()
    pos_a, pos_b = array("q"), array("q")
    for p, key in enumerate(a.keys):
        if wanted_a is None or wanted_a[p]:
            q = by_key.get(key)
            if q is not None:
                pos_a.append(p)
                pos_b.append(q)
    return np.array(pos_a, dtype=np.int64), np.array(pos_b, dtype=np.int64)


def paired(a: ScoredItems, b: ScoredItems, pos_a: np.ndarray, pos_b: np.ndarray, statistic: Statistic, n: int,
           seed: int) -> dict[str, tuple[float | None, tuple[float, float] | None]]:
    """`stats.paired_bootstrap` of the pairs (module docstring)."""
    first = take(a.table, pos_a)
    clusters = first.cluster_names()
    second = take(b.table, pos_b, clusters)
    return paired_bootstrap(first, second, clusters, statistic, n, seed)
