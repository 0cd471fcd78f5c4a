"""Reading inspect_ai `.eval` logs of an exported task back as `importer.LoggedSample`s.

Contract (`read_inspect_logs(path) -> HarnessLog`)
-------------------------------------------------
- `path` is a log file (`.eval` zip with zstd members, or `.json`) or a folder searched
  recursively for the logs of mmfaith tasks (LOG_GLOBS); logs whose task is not `mmfaith_*`
  are skipped; a file of that name that is not a readable log is named in a warning and skipped
  (given alone, it is an error). Read with `inspect_ai.log.read_eval_log` (install `mmfaith[inspect]`).
- Before a `.eval` is read, its zip directory is checked: a member that would inflate past
  MAX_MEMBER_BYTES or MAX_RATIO times its compressed size (a zip bomb) is refused unread.
- A sample's id is the row key (`{"id", "probes"}`). Its rounds come from the store
  (`mmfaith_rounds`: probe, prompt, response, error, stop reason, usage per round, and the family's
  meta of a tool loop (MCoT's trace), written by inspect_solvers.probe_solver); a sample without
  them falls back to `output.completion`.
  `stop_reason` becomes the finish reason, usage the token counts.
- A sample error (the model call failed after inspect's retries, or the sample was cancelled)
  becomes the error of every round it did not finish: error lines, never answers.
- The model is the log's `eval.model` (`openai-api/PROVIDER/NAME` -> NAME); the version is the
  log's `inspect_ai` package version. Latency is not per call in the log: left null.
"""
from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.importer import HarnessLog, LoggedRound, LoggedSample
from mmfaith.evaluators.harness.runtime import RECORD_KEY

UNKNOWN_FIELDS = ("latency_s", "reasoning")
MAX_MEMBER_BYTES = 1 << 30
"""The most one member of a `.eval` may inflate to (1 GiB)."""
MAX_RATIO = 200
"""The most one member may inflate relative to its compressed size (JSON compresses about 10-20 times)."""
LOG_GLOBS = ("*_mmfaith-*.eval", "*_mmfaith-*.json")
"""inspect names a log <time>_<task, dashed>_<id>.eval (or .json with --log-format json)."""


def _read_eval_log() -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:
        raise MmfaithError("reading inspect logs needs inspect-ai: pip install 'mmfaith[inspect]' (or run "
                           "`mmfaith import inspect` in the environment inspect runs in).") from exc
    return read_eval_log


def read_inspect_logs(path: Path) -> HarnessLog:
    """Every sample of the mmfaith tasks' logs under `path` (module docstring)."""
    candidates = [path] if path.is_file() else sorted(
        found for pattern in LOG_GLOBS for found in path.rglob(pattern))
    for file in candidates:
        _check_zip(file)
    read_eval_log = _read_eval_log()
    samples, files, models, versions, runs = [], [], set(), set(), []
    for file in candidates:
        try:
            log = read_eval_log(str(file))
        except Exception as exc:  # inspect raises its own types for a file that is not a log
            if path.is_file():
                raise MmfaithError(f"{file}: not an inspect log ({exc.__class__.__name__}: {exc}).") from exc
            print(f"mmfaith: warning: {file}: not a readable inspect log ({exc.__class__.__name__}: "
                  f"{str(exc)[:200]}); skipped.", file=sys.stderr)
            continue
        if not log.eval.task.split("/")[-1].startswith("mmfaith_"):
            continue
        files.append(file)
        models.add(log.eval.model.split("/")[-1])
        versions.add((log.eval.packages or {}).get("inspect_ai"))
        runs.append({"file": str(file), "task": log.eval.task, "model": log.eval.model, "status": log.status,
                     "created": log.eval.created})
        samples.extend(_sample(sample, f"{file} sample {sample.id}") for sample in log.samples or [])
    if not files:
        raise MmfaithError(f"{path}: no inspect log of an mmfaith task (.eval); pass the --log-dir of `inspect eval`.")
    if len(models) > 1:
        raise MmfaithError(f"{path}: logs of several models ({', '.join(sorted(models))}); import one model's logs at a time.")
    version = ", ".join(sorted(v for v in versions if v)) or None
    return HarnessLog("inspect", version, models.pop(), samples, files, UNKNOWN_FIELDS, {"inspect_runs": runs})


def _check_zip(file: Path) -> None:
    """Refuse a `.eval` whose members would inflate past MAX_MEMBER_BYTES or MAX_RATIO (read from the zip's
    directory, before any member is read); other files pass."""
    if not zipfile.is_zipfile(file):
        return
    with zipfile.ZipFile(file) as archive:
        for member in archive.infolist():
            ratio = member.file_size / max(member.compress_size, 1)
            if member.file_size > MAX_MEMBER_BYTES or ratio > MAX_RATIO:
                raise MmfaithError(f"{file}: member {member.filename} would inflate to {member.file_size} bytes "
                                   f"({ratio:.0f} times its compressed size; at most {MAX_MEMBER_BYTES} bytes and "
                                   f"{MAX_RATIO} times): not read.")


def _error_line(message: str) -> str:
    """The last line of inspect's error message (it starts with the whole request, images abridged):
    the exception itself, e.g. `BadRequestError("Error code: 400 - ...")`."""
    lines = [line.strip() for line in message.replace("\\n", "\n").splitlines() if line.strip()]
    last = lines[-1] if lines else message
    return (last[:-2] if last.endswith("')") else last)[:500]


def _sample(sample: Any, where: str) -> LoggedSample:
    try:
        key = json.loads(str(sample.id))
        item_id, probes = key["id"], tuple(key["probes"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MmfaithError(f"{where}: the sample id is not an mmfaith row key ({exc}); these are not samples of a "
                           "task `mmfaith export inspect` wrote.") from exc
    error = _error_line(sample.error.message) if sample.error is not None else None
    stored = (sample.store or {}).get(RECORD_KEY)
    if stored is None:
        stored = [] if error or sample.output is None or not sample.output.choices else [
            {"probe": probes[0], "prompt": None, "response": sample.output.completion, "error": None,
             "finish_reason": sample.output.stop_reason,
             "prompt_tokens": sample.output.usage.input_tokens if sample.output.usage else None,
             "completion_tokens": sample.output.usage.output_tokens if sample.output.usage else None}]
    rounds = [LoggedRound(entry["probe"], entry.get("response"), entry.get("error"), entry.get("prompt"),
                          {name: entry.get(name) for name in ("finish_reason", "prompt_tokens", "completion_tokens")},
                          entry.get("meta") or {})
              for entry in stored]
    done = {entry.probe for entry in rounds}
    if error:
        rounds.extend(LoggedRound(probe, None, f"inspect sample error: {error}") for probe in probes if probe not in done)
    return LoggedSample(item_id, probes, tuple(rounds), where)
