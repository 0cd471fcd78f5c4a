"""VFaith metrics: one item's scores, and their aggregates with clustered bootstrap intervals.

Definitions (VFaith sections 3.2.2 and 4.1; choices the paper leaves open are fixed here and in
docs/vfaith.md#metrics):

Per pair, a_o and a_e are the parsed answers to the `original` and `edited` probes (parse.py),
gt_o = answer_original and gt_e = answer_edited. An unparsed or missing answer is wrong, and
counted apart (`counts.unparsed`, `counts.missing`).
- raw_accuracy = share of pairs with a_o = gt_o; edit_accuracy = share with a_e = gt_e;
  delta = edit_accuracy - raw_accuracy. Each overall and `by_category` (RWS, REA, PFK, CRE, TIF;
  a category with no pair is absent).
- repeat_ratio (section 3.2.2): among pairs whose edited answer is parsed and wrong (a_e != gt_e),
  the share with a_e = gt_o: the model repeats the answer of the unedited question.
  repeat_ratio_own: among those of the same pairs whose original answer is parsed too, the share
  with a_e = a_o. Unparsed answers stay out of both (counted in `counts.repeat_left_out`). Null
  when the denominator is empty.
- perception_accuracy: share of perception items whose parsed set of labels equals `answers`
  exactly (unparsed or missing: wrong).
- circular (MMBench's CircularEval, evaluators/circular.py; only for a run made with `--circular`):
  per probe, over the multiple-choice pairs whose rotations were asked, `accuracy` (first order:
  the original option order) beside `accuracy_circular` (right in every rotation of the options).
- mcnemar_raw_vs_edit: the exact two-sided McNemar test (evaluators/stats.py) on paired
  correctness: b = pairs right on the original and wrong on the edited image, c = the reverse;
  only pairs with both answers read count (the others: `n_left_out`; docs/answers.md).

Every aggregate is a ratio of sums of per-item components (`item_components`), so a bootstrap
replicate (stats.bootstrap_ci, clusters = source images) recomputes it exactly as the point
estimate does.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from mmfaith.evaluators import stats
from mmfaith.evaluators.coverage import STATUSES

DEFINITIONS_VERSION = "vfaith-metrics/1"
CATEGORIES = ("RWS", "REA", "PFK", "CRE", "TIF")
HEADLINE = ("raw_accuracy", "edit_accuracy", "delta", "repeat_ratio", "repeat_ratio_own", "perception_accuracy")
_DECIMALS = 6


def pair_scores(record: Mapping[str, Any], a_o: str | None, a_e: str | None, statuses: Mapping[str, str],
                cluster: str) -> dict[str, Any]:
    """One pair's line of items.jsonl: the parsed answers, their statuses and what they count for."""
    gt_o, gt_e = record["answer_original"], record["answer_edited"]
    wrong_edit = a_e is not None and a_e != gt_e
    return {
        "id": record["id"], "kind": "pair", "category": record["category"], "cluster": cluster,
        "answer_original": gt_o, "answer_edited": gt_e, "a_original": a_o, "a_edited": a_e,
        "status_original": statuses["original"], "status_edited": statuses["edited"],
        "raw_correct": a_o == gt_o, "edit_correct": a_e == gt_e,
        "repeat": (a_e == gt_o) if wrong_edit else None,
        "repeat_own": (a_e == a_o) if wrong_edit and a_o is not None else None,
    }


def circular_fields(rights: Mapping[str, bool | None]) -> dict[str, bool | None]:
    """The items.jsonl fields of a pair's CircularEval results: `circular_original`, `circular_edited`."""
    return {f"circular_{probe}": right for probe, right in rights.items()}


def perception_scores(record: Mapping[str, Any], chosen: frozenset[str] | None, status: str,
                      cluster: str) -> dict[str, Any]:
    """One perception item's line of items.jsonl."""
    answers = sorted(record["answers"])
    return {"id": record["id"], "kind": "perception", "pair_id": record["pair_id"], "cluster": cluster,
            "answers": answers, "chosen": None if chosen is None else sorted(chosen), "status": status,
            "correct": chosen is not None and sorted(chosen) == answers}


def item_components(item: Mapping[str, Any]) -> dict[str, float]:
    """The sums an item adds to (module docstring)."""
    if item["kind"] == "perception":
        return {"n_perception": 1.0, "perception": float(item["correct"])}
    raw, edit, cat = float(item["raw_correct"]), float(item["edit_correct"]), item["category"]
    paired = item["a_original"] is not None and item["a_edited"] is not None
    parts = {"n_pairs": 1.0, "raw": raw, "edit": edit, f"n_pairs:{cat}": 1.0, f"raw:{cat}": raw, f"edit:{cat}": edit,
             "b": float(raw and not edit and paired), "c": float(edit and not raw and paired)}
    if item["repeat"] is not None:
        parts.update(repeat_den=1.0, repeat_num=float(item["repeat"]))
    if item["repeat_own"] is not None:
        parts.update(own_den=1.0, own_num=float(item["repeat_own"]))
    return parts


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _get(sums: Mapping[str, np.ndarray], key: str, like: np.ndarray) -> np.ndarray:
    return sums.get(key, np.zeros_like(like))


def headline_from_sums(sums: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every aggregate (overall and `{category}.{metric}`) from summed components; NaN where undefined."""
    like = next(iter(sums.values()))
    n = _get(sums, "n_pairs", like)
    raw, edit = _ratio(_get(sums, "raw", like), n), _ratio(_get(sums, "edit", like), n)
    result = {"raw_accuracy": raw, "edit_accuracy": edit, "delta": edit - raw,
              "repeat_ratio": _ratio(_get(sums, "repeat_num", like), _get(sums, "repeat_den", like)),
              "repeat_ratio_own": _ratio(_get(sums, "own_num", like), _get(sums, "own_den", like)),
              "perception_accuracy": _ratio(_get(sums, "perception", like), _get(sums, "n_perception", like))}
    for cat in CATEGORIES:
        n_cat = _get(sums, f"n_pairs:{cat}", like)
        raw_cat, edit_cat = _ratio(_get(sums, f"raw:{cat}", like), n_cat), _ratio(_get(sums, f"edit:{cat}", like), n_cat)
        result.update({f"{cat}.raw_accuracy": raw_cat, f"{cat}.edit_accuracy": edit_cat,
                       f"{cat}.delta": edit_cat - raw_cat})
    return result


def _scalar(value: np.ndarray) -> float | None:
    number = float(np.asarray(value).reshape(-1)[0])
    return round(number, _DECIMALS) if np.isfinite(number) else None


class Summary:
    """metrics.json's summary folded item by item (`add`, items.jsonl's order), so a scorer holds each item's few
    components (stats.Components) and counts, not the items: `result` is what `summarize` gives of the same items."""

    def __init__(self) -> None:
        self.components = stats.Components()
        self.n_pairs = self.n_perception = self.n_left_out = 0
        self.by_category = dict.fromkeys(CATEGORIES, 0)
        self.statuses = {kind: dict.fromkeys(STATUSES, 0) for kind in ("original", "edited", "perception")}
        self.wrong_edited = self.wrong_edited_own = self.unparsed_edited = 0
        self.circular = {probe: [0, 0, 0] for probe in ("original", "edited")}
        """probe -> [pairs asked in every rotation, right first-order, right in every rotation]."""

    def add(self, item: Mapping[str, Any]) -> None:
        """One item of items.jsonl (`pair_scores` and `circular_fields`, or `perception_scores`)."""
        self.components.add(item_components(item), item["cluster"])
        if item["kind"] == "perception":
            self.n_perception += 1
            self.statuses["perception"][item["status"]] += 1
            return
        self.n_pairs += 1
        if item["category"] in self.by_category:
            self.by_category[item["category"]] += 1
        for probe in ("original", "edited"):
            self.statuses[probe][item[f"status_{probe}"]] += 1
        self.n_left_out += item["a_original"] is None or item["a_edited"] is None
        self.unparsed_edited += item["a_edited"] is None
        if item["a_edited"] is not None and not item["edit_correct"]:
            self.wrong_edited += 1
            self.wrong_edited_own += item["a_original"] is not None
        for probe, first in (("original", "raw_correct"), ("edited", "edit_correct")):
            right = item.get(f"circular_{probe}")
            if right is not None:
                counts = self.circular[probe]
                counts[0] += 1
                counts[1] += item[first]
                counts[2] += right

    def circular_block(self) -> dict[str, Any] | None:
        """metrics.json's `circular`: per probe, first-order and circular accuracy over the pairs asked in every
        rotation; None when no pair was (a run without --circular)."""
        block = {probe: {"n_items": asked, "accuracy": round(first / asked, _DECIMALS),
                         "accuracy_circular": round(circular / asked, _DECIMALS)}
                 for probe, (asked, first, circular) in self.circular.items() if asked}
        return block or None

    def result(self, n_bootstrap: int, seed: int) -> dict[str, Any]:
        """metrics.json's `overall`, `by_category`, `ci`, `circular`, `mcnemar_raw_vs_edit` and `counts`."""
        components = self.components
        keys = sorted(components.keys() | {"n_pairs", "n_perception"})
        sums = {key: np.array([components.item_sum(key)]) for key in keys}
        point = headline_from_sums(sums)
        intervals = stats.bootstrap_ci(components, None, headline_from_sums, n_bootstrap, seed)

        def ci(key: str) -> list[float] | None:
            bounds = intervals.get(key)
            if bounds is None or not np.isfinite(point[key][0]):
                return None
            return [round(bounds[0], _DECIMALS), round(bounds[1], _DECIMALS)]

        by_category: dict[str, Any] = {}
        for cat, n_cat in self.by_category.items():
            if n_cat:
                by_category[cat] = {"n_items": n_cat, **{m: _scalar(point[f"{cat}.{m}"]) for m in
                                                           ("raw_accuracy", "edit_accuracy", "delta")},
                                    "ci95": {m: ci(f"{cat}.{m}") for m in ("raw_accuracy", "edit_accuracy", "delta")}}
        b, c = int(sums["b"][0]) if "b" in sums else 0, int(sums["c"][0]) if "c" in sums else 0
        differences = (components.column("b") - components.column("c")).astype(np.int64).tolist()
        return {
            "overall": {key: _scalar(point[key]) for key in HEADLINE},
            "by_category": by_category,
            "ci95": {key: ci(key) for key in HEADLINE},
            "circular": self.circular_block(),
            "mcnemar_raw_vs_edit": {"p_value": stats.mcnemar_exact(b, c), "b_raw_right_edit_wrong": b,
                                    "p_clustered": stats.clustered_mcnemar(differences, components.cluster_names()),
                                    "c_raw_wrong_edit_right": c, "n_pairs": self.n_pairs,
                                    "n_left_out": self.n_left_out, "method": "exact binomial, two-sided"},
            "counts": {
                "n_pairs": self.n_pairs, "n_perception": self.n_perception,
                "answers": self.statuses,
                "repeat_denominator": self.wrong_edited,
                "repeat_own_denominator": self.wrong_edited_own,
                "repeat_left_out_unparsed_edited": self.unparsed_edited,
            },
        }


def summarize(items: Iterable[Mapping[str, Any]], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """metrics.json's summary of `items` (module docstring; `Summary` folded over them)."""
    summary = Summary()
    for item in items:
        summary.add(item)
    return summary.result(n_bootstrap, seed)
