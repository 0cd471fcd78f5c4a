"""Uncertainty for benchmark metrics: cluster bootstrap, paired bootstrap and exact McNemar.

Every metric here is a function of sums of per-item components (numerators and denominators), so
a bootstrap replicate is a weighted sum of per-cluster sums: resampling clusters with replacement
is drawing how many times each cluster is taken. Clusters are the unit of resampling because items
made from one source image are not independent (SPD-Faith pairs share their COCO image).

- `bootstrap_ci`: percentile-method 95% interval of each metric, `n` replicates, seeded
  (numpy's default_rng), so the output is deterministic.
- `paired_bootstrap`: the difference of a metric between two models scored on the same items,
  both resampled with the same clusters in each replicate.
- `mcnemar_exact`: two-sided exact McNemar p-value: the binomial test of the discordant pairs
  b and c against p = 1/2, p = min(1, 2 * P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2)
  (what scipy.stats.binomtest(b, b + c).pvalue gives; the tail is scipy.special.bdtr, the binomial
  CDF through the regularised incomplete beta function: constant time, a far lighter import).
- `clustered_mcnemar`: the McNemar test for pairs clustered by source image, after Durkalski,
  Palesch, Lipsitz & Rust, "Analysis of clustered matched-pair data", Statistics in Medicine
  22(15):2417-2428 (2003): with b_k and c_k the two kinds of discordant pairs in cluster k,
  X^2 = (sum_k (b_k - c_k))^2 / sum_k (b_k - c_k)^2, referred to chi-square with 1 degree of
  freedom. With one pair per cluster it is McNemar's (b - c)^2 / (b + c); items of one image that
  change together count as one piece of evidence, not several.
- `spread`: mean, sample standard deviation, min and max of one metric over replicates (repeats
  of a run, or builds made with different seeds).

Cost: per-item components are held compactly (`Components`: flat arrays of numbers per key layout, a scorer
folding its items one at a time holds no dict per item) and summed into a (cluster, key) matrix in one pass; replicates are drawn
`CHUNK_CELLS` cluster draws at a time from one generator (the same stream, so the same numbers, as
drawing all at once), so memory is that of a chunk plus (replicates x keys), never replicates x
clusters.
"""
from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from math import erfc, sqrt

import numpy as np
from scipy.special import bdtr

Sums = dict[str, np.ndarray]
Statistic = Callable[[Sums], Mapping[str, np.ndarray]]
CONFIDENCE = 0.95
CHUNK_CELLS = 1 << 22
"""Cluster draws per chunk of replicates (32 MiB of int64 draws, as much again in weights)."""
BLOCK_ITEMS = 1 << 16
"""Items whose components are read into one array at a time (at most 64 K x keys floats)."""


class Components:
    """Per-item components (a metric's numerators and denominators) with each item's cluster, held compactly: per
    key layout (the item's keys in order; a family's items have a few), the items' positions, cluster numbers and
    values in flat arrays (8 bytes a value), so a scorer folding a million items holds numbers, not dicts.
    `add` items in order; `column(key)` is the key's value of every item in order (0.0 where absent),
    `cluster_names()` every item's cluster; `of(components, clusters)` holds a list of dicts the same way."""

    def __init__(self) -> None:
        self.layouts: dict[tuple[str, ...], tuple[array, array, array]] = {}
        """keys -> (positions, cluster numbers (first seen, from 0), values: len(keys) per item) of its items."""
        self.clusters: dict[str, int] = {}
        self.n = 0

    @classmethod
    def of(cls, components: Sequence[Mapping[str, float]], clusters: Sequence[str]) -> Components:
        """`components` and their `clusters` (one each, in item order) held as a table."""
        if len(components) != len(clusters):
            raise ValueError(f"{len(components)} items but {len(clusters)} clusters")
        table = cls()
        for parts, cluster in zip(components, clusters):
            table.add(parts, cluster)
        return table

    def add(self, parts: Mapping[str, float], cluster: str) -> None:
        """The next item's components and cluster."""
        layout = tuple(parts)
        held = self.layouts.get(layout)
        if held is None:
            held = self.layouts[layout] = (array("q"), array("q"), array("d"))
        number = self.clusters.get(cluster)
        if number is None:
            number = self.clusters[cluster] = len(self.clusters)
        held[0].append(self.n)
        held[1].append(number)
        held[2].extend(parts.values())
        self.n += 1

    def add_rows(self, layout: tuple[str, ...], values: np.ndarray, clusters: Sequence[str]) -> None:
        """The next `len(clusters)` items, all with the keys `layout`: row i of `values` is item i's values in
        `layout`'s order, `clusters[i]` its cluster. The same table as `add` of each row's dict, without a dict."""
        rows = np.asarray(values, dtype=np.float64).reshape(len(clusters), len(layout))
        held = self.layouts.get(layout)
        if held is None:
            held = self.layouts[layout] = (array("q"), array("q"), array("d"))
        held[0].extend(range(self.n, self.n + len(clusters)))
        held[1].extend(self.clusters.setdefault(name, len(self.clusters)) for name in clusters)
        held[2].frombytes(np.ascontiguousarray(rows).tobytes())
        self.n += len(clusters)

    def keys(self) -> set[str]:
        """Every key some item has."""
        return {key for layout in self.layouts for key in layout}

    def column(self, key: str) -> np.ndarray:
        """The key's value of every item, in item order; 0.0 where an item lacks it."""
        values = np.zeros(self.n)
        for layout, (positions, _, flat) in self.layouts.items():
            if key in layout:
                values[np.frombuffer(positions, dtype=np.int64)] = (
                    np.frombuffer(flat, dtype=np.float64).reshape(-1, len(layout))[:, layout.index(key)])
        return values

    def item_sum(self, key: str) -> float:
        """`sum(parts.get(key, 0.0) for parts in components)` over the items in order: the same float."""
        return sum(self.column(key).tolist())

    def cluster_names(self) -> list[str]:
        """Every item's cluster, in item order."""
        names = list(self.clusters)
        numbers = np.zeros(self.n, dtype=np.int64)
        for positions, clusters, _ in self.layouts.values():
            numbers[np.frombuffer(positions, dtype=np.int64)] = np.frombuffer(clusters, dtype=np.int64)
        return [names[number] for number in numbers.tolist()]


def _cluster_sums(table: Components, keys: Sequence[str], order: Sequence[str]) -> np.ndarray:
    """Matrix (cluster, key) of the components summed within each cluster, clusters in `order`.

    Items are grouped by their keys (a family's items have a few layouts: scored, control...), and each
    group's values are read `BLOCK_ITEMS` items at a time as one array (no per-key pass over every item),
    each cell summed in item order within a block and group."""
    row = {cluster: i for i, cluster in enumerate(order)}
    rows_of = np.array([row[cluster] for cluster in table.clusters], dtype=np.int64)
    column = {key: j for j, key in enumerate(keys)}
    matrix = np.zeros((len(order), len(keys)))
    for layout, (_, clusters, flat) in table.layouts.items():
        columns = [column[key] for key in layout]
        rows = rows_of[np.frombuffer(clusters, dtype=np.int64)]
        values = np.frombuffer(flat, dtype=np.float64).reshape(-1, len(layout))
        for start in range(0, len(rows), BLOCK_ITEMS):
            where, block = rows[start:start + BLOCK_ITEMS], values[start:start + BLOCK_ITEMS]
            for k, j in enumerate(columns):
                matrix[:, j] += np.bincount(where, weights=block[:, k], minlength=len(order))
    return matrix


def _table(components: Sequence[Mapping[str, float]] | Components, clusters: Sequence[str] | None) -> Components:
    """`components` as a table: as given, or a list of dicts with its `clusters` held as one (`Components.of`)."""
    if isinstance(components, Components):
        return components
    if clusters is None:
        raise ValueError("a list of components needs its clusters")
    return Components.of(components, clusters)


def _replicate_totals(matrix: np.ndarray, n: int, seed: int, chunk_cells: int = CHUNK_CELLS) -> np.ndarray:
    """(n, key) totals of the bootstrap replicates: replicate r sums the matrix's rows (clusters) drawn
    with replacement, as many draws as clusters; drawn in chunks of replicates from one seeded stream."""
    n_clusters = matrix.shape[0]
    rng = np.random.default_rng(seed)
    per_chunk = max(1, chunk_cells // max(n_clusters, 1))
    totals = np.empty((n, matrix.shape[1]))
    for start in range(0, n, per_chunk):
        size = min(per_chunk, n - start)
        draws = rng.integers(0, n_clusters, size=(size, n_clusters))
        draws += np.arange(size)[:, None] * n_clusters
        weights = np.bincount(draws.ravel(), minlength=size * n_clusters).reshape(size, n_clusters)
        totals[start:start + size] = weights.astype(np.float64) @ matrix
    return totals


def _interval(values: np.ndarray) -> tuple[float, float] | None:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return None
    tail = (1.0 - CONFIDENCE) / 2 * 100.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return float(low), float(high)


def _replicates(table: Components, statistic: Statistic, n: int, seed: int,
                order: Sequence[str]) -> tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]:
    """(point estimate, replicates) of every metric the statistic computes."""
    keys = sorted(table.keys())
    matrix = _cluster_sums(table, keys, order)
    point = statistic({key: matrix[:, i].sum(keepdims=True) for i, key in enumerate(keys)})
    totals = _replicate_totals(matrix, n, seed)
    return point, statistic({key: totals[:, i] for i, key in enumerate(keys)})


def bootstrap_ci(components: Sequence[Mapping[str, float]] | Components, clusters: Sequence[str] | None,
                 statistic: Statistic, n: int, seed: int) -> dict[str, tuple[float, float] | None]:
    """Percentile 95% interval of each metric of `statistic`, resampling clusters; None where undefined. The
    components are a list of dicts with their `clusters`, or a `Components` table (`clusters` None)."""
    table = _table(components, clusters)
    if n < 1 or not table.n:
        return {}
    order = sorted(table.clusters)
    _, replicates = _replicates(table, statistic, n, seed, order)
    return {name: _interval(values) for name, values in replicates.items()}


def paired_bootstrap(components_a: Sequence[Mapping[str, float]] | Components,
                     components_b: Sequence[Mapping[str, float]] | Components, clusters: Sequence[str],
                     statistic: Statistic, n: int, seed: int) -> dict[str, tuple[float | None, tuple[float, float] | None]]:
    """(a - b, its 95% interval) per metric, for two models' components on the same items in the same order: lists
    of dicts clustered by `clusters`, or `Components` tables (each holding its items' clusters, `clusters` naming
    them in item order)."""
    order = sorted(set(clusters))
    point_a, reps_a = _replicates(_table(components_a, clusters), statistic, max(n, 1), seed, order)
    point_b, reps_b = _replicates(_table(components_b, clusters), statistic, max(n, 1), seed, order)
    result: dict[str, tuple[float | None, tuple[float, float] | None]] = {}
    for name in point_a:
        diff = float(point_a[name][0] - point_b[name][0])
        result[name] = (diff if np.isfinite(diff) else None, _interval(reps_a[name] - reps_b[name]) if n >= 1 else None)
    return result


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for b and c discordant pairs (module docstring)."""
    if b + c == 0:
        return 1.0
    return float(min(1.0, 2.0 * bdtr(min(b, c), b + c, 0.5)))


def clustered_mcnemar(differences: Sequence[int], clusters: Sequence[str]) -> float:
    """Two-sided p-value of Durkalski et al.'s clustered McNemar test (module docstring).

    `differences[i]` is +1 when item i is a discordant pair of the first kind (b: right under A
    only), -1 for the second kind (c: right under B only), 0 when concordant; `clusters[i]` is its
    source image. 1.0 when no cluster has more pairs of one kind than of the other.
    """
    by_cluster: dict[str, int] = {}
    for difference, cluster in zip(differences, clusters, strict=True):
        by_cluster[cluster] = by_cluster.get(cluster, 0) + difference
    denominator = sum(d * d for d in by_cluster.values())
    if denominator == 0:
        return 1.0
    statistic = sum(by_cluster.values()) ** 2 / denominator
    return erfc(sqrt(statistic / 2.0))  # chi-square(1) survival function


def spread(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """{mean, sd (sample, n - 1), min, max, n} of a metric's defined values over replicates; sd None below two."""
    defined = [float(v) for v in values if v is not None]
    if not defined:
        return {"mean": None, "sd": None, "min": None, "max": None, "n": 0}
    array = np.array(defined)
    return {"mean": round(float(array.mean()), 6),
            "sd": round(float(array.std(ddof=1)), 6) if array.size > 1 else None,
            "min": round(float(array.min()), 6), "max": round(float(array.max()), 6), "n": int(array.size)}


def discordance(first: Sequence[float], second: Sequence[float]) -> list[int]:
    """Per pair, +1 when right (true) under `first` only, -1 under `second` only, 0 otherwise: the
    `differences` of `clustered_mcnemar`."""
    return [int(bool(x) and not y) - int(bool(y) and not x) for x, y in zip(first, second, strict=True)]


def take(table: Components, positions: Sequence[int] | np.ndarray, clusters: Sequence[str] | None = None) -> Components:
    """The items of `table` at `positions`, in that order, as a table of their own: what `Components.of` of their
    components would hold (the same layouts in the same order of first appearance, clusters numbered as first
    seen), each item with its own cluster or with `clusters` (one name per position: a paired comparison's items
    clustered by the first model's lines)."""
    chosen = np.asarray(positions, dtype=np.int64)
    layout_of, row_of, cluster_of = (np.zeros(table.n, dtype=np.int64) for _ in range(3))
    for k, (where, numbers, _) in enumerate(table.layouts.values()):
        at = np.frombuffer(where, dtype=np.int64)
        layout_of[at], row_of[at], cluster_of[at] = k, np.arange(len(at)), np.frombuffer(numbers, dtype=np.int64)
    if clusters is None:
        names = list(table.clusters)
        clusters = [names[number] for number in cluster_of[chosen].tolist()]
    if len(clusters) != len(chosen):
        raise ValueError(f"{len(chosen)} positions but {len(clusters)} clusters")
    result = Components()
    numbered = np.array([result.clusters.setdefault(name, len(result.clusters)) for name in clusters], dtype=np.int64)
    layouts, layout_at, rows = list(table.layouts.items()), layout_of[chosen], row_of[chosen]
    kinds, first = np.unique(layout_at, return_index=True)
    for k in kinds[np.argsort(first)].tolist():
        layout, (where, _, flat) = layouts[k]
        mask = layout_at == k
        values = np.frombuffer(flat, dtype=np.float64).reshape(len(where), len(layout))[rows[mask]]
        result.layouts[layout] = (array("q", np.flatnonzero(mask).tobytes()), array("q", numbered[mask].tobytes()),
                                  array("d", values.tobytes()))
    result.n = len(chosen)
    return result
