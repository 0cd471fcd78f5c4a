"""`mmfaith report --pool`: one model's score dirs over replicates, and the spread of its headline metrics.

Contract (`pool_scores(score_dirs, out, family)`)
-------------------------------------------------
- Replicates are score dirs of one family and one model that differ only in what chance decides:
  builds of one source made with different build seeds, or the repeats of one `run --repeats N`
  scored with `score --repeat R`. Refused: score dirs of several models, fewer than two, or the
  same score twice (same dataset, predictions and repeat). That the builds differ only in their
  seed is the caller's to ensure: each replicate's dataset (id, revision) and repeat are recorded.
- Headline metrics are the family's declared metrics (`Family.metrics`) wherever metrics.json
  holds them: a dotted key ("control.false_alarm_rate") at that path, a plain key in the
  `overall` block, in each `by_mode` block (CRM, per mode) and in `noise_floor` (CRM).
- Per metric: `stats.spread` over the replicates where it is defined (mean, sample sd, min, max,
  n). Writes pooled.json (sorted keys) and pooled.md; the same score dirs give the same bytes.
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from mmfaith import families
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.report_tables import fmt, md_table
from mmfaith.evaluators.score_dir import load_metrics
from mmfaith.evaluators.stats import spread
from mmfaith.jsonl import write_atomic
from mmfaith.outdir import prepare_out_dir

POOLED_BLOCKS = ("overall", "by_mode", "noise_floor")
"""metrics.json blocks whose plain family metrics are pooled (nested blocks included)."""


def headline_values(metrics: Mapping[str, Any], keys: Sequence[str]) -> dict[str, float | None]:
    """{path: value} of every headline metric metrics.json holds (module docstring)."""
    plain = {key for key in keys if "." not in key}
    found: dict[str, float | None] = {}
    for path, value in _leaves(metrics, ()):
        dotted = ".".join(path)
        if dotted in keys or (path[0] in POOLED_BLOCKS and path[-1] in plain):
            found[dotted] = value
    return found


def _leaves(value: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], float | None]]:
    if isinstance(value, Mapping):
        for key in sorted(value):
            if key not in ("ci95", "ci", "counts", "provenance") and not key.startswith("n_"):  # n_: counts
                yield from _leaves(value[key], (*path, key))
    elif value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        if path:
            yield path, None if value is None else float(value)


def pool_scores(score_dirs: Sequence[Path], out: Path, family: str) -> dict[str, Any]:
    """Pool replicate score dirs of one model (module docstring); write pooled.json and pooled.md; return the first."""
    if len(score_dirs) < 2:
        raise MmfaithError("report --pool needs two or more score dirs of one model (builds made with other seeds, "
                           "or the repeats of one run).")
    loaded = [load_metrics(path) for path in score_dirs]
    models = sorted({m["provenance"]["model"] for m in loaded})
    if len(models) > 1:
        raise MmfaithError(f"report --pool: the score dirs are of several models ({', '.join(models)}); pool the "
                           "replicates of one model.")
    replicates = [{"score_dir": str(path), "dataset": m["provenance"]["dataset"],
                   "predictions_sha256": m["provenance"]["predictions_sha256"],
                   "repeat": m["provenance"].get("repeat", 0)} for path, m in zip(score_dirs, loaded)]
    seen: dict[str, str] = {}
    for replicate in replicates:
        key = json.dumps({k: v for k, v in replicate.items() if k != "score_dir"}, sort_keys=True)
        if key in seen:
            raise MmfaithError(f"report --pool: {replicate['score_dir']} is the same score as {seen[key]} (same "
                               "dataset, predictions and repeat); pool replicates that differ.")
        seen[key] = replicate["score_dir"]
    keys = [metric.key for metric in families.get(family).metrics]
    values = [headline_values(m, keys) for m in loaded]
    paths = sorted({path for found in values for path in found})
    pooled = {"family": family, "model": models[0], "replicates": replicates,
              "metrics": {path: spread([found.get(path) for found in values]) for path in paths}}
    out = prepare_out_dir(out, "report")
    write_atomic(out / "pooled.json", (json.dumps(pooled, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    write_atomic(out / "pooled.md", _markdown(pooled).encode("utf-8"))
    return pooled


def _markdown(pooled: Mapping[str, Any]) -> str:
    rows = [[path, fmt(s["mean"]), fmt(s["sd"], "one replicate"), "n/a" if s["min"] is None else
             f"{s['min']:.3f} - {s['max']:.3f}", str(s["n"])] for path, s in pooled["metrics"].items()]
    datasets = sorted({f"{r['dataset']['id']} ({r['dataset']['revision']})" for r in pooled["replicates"]})
    lines = [f"# {pooled['family']}: {pooled['model']} over {len(pooled['replicates'])} replicates", "",
             f"Datasets: {', '.join(datasets)}; repeats: "
             f"{', '.join(str(r['repeat']) for r in pooled['replicates'])}. The spread is what build seeds or sampling "
             "alone move a metric by: a difference between models smaller than it is not evidence.", "",
             *md_table(["metric", "mean", "sd", "min - max", "replicates"], rows), ""]
    return "\n".join(lines)
