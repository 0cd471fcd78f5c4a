"""`mmfaith report PROFILE_DIR...`: several models' profiles compared across families.

Contract
--------
`compare_profiles(profile_dirs, out, n_bootstrap, seed)` reads each folder's profile.json
(`evaluators/profile.py`) and writes into `out`:

- OUT/FAMILY/: for each family that two or more profiles scored, the family's own comparison of
  their score dirs (`mmfaith report SCORE_DIR...` with every pair compared: paired bootstrap
  intervals of the differences and McNemar p-values where items are shared);
- comparison.json: ``{"format": "mmfaith-comparison/1", "models", "profiles", "suite",
  "families": {FAMILY: {"leaderboard": {MODEL: {key: value}}, "ci95": {MODEL: {key: [lo, hi]}},
  "report": "FAMILY/report.md" | null, "pairs": n, "na_reason": {MODEL: why},
  "no_image": {MODEL: {key: value}}, "multimodal_gain": {MODEL: {"n_items", KEY: {"difference", "ci95"}} |
  null}}}, "overall": {MODEL: {FAMILY: share | null, "overall": share | null}}}`` (`no_image` and
  `multimodal_gain` hold the models whose profile has the family's no-image pass);
- report.md: the overall table, then one leaderboard per family (metric rows, model columns,
  value with its 95% interval, better direction; a model's no-image values as a column of their
  own, "MODEL (no image)", and its multimodal gain below), each with a link to the family's pairwise
  report;
- overall.png: the overall share per family and model.

The overall share of a model in a family is the mean, over the family's headline metrics with a
better direction whose prior and oracle values differ, of (value - prior) / (oracle - prior): 0 at
the floor, 1 at the ceiling (outside [0, 1] beyond either). A metric undefined for the model, the
prior or the oracle is left out; a family with none left is n/a with the reason. It is a summary for
reading the leaderboards, not a metric of any paper.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmfaith import families
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.profile import FORMAT as PROFILE_FORMAT
from mmfaith.jsonl import write_text_atomic

FORMAT = "mmfaith-comparison/1"


def is_profile_dir(path: Path) -> bool:
    """Whether `path` is a folder `mmfaith evaluate` wrote (it holds profile.json)."""
    return (Path(path) / "profile.json").is_file()


def load_profile(path: Path) -> dict[str, Any]:
    """profile.json of a profile dir; a one-line error for one of another format."""
    file = Path(path) / "profile.json"
    try:
        profile = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MmfaithError(f"{file}: not a readable profile ({exc}); write one with `mmfaith evaluate`.") from None
    if not isinstance(profile, dict) or profile.get("format") != PROFILE_FORMAT:
        raise MmfaithError(f"{file}: not a {PROFILE_FORMAT} profile; write one with `mmfaith evaluate`.")
    return profile


def _labels(dirs: Sequence[Path], profiles: Sequence[Mapping[str, Any]]) -> list[str]:
    models = [str(p["model"]) for p in profiles]
    return [m if models.count(m) == 1 else f"{m} ({d.name})" for m, d in zip(models, dirs)]


def overall_share(entry: Mapping[str, Any]) -> tuple[float | None, str]:
    """A family entry's share of the way from prior to oracle (module docstring), and why when n/a."""
    if entry.get("status") != "ok":
        return None, "the family failed"
    shares = []
    for row in entry["headline"]:
        floor, ceiling = entry["prior"].get(row["key"]), entry["oracle"].get(row["key"])
        if row["better"] in ("higher", "lower") and None not in (row["value"], floor, ceiling) and floor != ceiling:
            shares.append((row["value"] - floor) / (ceiling - floor))
    if not shares:
        return None, "no metric with a direction on which the prior and the oracle differ"
    return sum(shares) / len(shares), ""


def compare_profiles(profile_dirs: Sequence[Path], out: Path, n_bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Write the cross-family comparison (module docstring); return comparison.json's content."""
    dirs = [Path(d) for d in profile_dirs]
    profiles = [load_profile(d) for d in dirs]
    labels = _labels(dirs, profiles)
    order = [family.name for family in families.all_families()]
    names = sorted({name for p in profiles for name in p["families"]}, key=order.index)
    out.mkdir(parents=True, exist_ok=True)
    comparison: dict[str, Any] = {"format": FORMAT, "models": labels, "profiles": [str(d) for d in dirs],
                                  "suite": profiles[0]["suite"], "families": {}, "overall": {}}
    for name in names:
        comparison["families"][name] = _family(name, dirs, profiles, labels, out, n_bootstrap, seed)
    for label, profile in zip(labels, profiles):
        row: dict[str, Any] = {}
        for name in names:
            row[name] = overall_share(profile["families"].get(name, {"status": "absent"}))[0]
        shown = [v for v in row.values() if v is not None]
        row["overall"] = sum(shown) / len(shown) if shown else None
        comparison["overall"][label] = row
    write_text_atomic(out / "comparison.json", json.dumps(comparison, indent=2, sort_keys=True) + "\n")
    write_text_atomic(out / "report.md", _markdown(comparison, profiles, labels))
    _overall_figure(comparison, names, out)
    return comparison


def _family(name: str, dirs: Sequence[Path], profiles: Sequence[Mapping[str, Any]], labels: Sequence[str],
            out: Path, n_bootstrap: int, seed: int) -> dict[str, Any]:
    scored = [(label, d, p["families"][name]) for label, d, p in zip(labels, dirs, profiles)
              if p["families"].get(name, {}).get("status") == "ok"]
    absent = {label: ("the family failed: " + str(p["families"][name]["error"]) if name in p["families"]
                      else "not in this profile") for label, p in zip(labels, profiles) if label not in
              {s[0] for s in scored}}
    block: dict[str, Any] = {
        "leaderboard": {label: {row["key"]: row["value"] for row in entry["headline"]} for label, _, entry in scored},
        "ci95": {label: {row["key"]: row["ci95"] for row in entry["headline"]} for label, _, entry in scored},
        "na_reason": absent, "report": None, "pairs": 0, "pairs_reason": None,
        "no_image": {label: entry["no_image"]["values"] for label, _, entry in scored if entry.get("no_image")},
        "multimodal_gain": {label: entry["no_image"]["multimodal_gain"] for label, _, entry in scored
                            if entry.get("no_image")}}
    if len(scored) < 2:
        block["pairs_reason"] = "fewer than two profiles scored this family"
        return block
    compare = families.get(name).part("compare", "comparison report")
    try:
        compare([d / entry["score_dir"] for _, d, entry in scored], out / name, n_bootstrap, seed, True)
    except MmfaithError as exc:
        block["pairs_reason"] = str(exc)
        return block
    block["report"] = f"{name}/report.md"
    block["pairs"] = len(scored) * (len(scored) - 1) // 2  # every pair: the family's compare with all_pairs
    return block


def _markdown(comparison: Mapping[str, Any], profiles: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    from mmfaith.evaluators.report_tables import fmt, fmt_ci, md_table

    suite = comparison["suite"]
    names = list(comparison["families"])
    lines = [f"# Faithfulness profiles compared: {', '.join(labels)}", "",
             f"Suite {suite['name']} version {suite['version']}; profiles: "
             + ", ".join(f"`{p}`" for p in comparison["profiles"]) + ".", "",
             "## Overall", "",
             "Each cell: the share of the way from the family's prior (0) to its oracle (1), averaged over the "
             "headline metrics that have a better direction and on which the two differ (a reading aid, not a "
             "paper's metric). Per-metric values follow per family.", ""]
    rows = []
    for label, profile in zip(labels, profiles):
        cells = []
        for name in names:
            share, why = overall_share(profile["families"].get(name, {"status": "absent"}))
            cells.append(fmt(share, why or "not in this profile" if share is None else ""))
        cells.append(fmt(comparison["overall"][label]["overall"], "no family scored"))
        rows.append([label, *cells])
    lines += md_table(["model", *names, "overall"], rows) + [""]
    for name in names:
        block = comparison["families"][name]
        family = families.get(name)
        lines += [f"## {family.title} (`{name}`)", ""]
        scored = list(block["leaderboard"])
        if scored:
            first = next(p for label, p in zip(labels, profiles) if label == scored[0])["families"][name]["headline"]
            blind = list(block.get("no_image", {}))
            table = [[row["name"], row["better"],
                      *(fmt_ci(block["leaderboard"][label].get(row["key"]), block["ci95"][label].get(row["key"]),
                               "undefined for this model") for label in scored),
                      *(fmt(block["no_image"][label].get(row["key"]), "undefined without the images")
                        for label in blind)] for row in first]
            lines += md_table(["metric", "better", *scored, *(f"{label} (no image)" for label in blind)], table)
            lines += [""] + _gain_lines(block.get("multimodal_gain", {}))
        for label, why in block["na_reason"].items():
            lines.append(f"- {label}: n/a ({why})")
        if block["report"]:
            lines.append(f"Every pair of models compared (paired bootstrap intervals, McNemar p-values): "
                         f"[{block['report']}]({block['report']}) ({block['pairs']} pairs).")
        else:
            lines.append(f"Pairs: n/a ({block['pairs_reason']}).")
        lines.append("")
    return "\n".join(lines)


def _gain_lines(gains: Mapping[str, Any]) -> list[str]:
    """One line per model with a no-image pass: its multimodal gain per key with the 95% interval."""
    from mmfaith.evaluators.blind_gain import UNDEFINED
    from mmfaith.evaluators.report_tables import fmt, fmt_ci

    lines = []
    for label, gain in gains.items():
        if gain is None:
            lines.append(f"- {label}: multimodal gain {fmt(None, 'no scored item shared by the two runs')}.")
            continue
        cells = [f"{key} {fmt_ci(value['difference'], value['ci95'], UNDEFINED)}" for key, value in gain.items()
                 if key != "n_items"]
        lines.append(f"- {label}: multimodal gain (with the images - without, {gain['n_items']} items, 95% CI): "
                     + "; ".join(cells) + ".")
    return lines + ([""] if lines else [])


def _overall_figure(comparison: Mapping[str, Any], names: Sequence[str], out: Path) -> None:
    from mmfaith.evaluators.plots import ValueAxis, bar_chart, save_png

    categories = [*names, "overall"]
    series = {label: [row.get(c) for c in categories] for label, row in comparison["overall"].items()}
    reasons = {label: {c: "no metric to place between prior and oracle" for c, v in zip(categories, values)
                       if v is None} for label, values in series.items()}
    figure = bar_chart("share of the way from prior (0) to oracle (1)", categories, series,
                       ValueAxis("share", 0.0, 1.0), xlabel="family", reasons=reasons, legend_title="model")
    save_png(figure, out / "overall.png")
