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

Cost: per-item components are summed into a (cluster, key) matrix in one pass; replicates are drawn
`CHUNK_CELLS` cluster draws at a time from one generator (the same stream, so the same numbers, as
drawing all at once), so memory is that of a chunk plus (replicates x keys), never replicates x
clusters.
"""
from __future__ import annotations

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


def _cluster_sums(components: Sequence[Mapping[str, float]], clusters: Sequence[str],
                  keys: Sequence[str], order: Sequence[str]) -> np.ndarray:
    """Matrix (cluster, key) of the components summed within each cluster, clusters in `order`.

    Items are grouped by their keys (a family's items have a few layouts: scored, control...), and each
    group's values are read `BLOCK_ITEMS` items at a time as one array (no per-key pass over every item),
    each cell summed in item order within a block and group."""
    row = {cluster: i for i, cluster in enumerate(order)}
    rows = np.fromiter((row[cluster] for cluster in clusters), dtype=np.int64, count=len(clusters))
    if rows.size != len(components):
        raise ValueError(f"{len(components)} items but {rows.size} clusters")
    column = {key: j for j, key in enumerate(keys)}
    by_layout: dict[tuple[str, ...], list[int]] = {}
    for i, item in enumerate(components):
        by_layout.setdefault(tuple(item), []).append(i)
    matrix = np.zeros((len(order), len(keys)))
    for layout, members in by_layout.items():
        columns = [column[key] for key in layout]
        for start in range(0, len(members), BLOCK_ITEMS):
            block = members[start:start + BLOCK_ITEMS]
            values = np.array([tuple(components[i].values()) for i in block], dtype=np.float64)
            where = rows[block]
            for k, j in enumerate(columns):
                matrix[:, j] += np.bincount(where, weights=values[:, k], minlength=len(order))
    return matrix


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


def _replicates(components: Sequence[Mapping[str, float]], clusters: Sequence[str], statistic: Statistic,
                n: int, seed: int, order: Sequence[str]) -> tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]:
    """(point estimate, replicates) of every metric the statistic computes."""
    keys = sorted(set().union(*components))
    matrix = _cluster_sums(components, clusters, keys, order)
    point = statistic({key: matrix[:, i].sum(keepdims=True) for i, key in enumerate(keys)})
    totals = _replicate_totals(matrix, n, seed)
    return point, statistic({key: totals[:, i] for i, key in enumerate(keys)})


def bootstrap_ci(components: Sequence[Mapping[str, float]], clusters: Sequence[str], statistic: Statistic,
                 n: int, seed: int) -> dict[str, tuple[float, float] | None]:
    """Percentile 95% interval of each metric of `statistic`, resampling clusters; None where undefined."""
    if n < 1 or not components:
        return {}
    order = sorted(set(clusters))
    _, replicates = _replicates(components, clusters, statistic, n, seed, order)
    return {name: _interval(values) for name, values in replicates.items()}


def paired_bootstrap(components_a: Sequence[Mapping[str, float]], components_b: Sequence[Mapping[str, float]],
                     clusters: Sequence[str], statistic: Statistic, n: int,
                     seed: int) -> dict[str, tuple[float | None, tuple[float, float] | None]]:
    """(a - b, its 95% interval) per metric, for two models' components on the same items in the same order."""
    order = sorted(set(clusters))
    point_a, reps_a = _replicates(components_a, clusters, statistic, max(n, 1), seed, order)
    point_b, reps_b = _replicates(components_b, clusters, statistic, max(n, 1), seed, order)
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
