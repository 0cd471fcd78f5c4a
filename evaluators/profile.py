"""A model's faithfulness profile: every family's headline metrics in one shape (`mmfaith evaluate`).

Contract
--------
profile.json (format "mmfaith-profile/1"; docs/evaluate.md is the reference, `mmfaith view` reads it)::

    {"format", "model", "suite": {"name", "version"},
     "families": {FAMILY: {"status": "ok"|"failed", "error", "dataset", "score_dir" (relative to the
                  profile), "headline": [{"key", "name", "value", "ci95", "better", "na_reason"}],
                  "parse_rate", "prior": {key: value}, "oracle": {key: value},
                  "no_image": null | {"score_dir", "report", "values": {key: value},
                                      "multimodal_gain": {"n_items", KEY: {"difference", "ci95"}} | null,
                                      "na_reason"}}},
     "provenance": {...}}

A headline row is one metric the family declares (`Family.metrics`), read from the score's
metrics.json: its `overall` block (a dotted key from that block of metrics.json), or, for a family
scored per mode (CRM's `by_mode`), once per mode with the key "MODE.KEY". `value` null carries a
`na_reason`; `ci95` null where the score gives no interval. `prior` and `oracle` are the same keys'
values for the family's prior and ceiling models on the same dataset (`evaluate.reference_ends`).
`no_image` is null unless the suite asked the family's no-image pass: then `values` are the headline
values of the model asked without the images, and `multimodal_gain` the family's own report's gain
(with - without, paired per item, 95% bootstrap CI clustered by source image; its keys are the
family's BLIND_KEYS), null with `na_reason` when no item is shared.

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


def _read_metrics(score_dir: Path) -> dict[str, Any]:
    return json.loads((score_dir / "metrics.json").read_text(encoding="utf-8"))


def family_entry(name: str, dataset: str, out: Path, score_dir: Path, ends: Mapping[str, Any],
                 no_image: dict[str, Any] | None = None) -> dict[str, Any]:
    """One family's profile entry from its score dir, its reference ends ({"prior", "oracle"}: {key: value}) and its
    no-image pass (`no_image_block`; None when the suite did not ask it)."""
    metrics = _read_metrics(score_dir)
    return {"status": "ok", "error": None, "dataset": dataset, "score_dir": str(score_dir.relative_to(out)),
            "headline": headline(families.get(name), metrics),
            "parse_rate": (metrics.get("answers") or {}).get("parse_rate"),
            "prior": dict(ends["prior"]), "oracle": dict(ends["oracle"]), "no_image": no_image}


def no_image_block(name: str, out: Path, score_dir: Path, gain_dir: Path,
                   comparison: Mapping[str, Any]) -> dict[str, Any]:
    """A profile entry's `no_image` (module docstring) from the no-image score dir and the family's comparison of
    the with- and the no-image score dirs (its `multimodal_gain`, evaluators/blind_gain.py)."""
    gains = comparison.get("multimodal_gain") or []
    overall = gains[0]["overall"] if gains else None
    return {"score_dir": str(score_dir.relative_to(out)), "report": str((gain_dir / "report.md").relative_to(out)),
            "values": values(headline(families.get(name), _read_metrics(score_dir))),
            "multimodal_gain": overall,
            "na_reason": None if overall else "no scored item is shared by the with- and the no-image runs"}


def failed_entry(name: str, error: str) -> dict[str, Any]:
    """The entry of a family that failed: its error, no values."""
    return {"status": "failed", "error": error, "dataset": None, "score_dir": None, "headline": [], "parse_rate": None,
            "prior": {}, "oracle": {}, "no_image": None}


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
        blind = entry.get("no_image")
        rows = [[row["name"], fmt(row["value"], row["na_reason"] or ""),
                 "n/a (no interval in the score)" if row["ci95"] is None else
                 f"[{row['ci95'][0]:.3f}, {row['ci95'][1]:.3f}]",
                 _BETTER.get(row["better"], row["better"]),
                 *([fmt(blind["values"].get(row["key"]), "undefined without the images")] if blind else []),
                 fmt(entry["prior"].get(row["key"]), "undefined for the prior"),
                 fmt(entry["oracle"].get(row["key"]), "undefined for the oracle")] for row in entry["headline"]]
        parse = "n/a" if entry["parse_rate"] is None else f"{entry['parse_rate']:.1%}"
        lines += md_table(["metric", "value", "95% CI", "better", *(["no image"] if blind else []), "prior", "oracle"],
                          rows)
        lines += ["", f"Parse rate {parse}; dataset `{entry['dataset']}`; full score: `{entry['score_dir']}/`.", ""]
        if blind:
            lines += no_image_lines(blind)
    return "\n".join(lines)


def no_image_lines(blind: Mapping[str, Any]) -> list[str]:
    """profile.md's lines on a family's no-image pass: what a blind model scores, and the multimodal gain."""
    from mmfaith.evaluators.blind_gain import UNDEFINED
    from mmfaith.evaluators.report_tables import fmt_ci, md_table

    lines = ["What a blind model scores: `no image` is this model asked the same probes without the images "
             f"(`{blind['score_dir']}/`), `prior` the family's blind guess.", ""]
    gain = blind["multimodal_gain"]
    if gain is None:
        return lines + [f"Multimodal gain: n/a ({blind['na_reason']}).", ""]
    keys = sorted(key for key in gain if key != "n_items")  # as profile.json holds them (sorted), resumed or not
    lines += [f"Multimodal gain (with the images - without, MMStar; {gain['n_items']} items paired, 95% bootstrap "
              f"CI clustered by source image; [{blind['report']}]({blind['report']})):", ""]
    lines += md_table(["metric", "gain (95% CI)"],
                      [[key, fmt_ci(gain[key]["difference"], gain[key]["ci95"], UNDEFINED)] for key in keys])
    return lines + [""]
