"""A model's faithfulness profile: every family's headline metrics in one shape (`mmfaith evaluate`).

Contract
--------
profile.json (format "mmfaith-profile/1"; docs/evaluate.md is the reference, `mmfaith view` reads it)::

    {"format", "model", "suite": {"name", "version"},
     "families": {FAMILY: {"status": "ok"|"failed", "error", "dataset", "score_dir" (relative to the
                  profile), "headline": [{"key", "name", "value", "ci95", "better", "na_reason"}],
                  "parse_rate", "prior": {key: value}, "oracle": {key: value}}},
     "provenance": {...}}

A headline row is one metric the family declares (`Family.metrics`), read from the score's
metrics.json: its `overall` block (a dotted key from that block of metrics.json), or, for a family
scored per mode (CRM's `by_mode`), once per mode with the key "MODE.KEY". `value` null carries a
`na_reason`; `ci95` null where the score gives no interval. `prior` and `oracle` are the same keys'
values for the family's prior and ceiling models on the same dataset (`evaluate.reference_ends`).

`write_profile(out, model, suite, entries, provenance)` writes profile.json, profile.md (one
table per family: metric, value, 95% CI, better, prior, oracle) and profile.png (every headline
metric on its range, the model's value between the prior's and the oracle's); returns the profile.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mmfaith import families
from mmfaith.jsonl import write_text_atomic

FORMAT = "mmfaith-profile/1"


def headline(family: families.Family, metrics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The headline rows of one score's metrics.json (module docstring)."""
    if "overall" in metrics:
        blocks = [("", metrics["overall"], metrics.get("ci95") or metrics["overall"].get("ci95") or {})]
    else:
        blocks = [(f"{mode}.", block.get("metrics", block), block.get("ci95") or {})
                  for mode, block in sorted(metrics.get("by_mode", {}).items())]
    rows = []
    for prefix, block, intervals in blocks:
        for metric in family.metrics:
            value, interval, where = _lookup(metrics, block, intervals, metric.key)
            if where is None:
                continue
            rows.append({"key": prefix + metric.key, "name": metric.name + (f" ({prefix[:-1]})" if prefix else ""),
                         "value": value, "ci95": interval, "better": metric.better,
                         "na_reason": None if value is not None else _why(metric, where)})
    return rows


def _lookup(metrics: Mapping[str, Any], block: Mapping[str, Any], intervals: Mapping[str, Any],
            key: str) -> tuple[float | None, list[float] | None, Mapping[str, Any] | None]:
    """(value, ci95, the block holding it) of a metric key; block None when the score does not report it."""
    if "." in key:
        head, _, tail = key.partition(".")
        holder = metrics.get(head)
        if not isinstance(holder, Mapping) or tail not in holder:
            return None, None, None
        return holder[tail], (holder.get("ci95") or {}).get(tail), holder
    if key not in block or not isinstance(block[key], (int, float, type(None))):
        return None, None, None
    return block[key], intervals.get(key), block


def _why(metric: families.MetricInfo, block: Mapping[str, Any]) -> str:
    """Why a metric is null in a score: the block's counts and the family's declared `undefined_when`."""
    from mmfaith.evaluators.report_tables import why_undefined

    return why_undefined(metric.key, block, {metric.key: metric.undefined_when} if metric.undefined_when else {})


def values(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """{key: value} of headline rows (what a profile keeps of the prior and the oracle)."""
    return {row["key"]: row["value"] for row in rows}


def family_entry(name: str, dataset: str, out: Path, score_dir: Path, ends: Mapping[str, Any]) -> dict[str, Any]:
    """One family's profile entry from its score dir and its reference ends ({"prior", "oracle"}: {key: value})."""
    metrics = json.loads((score_dir / "metrics.json").read_text(encoding="utf-8"))
    return {"status": "ok", "error": None, "dataset": dataset, "score_dir": str(score_dir.relative_to(out)),
            "headline": headline(families.get(name), metrics),
            "parse_rate": (metrics.get("answers") or {}).get("parse_rate"),
            "prior": dict(ends["prior"]), "oracle": dict(ends["oracle"])}


def failed_entry(name: str, error: str) -> dict[str, Any]:
    """The entry of a family that failed: its error, no values."""
    return {"status": "failed", "error": error, "dataset": None, "score_dir": None, "headline": [], "parse_rate": None,
            "prior": {}, "oracle": {}}


def write_profile(out: Path, model: str, suite: Any, entries: Mapping[str, Mapping[str, Any]],
                  provenance: Mapping[str, Any]) -> dict[str, Any]:
    """profile.json, profile.md and profile.png into `out` (module docstring); returns the profile."""
    profile = {"format": FORMAT, "model": model, "suite": suite.identity(), "families": dict(entries),
               "provenance": dict(provenance)}
    write_text_atomic(out / "profile.json", json.dumps(profile, indent=2, sort_keys=True) + "\n")
    write_text_atomic(out / "profile.md", profile_markdown(profile))
    from mmfaith.evaluators.profile_plot import profile_figure
    from mmfaith.evaluators.plots import save_png

    save_png(profile_figure(profile), out / "profile.png")
    return profile


_BETTER = {"higher": "higher", "lower": "lower", "neither": "neither"}


def profile_markdown(profile: Mapping[str, Any]) -> str:
    """profile.md: one table per family in one layout (module docstring)."""
    from mmfaith.evaluators.report_tables import fmt, md_table

    suite = profile["suite"]
    lines = [f"# Faithfulness profile: {profile['model']}", "",
             f"Suite {suite['name']} version {suite['version']}. Each family's full score (report.md, plots, "
             "per-item results) is in its score dir. `prior` is what the family's prior earns (it reads neither "
             "image nor gold: the floor), `oracle` what its good-end reference model earns (the ceiling); "
             "profile.png places each value between the two.", ""]
    for name, entry in profile["families"].items():
        family = families.get(name)
        lines += [f"## {family.title} (`{name}`)", ""]
        if entry["status"] != "ok":
            lines += [f"failed: {entry['error']}", ""]
            continue
        rows = [[row["name"], fmt(row["value"], row["na_reason"] or ""),
                 "n/a (no interval in the score)" if row["ci95"] is None else
                 f"[{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}]",
                 _BETTER.get(row["better"], row["better"]),
                 fmt(entry["prior"].get(row["key"]), "undefined for the prior"),
                 fmt(entry["oracle"].get(row["key"]), "undefined for the oracle")] for row in entry["headline"]]
        parse = "n/a" if entry["parse_rate"] is None else f"{entry['parse_rate']:.1%}"
        lines += md_table(["metric", "value", "95% CI", "better", "prior", "oracle"], rows)
        lines += ["", f"Parse rate {parse}; dataset `{entry['dataset']}`; full score: `{entry['score_dir']}/`.", ""]
    return "\n".join(lines)
