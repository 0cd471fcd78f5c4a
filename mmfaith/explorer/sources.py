"""The page data of a score dir, a report and profiles, and the functions that write their explorers.

- `write_score_explorer(score_dir, dataset, predictions)`: the score's items (its family's `explore`
  part over the dataset, items.jsonl and predictions), one model, the metrics table with each number's
  filter. Without a dataset the page written before is kept and only rewritten (`view` of an old dir).
- `write_report_explorer(report_dir, score_dirs)`: the items of several score dirs of one dataset merged
  by id, one column per model (the labels `mmfaith report` uses), from the pages their score dirs hold.
- `write_profiles_explorer(folder, profile_dirs)`: the per-family leaderboard of `evaluate` profiles
  (profile.json, format mmfaith-profile/1), each family's row linking to its score dir's explorer.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mmfaith import families
from mmfaith.errors import MmfaithError
from mmfaith.explorer.page import read_page_data, write_page
from mmfaith.families import Family

PROFILE_FORMAT = "mmfaith-profile/1"


def _lookup(metrics: Mapping[str, Any], key: str) -> Any:
    """A metric's value in a metrics block; a dotted key names another block ("control.false_alarm_rate")."""
    value: Any = metrics
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _blocks(metrics: Mapping[str, Any]) -> list[tuple[dict[str, str], Mapping[str, Any], Mapping[str, Any]]]:
    """(facet filter, values, ci95) per block of metrics.json: the overall block, or one per mode (CRM)."""
    if "overall" in metrics:
        return [({}, {**metrics, **metrics["overall"]}, metrics.get("ci95") or {})]
    return [({"mode": mode}, block.get("metrics", block), block.get("ci95") or {})
            for mode, block in sorted(metrics.get("by_mode", {}).items())]


def metric_rows(family: Family, metrics_by_model: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The metrics table: one row per declared metric (and per mode where the family scores by mode), each model's
    value and 95% CI, and the filter that selects the items behind the number."""
    rows = []
    first = next(iter(metrics_by_model.values()))
    for scope, _, _ in _blocks(first):
        for metric in family.metrics:
            values, cis, reasons = {}, {}, {}
            for label, metrics in metrics_by_model.items():
                block = next((b for s, b, _ in _blocks(metrics) if s == scope), {})
                ci = next((c for s, _, c in _blocks(metrics) if s == scope), {})
                values[label] = _lookup(block, metric.key)
                cis[label] = _lookup(ci, metric.key) if "." not in metric.key else None
                reasons[label] = block.get(f"{metric.key}_na")
            if all(value is None and label_reason is None for value, label_reason in
                   zip(values.values(), reasons.values())) and not _declared(first, scope, metric.key):
                continue
            rows.append({"key": metric.key, "name": metric.name, "meaning": metric.meaning, "better": metric.better,
                         "doc": metric.doc, "scope": scope, "values": values, "ci95": cis, "na_reason": reasons})
    return rows


def _declared(metrics: Mapping[str, Any], scope: dict[str, str], key: str) -> bool:
    """Whether a metrics.json block holds `key` (as a number or null: a null still gets its row, read "n/a")."""
    block = next((b for s, b, _ in _blocks(metrics) if s == scope), {})
    head, _, rest = key.partition(".")
    return head in block and (not rest or isinstance(block[head], Mapping) and rest in block[head])


def _source_images(items: Sequence[dict[str, Any]]) -> dict[str, Path]:
    """{sha256: file} of every item image, the file path dropped from the page data."""
    found = {}
    for item in items:
        for shown in item["images"]:
            path = shown.pop("path")
            if shown["sha256"] not in found:
                found[shown["sha256"]] = Path(path)
    return found


def _model_label(metrics: Mapping[str, Any]) -> str:
    provenance = metrics["provenance"]
    return provenance["model"] + (" (no image)" if provenance.get("no_image") else "")


def write_score_explorer(score_dir: Path, dataset: Path | str | None, predictions: Path | None, workers: int = 4,
                         progress: bool = True) -> Path:
    """The explorer of one score dir (module docstring); its index.html."""
    from mmfaith.evaluators.score_dir import load_score_dir

    family = families.get(families.family_of_score_dir(score_dir))
    metrics, scored = load_score_dir(score_dir)
    label = _model_label(metrics)
    if dataset is None:
        data = read_page_data(score_dir)
        if data is None:
            raise MmfaithError(f"{score_dir}: its explorer needs the dataset the score read; pass --dataset "
                               "BUILD_DIR|RELEASE|ORG/NAME.")
        return write_page(score_dir, data, {}, workers, progress)
    explore = family.part("explore", "explorer")
    views = explore(family.parts().open_dataset(dataset), scored, predictions)
    items = [{**{k: v for k, v in view.items() if k != "model"}, "models": {label: view["model"]}} for view in views]
    images = _source_images(items)
    data = {"kind": "score", "family": family.name, "family_title": family.title, "title": f"{family.title}: {label}",
            "models": [label], "metrics": metric_rows(family, {label: metrics}), "items": items,
            "provenance": metrics["provenance"]}
    return write_page(score_dir, data, images, workers, progress)


def write_report_explorer(report_dir: Path, score_dirs: Sequence[Path], labels: Sequence[str], workers: int = 4,
                          progress: bool = True) -> Path:
    """The explorer of a comparison (module docstring): items in the first score's order, one column per model."""
    from mmfaith.evaluators.score_dir import load_metrics

    pages, metrics_by_model = [], {}
    for score_dir, label in zip(score_dirs, labels):
        data = read_page_data(score_dir)
        if data is None:
            raise MmfaithError(f"{score_dir}: has no explorer to compare; write it with `mmfaith view {score_dir} "
                               "--dataset SOURCE`, then report again.")
        pages.append((score_dir, data))
        metrics_by_model[label] = load_metrics(score_dir)
    merged: dict[str, dict[str, Any]] = {}
    images: dict[str, Path] = {}
    for (score_dir, data), label in zip(pages, labels):
        for item in data["items"]:
            kept = merged.setdefault(item["id"], {**item, "models": {}})
            kept["models"][label] = next(iter(item["models"].values()))
            for shown in item["images"]:
                if shown["sha256"] not in images:  # a path made once per image, not once per item showing it
                    images[shown["sha256"]] = score_dir / "explorer" / "f" / f"{shown['sha256']}.jpg"
    family = families.get(pages[0][1]["family"])
    data = {"kind": "report", "family": family.name, "family_title": family.title,
            "title": f"{family.title}: {' vs '.join(labels)}", "models": list(labels),
            "score_dirs": [os.path.relpath(path, report_dir) for path in score_dirs],
            "metrics": metric_rows(family, metrics_by_model), "items": list(merged.values())}
    return write_page(report_dir, data, images, workers, progress)


def read_profile(profile_dir: Path) -> dict[str, Any]:
    """profile.json of an `evaluate` folder, checked for its format (the contract shared with `evaluate`)."""
    path = profile_dir / "profile.json"
    try:
        profile = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MmfaithError(f"{path}: cannot read ({exc.strerror}); pass a folder written by `mmfaith evaluate`.") from exc
    except ValueError as exc:
        raise MmfaithError(f"{path}: not JSON ({exc}).") from exc
    if not isinstance(profile, dict) or profile.get("format") != PROFILE_FORMAT:
        raise MmfaithError(f"{path}: not a profile (format {PROFILE_FORMAT} expected).")
    return profile


def write_profiles_explorer(folder: Path, profile_dirs: Sequence[Path], workers: int = 4, progress: bool = True) -> Path:
    """The per-family leaderboard of one or more profiles (module docstring); a family's score dir that has no
    explorer yet gets one from the dataset its profile names."""
    boards: dict[str, list[dict[str, Any]]] = {}
    models = []
    for profile_dir in profile_dirs:
        profile = read_profile(profile_dir)
        models.append(profile["model"])
        for name, entry in sorted(profile.get("families", {}).items()):
            link = None
            score_dir = profile_dir / entry["score_dir"] if entry.get("score_dir") else None
            if entry.get("status") == "ok" and score_dir is not None and (score_dir / "metrics.json").is_file():
                if not (score_dir / "index.html").is_file():
                    write_score_explorer(score_dir, entry.get("dataset"), None, workers, progress)
                link = os.path.relpath(score_dir / "index.html", folder)
            boards.setdefault(name, []).append({
                "model": profile["model"], "status": entry.get("status"), "error": entry.get("error"),
                "dataset": entry.get("dataset"), "headline": entry.get("headline") or [],
                "parse_rate": entry.get("parse_rate"), "link": link})
    leaderboard = [{"family": name, "title": families.get(name).title if name in {f.name for f in families.all_families()} else name,
                    "rows": rows} for name, rows in sorted(boards.items())]
    data = {"kind": "profile", "title": f"profiles: {', '.join(models)}", "models": models, "leaderboard": leaderboard,
            "metrics": [], "items": []}
    return write_page(folder, data, {}, workers, progress)
