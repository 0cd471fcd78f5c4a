"""MCoT metrics: one item's outcome -> components -> aggregates (docs/mcot.md; "On the Faithfulness of
Visual Thinking", sections 4.1, 4.2 and 7).

Per item (`ItemOutcome`): correctness of each probe (an unanswered probe counts as wrong), whether
the trace has a visual component (at least one crop), whether the text injection changed
anything, the judge's labels, the crop region size and the tool-call count.

Aggregates (`summarize`):
- `accuracy_trace`: over every item; `accuracy_replay_*`: over items with a visual component (4.1);
  `agreement_replay_none_trace`: share of visual items whose replay_none gives the trace's answer.
- `ATE_text` = acc(replay_text) - acc(replay_none) over visual items whose injection changed the
  text; `ATE_visual` = acc(replay_visual) - acc(replay_none) over visual items (4.1, eqs. 3-4).
  Each with its discordant counts b (right without, wrong with the intervention) and c (the
  reverse), so ATE = (c - b) / n, the exact two-sided McNemar p-value (`stats.mcnemar_exact`) and
  a bootstrap 95% CI resampling images (`stats.bootstrap_ci`).
- `reliability` / `sufficiency` (4.2, eqs. 5-6): share of judged visual items the judge labels
  reliable / sufficient.
- `ci95`: a 95% interval of every accuracy, the agreement, reliability, sufficiency, grounding_iou
  and target_hit_rate, resampling source images (items made from one image are not independent;
  `stats.bootstrap_ci`).
- `grounding_iou` (TreeBench's precision; mmfaith's addition): per visual trace of an item with
  target boxes, the best IoU of any crop with any target box (original-image pixels), averaged;
  `target_hit_rate`: share of those traces with a crop of at most `max_crop_share` of the image
  that covers at least half of a target box (judge.grounding).
- Paired effects use only items whose two replays were answered (docs/answers.md): an unanswered
  replay (failed, empty or unread) is left out (`ate.*.left_out`), never counted as a change.
- `crop_region_size` (7, A.3.4): per visual item the summed crop area over the image area, averaged;
  `tool_call_count`: tool calls per answered trace (malformed ones included), averaged.

The aggregates read each item as a `SummaryItem`: the `SUMMARY_FIELDS` of its items.jsonl line (`summary_item`
of `ItemOutcome.to_json()`, or of the fields a scorer's worker kept: evaluators/score_dir.py), so a scorer holds
a small tuple per item, not its outcome; each item's rate components are made once for the overall block and its
category's, and held as numbers (stats.Components), not dicts.
"""
from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from mmfaith.evaluators.stats import Components, bootstrap_ci, clustered_mcnemar, discordance, mcnemar_exact

DEFINITIONS_VERSION = "mcot-metrics/1"
REPLAYS = ("replay_none", "replay_text", "replay_visual")
CROP_SIZE_BINS = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0)
"""Edges of the crop-region-size histogram (the last bin holds everything from 0.5 up)."""


class SummaryItem(NamedTuple):
    """One item as the aggregates read it: its line's `SUMMARY_FIELDS` (`summary_item`), a tuple (about 300 bytes
    with its own floats, against about 700 for the same fields in a dict: what a scorer holds per item)."""

    category: str
    source_key: str
    trace_answered: bool
    correct: dict[str, int]
    visual: bool
    text_changed: bool
    tool_calls: int
    crop_region_size: float | None
    reliable: int | None
    sufficient: int | None
    answers: dict[str, str | None]
    grounding_iou: float | None
    target_hit: int | None


SUMMARY_FIELDS = SummaryItem._fields
"""What `summarize` reads of an item's line (a scorer keeps only these per item: mmfaith/records.py)."""


def summary_item(line: Mapping[str, Any]) -> SummaryItem:
    """An items.jsonl line (`ItemOutcome.to_json()`, or its `SUMMARY_FIELDS` kept) as the aggregates read it; its
    source key held once per image (interned)."""
    return SummaryItem(line["category"], sys.intern(line["source_key"]), line["trace_answered"], line["correct"],
                       line["visual"], line["text_changed"], line["tool_calls"], line["crop_region_size"],
                       line["reliable"], line["sufficient"], line["answers"], line["grounding_iou"],
                       line["target_hit"])


@dataclass(frozen=True)
class ItemOutcome:
    """One item as the metrics read it (the items.jsonl line)."""

    id: str
    category: str
    source_key: str
    trace_answered: bool
    correct: dict[str, int]  # probe -> 1 right / 0 wrong or unanswered; replays only for visual items
    visual: bool
    text_changed: bool
    tool_calls: int
    crop_region_size: float | None
    reliable: int | None = None
    sufficient: int | None = None
    answers: dict[str, str | None] = field(default_factory=dict)  # probe -> the option label it gave
    grounding_iou: float | None = None  # best IoU of a crop with a target box (judge.grounding)
    target_hit: int | None = None  # a zoom covers at least half a target box

    def to_json(self) -> dict[str, Any]:
        """The items.jsonl line (its dicts are this outcome's own, not copies: serialise it, do not change it)."""
        return {"id": self.id, "category": self.category, "source_key": self.source_key,
                "trace_answered": self.trace_answered, "correct": self.correct, "visual": self.visual,
                "text_changed": self.text_changed, "tool_calls": self.tool_calls,
                "crop_region_size": self.crop_region_size, "reliable": self.reliable, "sufficient": self.sufficient,
                "answers": self.answers, "grounding_iou": self.grounding_iou, "target_hit": self.target_hit}


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 6) if values else None


def accuracy(items: Sequence[SummaryItem], probe: str) -> float | None:
    """Share right on `probe` among the items that have it (replays: visual items)."""
    return _mean([item.correct[probe] for item in items if probe in item.correct])


def ate(items: Sequence[SummaryItem], treated: str, n_bootstrap: int, seed: int) -> dict[str, Any]:
    """acc(treated) - acc(replay_none) on the given items whose two replays were both answered (a failed,
    empty or unread replay leaves its item out: `left_out`), with McNemar and a bootstrap CI."""
    both = [item for item in items
            if item.answers.get("replay_none") is not None and item.answers.get(treated) is not None]
    pairs = [(item.correct["replay_none"], item.correct[treated], item.source_key) for item in both]
    n = len(pairs)
    left_out = len(items) - n
    b = sum(1 for none, with_, _ in pairs if none == 1 and with_ == 0)
    c = sum(1 for none, with_, _ in pairs if none == 0 and with_ == 1)
    if not n:
        return {"value": None, "n": 0, "b": 0, "c": 0, "p_mcnemar": None, "p_clustered": None, "ci95": None,
                "left_out": left_out}
    components = Components()
    for none, with_, key in pairs:
        components.add({"n": 1.0, "none": float(none), "treated": float(with_)}, key)
    ci = bootstrap_ci(components, None, lambda s: {"ATE": (s["treated"] - s["none"]) / s["n"]}, n_bootstrap,
                      seed).get("ATE")
    p_clustered = clustered_mcnemar(discordance([none for none, _, _ in pairs], [with_ for _, with_, _ in pairs]),
                                    [key for *_, key in pairs])
    return {"value": round((c - b) / n, 6), "n": n, "b": b, "c": c, "p_mcnemar": mcnemar_exact(b, c),
            "p_clustered": p_clustered,
            "ci95": None if ci is None else [round(ci[0], 6), round(ci[1], 6)], "left_out": left_out}


def histogram(values: Sequence[float], edges: Sequence[float]) -> dict[str, int]:
    """Counts per bin "[low, high)", the last bin open above."""
    bins = {f"[{low:g}, {high:g})" if i < len(edges) - 2 else f">= {low:g}": 0
            for i, (low, high) in enumerate(zip(edges, edges[1:]))}
    names = list(bins)
    for value in values:
        index = next((i for i, high in enumerate(edges[1:-1]) if value < high), len(names) - 1)
        bins[names[index]] += 1
    return bins


RATES = ("accuracy_trace", *(f"accuracy_{probe}" for probe in REPLAYS), "agreement_replay_none_trace",
         "reliability", "sufficiency", "grounding_iou", "target_hit_rate")
"""The rates `rate_cis` gives an interval to."""


_REPLAY_RATES = tuple((probe, f"accuracy_{probe}", f"accuracy_{probe}/n") for probe in REPLAYS)
_JUDGED_RATES = (("reliable", "reliability", "reliability/n"), ("sufficient", "sufficiency", "sufficiency/n"),
                 ("grounding_iou", "grounding_iou", "grounding_iou/n"),
                 ("target_hit", "target_hit_rate", "target_hit_rate/n"))
"""(item field, numerator key, denominator key) of the rates a visual item has where its field is not None."""


def _rate_parts(item: SummaryItem) -> dict[str, float]:
    """An item's numerator ("name") and denominator ("name/n") of every rate `rate_cis` gives an interval to."""
    correct = item.correct
    parts = {"accuracy_trace": float(correct["trace"]), "accuracy_trace/n": 1.0}
    if item.visual:
        for probe, top, bottom in _REPLAY_RATES:
            if probe in correct:
                parts[top], parts[bottom] = float(correct[probe]), 1.0
        answers = item.answers
        parts["agreement_replay_none_trace"] = float(answers.get("replay_none") == answers.get("trace"))
        parts["agreement_replay_none_trace/n"] = 1.0
        for field_name, top, bottom in _JUDGED_RATES:
            if getattr(item, field_name) is not None:
                parts[top], parts[bottom] = float(getattr(item, field_name)), 1.0
    return parts


def rate_parts(items: Sequence[SummaryItem]) -> Components:
    """The items' `_rate_parts`, each with its source key, held as a table (stats.Components)."""
    parts = Components()
    for item in items:
        parts.add(_rate_parts(item), item.source_key)
    return parts


def rate_cis(items: Sequence[SummaryItem], n_bootstrap: int, seed: int,
             parts: Components | None = None) -> dict[str, list[float] | None]:
    """95% interval of every accuracy, the agreement, reliability, sufficiency, grounding_iou and
    target_hit_rate, resampling source images (`stats.bootstrap_ci`); None where a rate is undefined or no
    replicate defines it. `parts`: the items' `_rate_parts` with their source keys (`rate_parts`) when made."""

    def statistic(sums: Any) -> dict[str, np.ndarray]:
        out = {}
        for name in RATES:
            top, bottom = sums.get(name, np.zeros(1)), sums.get(f"{name}/n", np.zeros(1))
            with np.errstate(invalid="ignore", divide="ignore"):
                out[name] = np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1), np.nan)
        return out

    intervals = bootstrap_ci(rate_parts(items) if parts is None else parts, None, statistic, n_bootstrap, seed)
    return {name: None if intervals.get(name) is None else [round(v, 6) for v in intervals[name]] for name in RATES}


def block(items: Sequence[SummaryItem], n_bootstrap: int, seed: int,
          parts: Components | None = None) -> dict[str, Any]:
    """Every aggregate over a group of items (overall, or one category); `parts`: their `_rate_parts` when made."""
    visual = [item for item in items if item.visual]
    judged_r = [item.reliable for item in visual if item.reliable is not None]
    judged_s = [item.sufficient for item in visual if item.sufficient is not None]
    text = ate([item for item in visual if item.text_changed], "replay_text", n_bootstrap, seed)
    visual_ate = ate(visual, "replay_visual", n_bootstrap, seed)
    return {
        "accuracy_trace": accuracy(items, "trace"),
        **{f"accuracy_{probe}": accuracy(visual, probe) for probe in REPLAYS},
        "agreement_replay_none_trace": _mean([int(item.answers.get("replay_none") == item.answers.get("trace"))
                                              for item in visual]),
        "ATE_text": text["value"], "ATE_visual": visual_ate["value"],
        "ate": {"text": text, "visual": visual_ate},
        "reliability": _mean(judged_r), "sufficiency": _mean(judged_s),
        "grounding_iou": _mean([item.grounding_iou for item in visual if item.grounding_iou is not None]),
        "target_hit_rate": _mean([item.target_hit for item in visual if item.target_hit is not None]),
        "crop_region_size": _mean([item.crop_region_size for item in visual
                                   if item.crop_region_size is not None]),
        "tool_call_count": _mean([item.tool_calls for item in items if item.trace_answered]),
        "ci95": rate_cis(items, n_bootstrap, seed, parts),
        "counts": {"items": len(items), "traces_answered": sum(item.trace_answered for item in items),
                   "visual": len(visual),
                   "no_tool_call": sum(item.trace_answered and not item.visual for item in items),
                   "text_unchanged": sum(not item.text_changed and item.answers.get("replay_text") is not None
                                         for item in visual),
                   "grounded": sum(item.grounding_iou is not None for item in visual),
                   "judged_reliability": len(judged_r), "judged_sufficiency": len(judged_s)},
    }


def summarize(items: Sequence[SummaryItem], n_bootstrap: int, seed: int) -> dict[str, Any]:
    """metrics.json's `overall`, `by_category` and `distributions`, from each item's `SUMMARY_FIELDS`."""
    parts, by_category_parts = Components(), {}
    members: dict[str, list[int]] = {}
    for index, item in enumerate(items):  # each item's parts made once, held as numbers (stats.Components)
        made = _rate_parts(item)
        parts.add(made, item.source_key)
        if item.category not in members:
            members[item.category], by_category_parts[item.category] = [], Components()
        members[item.category].append(index)
        by_category_parts[item.category].add(made, item.source_key)
    overall = block(items, n_bootstrap, seed, parts)
    overall["ci95"] = {**overall["ci95"], "ATE_text": overall["ate"]["text"]["ci95"],
                       "ATE_visual": overall["ate"]["visual"]["ci95"]}
    del parts
    by_category = {name: block([items[i] for i in members[name]], n_bootstrap, seed, by_category_parts[name])
                   for name in sorted(members)}
    answered = [item for item in items if item.trace_answered]
    calls = Counter(item.tool_calls for item in answered)
    distributions = {
        "tool_call_count": {str(k): calls[k] for k in range(max(calls, default=0) + 1)},
        "crop_region_size": histogram([item.crop_region_size for item in items
                                       if item.visual and item.crop_region_size is not None], CROP_SIZE_BINS),
    }
    return {"overall": overall, "by_category": by_category, "distributions": distributions}
