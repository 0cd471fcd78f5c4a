"""Reading lmms-eval's `--log_samples` output back as `importer.LoggedSample`s.

Contract (`read_lmms_eval_logs(path) -> HarnessLog`)
---------------------------------------------------
- `path` is lmms-eval's `--output_path` folder (searched recursively), one model's folder in it,
  or one samples file. The samples files of mmfaith tasks are `*_samples_mmfaith_*.jsonl`; each
  line is one document: its `target` is the row key (`{"id", "probes"}`; lmms-eval's doc_hash
  is not unique), its response `resps` (the raw text, logged only when it differs from
  `filtered_resps`) else `filtered_resps`.
- An independent row's response is the text; a dependent row's is the rounds record
  (runtime.rounds_record) with every round. lmms-eval's failure text
  (`[LMMS_EVAL_REQUEST_FAILED ...]`) becomes an error, never an answer.
- Token counts (`token_counts[0]`: input_tokens, output_tokens) are kept for independent rows;
  lmms-eval logs none for agentic rounds, nor any finish reason or latency: those are left null
  and listed in `unknown_fields`.
- The model comes from the run's `*_results.json` beside the samples (`config.model_args`:
  model_version=, model=, pretrained=), when present, with the run's task hashes. lmms-eval's
  package version is not in its logs (its `lmms_eval_version` is the git branch@commit of the
  directory it ran in; kept as logged): the version is left null and said so. A `*_results.json`
  that is not a JSON object is a one-line error naming it; a samples file whose last line is torn
  (lmms-eval killed mid-write) is named in a warning, the line left out.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.importer import HarnessLog, LoggedRound, LoggedSample
from mmfaith.evaluators.harness.runtime import failure_of, read_rounds_record
from mmfaith.jsonl import read_json_object, read_jsonl

SAMPLES_GLOB = "*_samples_mmfaith_*.jsonl"
MODEL_ARG_NAMES = ("model_version", "model", "pretrained")
UNKNOWN_FIELDS = ("latency_s", "finish_reason", "reasoning", "prompt_tokens and completion_tokens of dependent rounds",
                  "harness_version (lmms-eval logs its working directory's git commit instead)")


def read_lmms_eval_logs(path: Path) -> HarnessLog:
    """Every mmfaith sample under `path` (module docstring)."""
    files = [path] if path.is_file() else sorted(path.rglob(SAMPLES_GLOB))
    if not files:
        raise MmfaithError(f"{path}: no lmms-eval samples of an mmfaith task ({SAMPLES_GLOB}); run lmms-eval with "
                           "--log_samples and pass its --output_path.")
    samples = [_sample(line, f"{file}:{number}") for file in files for number, line in read_jsonl(file)]
    for file in files:
        with open(file, "rb") as handle:
            handle.seek(max(0, file.stat().st_size - 1))
            if handle.read(1) not in (b"\n", b""):
                print(f"mmfaith: warning: {file}: the last line is torn (no newline at the end: lmms-eval was stopped "
                      "mid-write); that sample is left out.", file=sys.stderr)
    results = sorted({result for file in files for result in file.parent.glob("*_results.json")})
    model, configs = None, []
    for result in results:
        document = read_json_object(result, "")
        config = document.get("config") or {}
        if not isinstance(config, dict):
            raise MmfaithError(f"{result}: 'config' is a {type(config).__name__}, not an object; is it lmms-eval's "
                               "results file?")
        configs.append({"file": str(result), "model": config.get("model"), "model_args": config.get("model_args"),
                        "date": document.get("date"), "lmms_eval_version": document.get("lmms_eval_version"),
                        "task_hashes": document.get("task_hashes")})
        model = model or _model_of(config.get("model_args"))
    return HarnessLog("lmms-eval", None, model, samples, files, UNKNOWN_FIELDS, {"lmms_eval_runs": configs})


def _model_of(model_args: Any) -> str | None:
    if not isinstance(model_args, str):
        return None
    pairs = dict(part.split("=", 1) for part in model_args.split(",") if "=" in part)
    return next((pairs[name] for name in MODEL_ARG_NAMES if pairs.get(name)), None)


def _sample(line: dict[str, Any], where: str) -> LoggedSample:
    try:
        key = json.loads(line["target"])
        item_id, probes = key["id"], tuple(key["probes"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MmfaithError(f"{where}: no mmfaith row key in `target` ({exc}); these are not samples of a task "
                           "`mmfaith export lmms-eval` wrote.") from exc
    text = _first_text(line.get("resps", line.get("filtered_resps")))
    if len(probes) == 1:
        failure = failure_of(text)
        counts = (line.get("token_counts") or [None])[0] or {}
        figures = {"prompt_tokens": counts.get("input_tokens"), "completion_tokens": counts.get("output_tokens")}
        return LoggedSample(item_id, probes, (LoggedRound(probes[0], None if failure else text, failure,
                                                          line.get("input"), figures),), where)
    rounds = read_rounds_record(text)
    if rounds is None:  # the harness stopped the chain itself (e.g. its own max-steps fallback)
        failure = failure_of(text) or f"not a rounds record: {(text or '')[:200]}"
        return LoggedSample(item_id, probes, (LoggedRound(probes[0], None, failure),), where)
    return LoggedSample(item_id, probes, tuple(
        LoggedRound(entry["probe"], entry.get("response"), entry.get("error"), entry.get("prompt"))
        for entry in rounds), where)


def _first_text(value: Any) -> str | None:
    while isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, str) else None
