"""Markdown pieces every family's report.md shares: tables, values, the key to the metrics shown,
and the reason an undefined value is undefined.

Metric descriptions come from the family's declaration (`mmfaith.families.Family.metrics`), never
from a table of the report's own, so every family's report explains its metrics the same way.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mmfaith.families import Family, MetricInfo

NA = "n/a"


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GitHub-flavoured markdown table, one string per line."""
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def fmt(value: float | None, why: str = "") -> str:
    """A value to 3 decimals; None as "n/a", with the reason in parentheses when one is given."""
    if value is None:
        return f"{NA} ({why})" if why else NA
    return f"{value:.3f}"


def fmt_ci(value: float | None, interval: Sequence[float] | None, why: str = "") -> str:
    """A value with its 95% interval ("0.500 [0.250, 0.750]"), or `fmt`'s n/a."""
    return fmt(value, why) + ("" if value is None or interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}]")


def fmt_p(value: float | None, why: str = "") -> str:
    """A p-value in the one format every report uses: 4 significant digits ("0.0004883", "3.052e-05", "1");
    None as `fmt`'s n/a."""
    return fmt(None, why) if value is None else f"{value:.4g}"


def metric_value(metrics: Mapping[str, Any], key: str, block: Mapping[str, Any] | None = None) -> float | None:
    """A metric's value: a plain key from `block` (default metrics.json's `overall`), a dotted key
    ("control.false_alarm_rate") from that block of metrics.json."""
    if "." in key:
        head, _, tail = key.partition(".")
        return metrics[head][tail]
    return (metrics["overall"] if block is None else block)[key]


def metric_block(metrics: Mapping[str, Any], key: str, block: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """The metrics.json block a metric's value and counts come from (see `metric_value`)."""
    if "." in key:
        return metrics[key.partition(".")[0]]
    return metrics["overall"] if block is None else block


def why_undefined(key: str, block: Mapping[str, Any], reasons: Mapping[str, str], counts: bool = True) -> str:
    """Why `key` is null in a metrics.json block, from the block's own counts.

    A block with `n_items` 0 has nothing to average ("no items"). When every item was left out
    (`n_left_out`, a per-metric mapping or, for a block of one metric, a number) the family's reason
    for leaving an item out is given with the count ("no parsed answers: 4 of 4 items left out").
    Otherwise the family's reason alone, or "undefined". `counts` False leaves the count out
    (a plot's footnote, where one reason covers several groups).
    """
    n_items = block.get("n_items")
    if n_items == 0:
        return "no items"
    left_out = block.get("n_left_out")
    left = left_out.get(key.rpartition(".")[2]) if isinstance(left_out, Mapping) else left_out
    reason = reasons.get(key, "")
    if isinstance(left, int) and n_items and left == n_items:
        return f"{reason or 'every item left out'}" + (f": {left} of {n_items} items left out" if counts else "")
    return reason or "undefined"


def _range(metric: MetricInfo) -> str:
    if metric.range is None:
        return "0 and up" if metric.kind == "count" else "unbounded"
    low, high = metric.range
    return f"[{low:g}, {high:g}]"


_BETTER = {"higher": "higher", "lower": "lower", "neither": "neither (descriptive)"}


def metrics_key(family: Family, keys: Sequence[str]) -> list[str]:
    """The report's opening table: for each metric shown (declared by the family), its name,
    one-line meaning, which direction is better, its range and where its full definition is.

    Definitions are footnoted ([1], [2], ...) once per distinct doc section. Keys the family does
    not declare are skipped (a report only explains what the family describes).
    """
    declared = [metric for metric in (family.metric(key) for key in keys) if metric is not None]
    docs = list(dict.fromkeys(metric.doc for metric in declared))
    rows = [[f"`{metric.key}`", metric.name, metric.meaning, _BETTER.get(metric.better, metric.better),
             _range(metric), f"[{docs.index(metric.doc) + 1}]"] for metric in declared]
    return ["## Metrics shown", "",
            *md_table(["key", "metric", "meaning", "better", "range", "definition"], rows), "",
            *(f"[{k + 1}] `{doc}`" + ("  " if k + 1 < len(docs) else "") for k, doc in enumerate(docs)), "",
            f"{NA}: undefined for this model (the reason follows in parentheses); plots mark it \"{NA}\", "
            "not as a zero bar."]
