"""`mmfaith report`'s score dirs read line by line into numbers per item (evaluators/scored_items.py, issue 34):
the same pairs and the same paired bootstrap as the lists of dicts the comparisons held before, and memory that
does not grow with a line's size nor by more than numbers per item."""
from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path

import numpy as np

from mmfaith.evaluators.score_dir import load_score_dir, publish_scores
from mmfaith.evaluators.scored_items import ItemFold, fold_items, match, number, one_per_key, paired, read_scored
from mmfaith.evaluators.stats import Components, paired_bootstrap, take


def _components(line: dict) -> dict[str, float]:
    """Two layouts, as a family's items have (scored pairs and controls)."""
    if line["control"]:
        return {"alarm": float(line["right"])}
    return {"n": 1.0, "right": float(line["right"]), f"right:{line['kind']}": float(line["right"])}


FOLD = ItemFold(key=lambda line: line["id"], components=_components, cluster=lambda line: line["image"],
                labels={"template": lambda line: line["kind"]},
                numbers={"scored": lambda line: float(not line["control"]), "right": lambda line: number(line["right"])})


def _statistic(sums: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    like = next(iter(sums.values()))
    n = sums.get("n", np.zeros_like(like))
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"accuracy": sums.get("right", np.zeros_like(like)) / n,
                "alarms": sums.get("alarm", np.zeros_like(like)) / np.maximum(n, 1.0)}


def _lines(n: int, seed: int, note: str = "") -> list[dict]:
    rng = random.Random(seed)
    return [{"id": f"item-{k}", "image": f"image-{rng.randrange(max(n // 4, 1))}", "kind": rng.choice("abc"),
             "control": rng.random() < 0.2, "right": rng.random() < 0.6, "note": note} for k in range(n)]


def _pairs_by_dict(a: list[dict], b: list[dict], use_a=lambda x: True, use_b=lambda y: True) -> list[tuple[dict, dict]]:
    """The pairs as the comparisons made them before: a table of b by key, a's lines in order."""
    by_key = {y["id"]: y for y in b if use_b(y)}
    return [(x, by_key[x["id"]]) for x in a if use_a(x) and x["id"] in by_key]


def test_take_holds_the_chosen_items_as_components_of_their_dicts() -> None:
    lines = _lines(3000, 1)
    table = Components.of([_components(line) for line in lines], [line["image"] for line in lines])
    chosen = random.Random(2).sample(range(3000), 1700)
    taken = take(table, chosen)
    expected = Components.of([_components(lines[k]) for k in chosen], [lines[k]["image"] for k in chosen])
    assert (taken.layouts, taken.clusters, taken.n) == (expected.layouts, expected.clusters, expected.n)
    others = [f"other-{k % 7}" for k in range(1700)]
    assert take(table, chosen, others).layouts == Components.of([_components(lines[k]) for k in chosen], others).layouts


def test_pairs_and_their_bootstrap_are_those_of_the_lines_in_lists() -> None:
    """Aligned score dirs (one dataset's order), and a second one shuffled, thinned and with repeated ids: the same
    pairs as a table by id gives, and the same paired bootstrap as the pairs' components in lists."""
    a = _lines(2000, 3)
    b = [{**line, "right": not line["right"]} if k % 3 == 0 else line for k, line in enumerate(_lines(2000, 3))]
    rng = random.Random(4)
    shuffled = [line for line in b if rng.random() < 0.9]
    rng.shuffle(shuffled)
    shuffled += [{**line, "right": True} for line in shuffled[:25]]  # repeated ids: the last line counts
    for second in (b, shuffled):
        for use in (None, "scored"):
            pos_a, pos_b = match(fold_items(a, FOLD), fold_items(second, FOLD), use_b=use)
            expected = _pairs_by_dict(a, second, use_b=(lambda y: True) if use is None else lambda y: not y["control"])
            assert [(a[p]["id"], second[q]["right"]) for p, q in zip(pos_a.tolist(), pos_b.tolist())] == \
                [(x["id"], y["right"]) for x, y in expected]
            got = paired(fold_items(a, FOLD), fold_items(second, FOLD), pos_a, pos_b, _statistic, 200, 7)
            clusters = [x["image"] for x, _ in expected]
            assert got == paired_bootstrap([_components(x) for x, _ in expected],
                                           [_components(y) for _, y in expected], clusters, _statistic, 200, 7)
    kept = one_per_key(fold_items(shuffled, FOLD))
    by_id = {line["id"]: line for line in shuffled}
    assert kept.keys == list(by_id) and kept.numbers["right"].tolist() == [float(y["right"]) for y in by_id.values()]


def test_score_dirs_are_read_side_by_side_line_by_line_holding_numbers_per_item(tmp_path: Path) -> None:
    """Each score dir folded on its own process equals the fold of its lines; the lines, 20 KB each, are read one at
    a time (the read's peak is far below the file), and what is held per item stays small whatever the lines."""
    for name, n in (("a", 50), ("b", 70)):
        (tmp_path / name).mkdir()
        publish_scores(tmp_path / name, _lines(n, 5, "x" * 20_000), {"provenance": {"model": name}},
                       lambda metrics, folder: None)
    read = read_scored([tmp_path / "b", tmp_path / "a"], FOLD)
    for (metrics, items), name in zip(read, ("b", "a")):
        expected_metrics, lines = load_score_dir(tmp_path / name)
        folded = fold_items(lines, FOLD)
        assert metrics == expected_metrics and items.keys == folded.keys and items.labels == folded.labels
        assert items.table.layouts == folded.table.layouts and items.numbers["right"].tolist() == \
            folded.numbers["right"].tolist()
    file_size = (tmp_path / "b" / "items.jsonl").stat().st_size
    tracemalloc.start()
    read_scored([tmp_path / "b"], FOLD)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < file_size / 10, (peak, file_size)

    def held(n: int) -> int:
        lines = (json.loads(json.dumps(line)) for line in _lines(n, 6, "y" * 2_000))
        tracemalloc.start()
        items = fold_items(lines, FOLD)
        size, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(items.keys) == n
        return size

    assert (held(40_000) - held(20_000)) / 20_000 < 250  # bytes per item: the key, components and numbers
