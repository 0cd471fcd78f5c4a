"""SPD-Faith's summary folded into numbers (evaluators/spd_faith/metrics.py `Summary`): the same metrics and
bootstrap intervals as the items' component dicts, whatever the chunks it is folded in, in tens of bytes a pair."""
from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Iterator

import pytest

from mmfaith.evaluators import stats
from mmfaith.evaluators.spd_faith.metrics import (Summary, headline_beside_from_sums, headline_from_sums,
                                                  item_components, summarize)
from tests.spd_faith.test_spd_metrics import claims_json, make_item

DOG, CUP = ("remove", "dog", None), ("color", "cup", "red")


def mixed_items() -> list[dict]:
    """Pairs of every group and controls over six source images, answered right, wrong, partly and not at all."""
    answers = [dict(same="\\boxed{no}", different="\\boxed{yes}", count="\\boxed{1}",
                    describe=claims_json(("remove", "dog"))),
               dict(same="\\boxed{yes}", different="\\boxed{yes}", count="\\boxed{3}",
                    describe=claims_json(("color", "cup", "to red"), ("moved", "bus"))),
               dict(same="maybe", different=None, count="two", describe=None),
               dict(same=claims_json(("remove", "dog")), different=claims_json(("color", "cup")), count="\\boxed{2}",
                    describe=claims_json(("remove", "cat"), ("remove", "dog"), ("color", "cup", "to blue")))]
    kinds = [([DOG], "easy"), ([CUP], "medium"), ([DOG], "hard"), ([DOG, CUP], None), ([], None)]
    return [make_item(gold, difficulty=difficulty, cluster=f"image-{k % 6}", **answers[k % len(answers)])
            for k, (gold, difficulty) in enumerate(kinds * 7)]


def rounded(bounds: dict) -> dict:
    return {name: None if value is None else [round(value[0], 6), round(value[1], 6)]
            for name, value in sorted(bounds.items())}


def test_the_summary_is_that_of_the_items_dicts() -> None:
    items = mixed_items()
    scored = [item for item in items if item["num_differences"]]
    result = summarize(items, 200, 3)
    components = [item_components(item) for item in items]
    clusters = [item["cluster"] for item in items]
    scored_components = [item_components(item) for item in scored]
    assert result["ci95"] == rounded(stats.bootstrap_ci(scored_components, [item["cluster"] for item in scored],
                                                        headline_from_sums, 200, 3))
    assert result["headline"]["ci95"] == rounded(stats.bootstrap_ci(components, clusters, headline_beside_from_sums,
                                                                     200, 3))
    ds = 0.0
    for item in scored:
        ds += item["scores"]["DS"]
    assert result["overall"]["DS"] == round(ds / len(scored), 6)
    assert result["counts"]["n_items"] == len(items) and result["control"]["n_items"] == len(items) - len(scored)
    assert result["by_difficulty"]["multi"]["n_items"] == sum(item["group"] == "multi" for item in items)


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_a_summary_folded_in_chunks_is_that_of_all_items(size: int) -> None:
    items = mixed_items()
    summary = Summary()
    for start in range(0, len(items), size):
        summary.extend(Summary.of(items[start:start + size]))
    assert summary.result(100, 0) == summarize(items, 100, 0)


def test_a_pair_is_held_in_tens_of_bytes() -> None:
    base = mixed_items()
    n = 20_000

    def copies() -> Iterator[dict]:
        for k, item in zip(range(n), itertools.cycle(base)):
            yield {**item, "cluster": f"image-{k % 1000}"}

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        summary = Summary.of(copies())
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert summary.result(0, 0)["counts"]["n_items"] == n
    assert held / n < 80, f"{held / n:.0f} bytes a pair"
