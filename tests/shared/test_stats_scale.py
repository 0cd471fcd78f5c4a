"""evaluators/stats.py at scale (issue 34): McNemar in constant time with the same p-values, and bootstrap
replicates drawn in chunks with the same numbers as drawing them all at once."""
from __future__ import annotations

import time
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy.stats import binomtest

from mmfaith.evaluators import stats


def big_integer_mcnemar(b: int, c: int) -> float:
    """The definition, exactly: min(1, 2 * P(X <= min(b, c))), X ~ Binomial(b + c, 1/2) (the code before issue 34)."""
    n = b + c
    if n == 0:
        return 1.0
    return float(min(Fraction(1), 2 * Fraction(sum(comb(n, k) for k in range(min(b, c) + 1)), 2 ** n)))


@pytest.mark.parametrize("n", [1, 2, 7, 30, 101, 400])
def test_mcnemar_equals_the_big_integer_definition(n: int) -> None:
    for b in range(n + 1):
        assert stats.mcnemar_exact(b, n - b) == pytest.approx(big_integer_mcnemar(b, n - b), rel=1e-12, abs=1e-300)


def test_mcnemar_equals_scipy_binomtest_and_is_fast_at_a_million() -> None:
    for b, c in [(3, 3), (1, 5), (900, 1100), (30_000, 31_552)]:
        assert stats.mcnemar_exact(b, c) == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9, abs=1e-300)
    started = time.perf_counter()
    p = stats.mcnemar_exact(480_000, 520_000)
    assert time.perf_counter() - started < 0.1 and 0.0 <= p < 1e-100


def test_chunked_replicates_equal_all_at_once() -> None:
    """The replicate totals drawn a chunk at a time equal weights drawn at once and counted with np.add.at
    (the code before issue 34), for a chunk smaller than one replicate and one of several replicates."""
    rng = np.random.default_rng(7)
    matrix = rng.integers(0, 5, size=(37, 3)).astype(float)
    draws = np.random.default_rng(11).integers(0, 37, size=(250, 37))
    weights = np.zeros((250, 37))
    np.add.at(weights, (np.arange(250)[:, None], draws), 1.0)
    expected = weights @ matrix
    for cells in (10, 37 * 3, 37 * 64, 1 << 22):
        assert np.array_equal(stats._replicate_totals(matrix, 250, 11, chunk_cells=cells), expected)


def test_cluster_sums_of_mixed_layouts_equal_the_sums_by_hand() -> None:
    """Items of several key layouts (keys shared between layouts, given in another order, some missing) summed
    per (cluster, key) as the definition says: the sum of the key's values over the cluster's items, 0 where none
    has the key. Computed by hand below; with a block smaller than a layout's items, blocks add up the same."""
    components = [{"n": 1.0, "right": 1.0}, {"right": 0.0, "n": 1.0, "alarm": 1.0}, {"n": 1.0, "right": 1.0},
                  {"alarm": 0.0}, {"n": 1.0, "right": 0.5}]
    clusters = ["b", "a", "a", "b", "b"]
    keys, order = ["alarm", "n", "right"], ["a", "b"]
    # a: items 1, 2 -> alarm 1, n 2, right 0 + 1; b: items 0, 3, 4 -> alarm 0, n 2, right 1 + 0.5
    by_hand = np.array([[1.0, 2.0, 1.0], [0.0, 2.0, 1.5]])
    assert np.array_equal(stats._cluster_sums(stats.Components.of(components, clusters), keys, order), by_hand)
    previous = stats.BLOCK_ITEMS
    try:
        stats.BLOCK_ITEMS = 1
        assert np.array_equal(stats._cluster_sums(stats.Components.of(components, clusters), keys, order), by_hand)
    finally:
        stats.BLOCK_ITEMS = previous
