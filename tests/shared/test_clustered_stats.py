"""Cluster-aware statistics (evaluators/stats.py): Durkalski's clustered McNemar, the clustered
bootstrap's interval and the spread over replicates, each against a value computed by hand."""
from __future__ import annotations

from math import erfc, sqrt

import pytest

from mmfaith.evaluators.stats import bootstrap_ci, clustered_mcnemar, mcnemar_exact, spread


def test_clustered_mcnemar_matches_the_hand_computed_statistic() -> None:
    # By hand: clusters A (b=2, c=0), B (b=1, c=1), C (b=1, c=0), D (b=2, c=1):
    # per-cluster b_k - c_k = 2, 0, 1, 1; sum 4, sum of squares 4 + 0 + 1 + 1 = 6;
    # X^2 = 16 / 6 = 2.6667; chi-square(1) survival = erfc(sqrt(2.6667 / 2)) = 0.10247.
    differences = [1, 1, 1, -1, 1, 1, 1, -1, 0, 0]
    clusters = ["A", "A", "B", "B", "C", "D", "D", "D", "A", "C"]
    assert clustered_mcnemar(differences, clusters) == pytest.approx(erfc(sqrt((16 / 6) / 2)))
    assert clustered_mcnemar(differences, clusters) == pytest.approx(0.10247, abs=1e-5)


def test_one_pair_per_cluster_is_the_plain_mcnemar_chi_square() -> None:
    # b = 6, c = 2, every pair its own cluster: X^2 = (6 - 2)^2 / (6 + 2) = 2, p = erfc(1) = 0.15730.
    differences = [1] * 6 + [-1] * 2 + [0] * 5
    clusters = [f"img{i}" for i in range(len(differences))]
    assert clustered_mcnemar(differences, clusters) == pytest.approx(0.157299, abs=1e-6)


def test_items_of_one_image_are_not_independent_evidence() -> None:
    """Eight b-pairs from two images: McNemar calls it significant (p = 0.0078), the clustered test
    (X^2 = (4 + 4)^2 / (16 + 16) = 2, p = 0.157) does not: two images are two pieces of evidence."""
    differences = [1] * 8
    clusters = ["A"] * 4 + ["B"] * 4
    assert mcnemar_exact(8, 0) == pytest.approx(2 / 256)
    assert clustered_mcnemar(differences, clusters) == pytest.approx(erfc(1.0))


def test_balanced_clusters_give_p_one() -> None:
    assert clustered_mcnemar([1, -1, 0], ["A", "A", "B"]) == 1.0
    assert clustered_mcnemar([], []) == 1.0


def test_clustered_interval_resamples_images_not_items() -> None:
    """Image A: three items right; image B: one item wrong; rate 0.75. Resampling two images gives
    AA = 1.0 (probability 1/4), AB or BA = 0.75 (1/2), BB = 0.0 (1/4): the 2.5 and 97.5 percentiles
    are 0 and 1. Resampling the four items instead would give 0 with probability 0.25^4 = 0.004 only."""
    components = [{"right": 1.0, "n": 1.0}] * 3 + [{"right": 0.0, "n": 1.0}]
    clusters = ["A", "A", "A", "B"]
    interval = bootstrap_ci(components, clusters, lambda s: {"accuracy": s["right"] / s["n"]}, 2000, 0)["accuracy"]
    assert interval == (0.0, 1.0)
    by_item = bootstrap_ci(components, ["i0", "i1", "i2", "i3"], lambda s: {"accuracy": s["right"] / s["n"]},
                           2000, 0)["accuracy"]
    assert by_item[0] > 0.0


def test_spread_over_replicates() -> None:
    # By hand: 0.5, 0.7, 0.6: mean 0.6, deviations -0.1, 0.1, 0; sd = sqrt(0.02 / 2) = 0.1.
    assert spread([0.5, 0.7, None, 0.6]) == {"mean": 0.6, "sd": 0.1, "min": 0.5, "max": 0.7, "n": 3}
    assert spread([0.4]) == {"mean": 0.4, "sd": None, "min": 0.4, "max": 0.4, "n": 1}
    assert spread([None]) == {"mean": None, "sd": None, "min": None, "max": None, "n": 0}
