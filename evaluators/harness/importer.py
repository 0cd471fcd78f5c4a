"""`mmfaith import lmms-eval|inspect LOGS --dataset SOURCE --out predictions.jsonl`.

Contract
--------
A harness reader (`lmms_eval_logs.read_samples`, `inspect_logs.read_samples`) turns its logs into
`LoggedSample`s: the row key the export gave the sample (its id and probes), and per round the
response text or the failure, the prompt the harness sent where the log has it, and the figures
the log holds (tokens, finish reason; None where it has none). `write_predictions` then:

- finds each sample's item and probe group in the dataset (re-derived with the family's harness
  part, as the export made them); an unknown id or probe list is an error naming the log line;
- renders each round again with the family's code from the earlier responses, and refuses a
  log whose prompt differs (the task was exported from other prompt templates or edited);
- writes one prediction line per (id, probe) (schemas/prediction.schema.json): the response, or
  for a failed call (lmms-eval's `[LMMS_EVAL_REQUEST_FAILED ...]`, inspect's sample error) or a
  round not asked, response null and `meta.error`; the family's meta (SPD-Faith: order, layout,
  count_asked) and the images shown (their sha256) as `mmfaith run` writes them; an answered
  round's meta from the log (`LoggedRound.meta`: what the family's own harness code recorded,
  MCoT's trace and the images its last request showed) is kept as it is;
- writes `import.json` beside the predictions: the harness, its version and model as the log
  gives them, the export's provenance and prompt templates' hash, the log files' sha256, the
  counts, the (id, probe) the logs lack, and which fields the log cannot tell (left null).

A second sample for the same (id, probes) is an error (two runs in one LOGS folder).
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmfaith import __version__, families
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.rows import dump_json
from mmfaith.evaluators.harness.runtime import harness_part
from mmfaith.images import sha256_file
from mmfaith.jsonl import canonical_json, write_text_atomic
from mmfaith.schema import check_record

IMPORT_JSON = "import.json"
META_FIGURES = ("latency_s", "prompt_tokens", "completion_tokens", "finish_reason", "reasoning")


@dataclass(frozen=True)
class LoggedRound:
    """One round of a logged sample: its response (None: failed, `error` says why) and its figures."""

    probe: str
    response: str | None
    error: str | None = None
    prompt: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    """The family's meta as its harness code recorded it in the run (MCoT: trace, images, calls)."""


@dataclass(frozen=True)
class LoggedSample:
    """One sample of a harness log: its row key's id and probes, its rounds, and where it was read."""

    item_id: str
    probes: tuple[str, ...]
    rounds: tuple[LoggedRound, ...]
    where: str


@dataclass(frozen=True)
class HarnessLog:
    """What a reader found: the samples, the model, the harness and its version, the files read, and
    which prediction fields the log cannot tell."""

    harness: str
    harness_version: str | None
    model: str | None
    samples: list[LoggedSample]
    files: list[Path]
    unknown_fields: tuple[str, ...]
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ImportSummary:
    """What an import wrote: the predictions file, its lines, and the (id, probe) the logs lack."""

    out: Path
    lines: int
    answered: int
    errors: int
    missing: int
    unknown_fields: tuple[str, ...]

    def line(self) -> str:
        """The one line the CLI prints."""
        text = (f"{self.lines} prediction lines ({self.answered} answered, {self.errors} error lines) -> {self.out}")
        if self.missing:
            text += f"; {self.missing} (id, probe) of the dataset are not in the logs (see {IMPORT_JSON})"
        if self.unknown_fields:
            text += f"; not in the logs, left null: {', '.join(self.unknown_fields)}"
        return text


def write_predictions(log: HarnessLog, dataset_source: str, out: Path, model: str | None = None,
                      family_name: str | None = None, export_dir: Path | None = None) -> ImportSummary:
    """Write the predictions and import.json for a harness log (module docstring)."""
    family = families.get(family_name or families.family_of_dataset(Path(dataset_source)))
    part = harness_part(family.name)
    dataset = family.parts().open_dataset(dataset_source)
    model = model or log.model
    if not model:
        raise MmfaithError(f"{', '.join(map(str, log.files[:3]))}: the logs do not name the model; pass --model NAME.")
    groups = {(item.id, group.probes): group for item in dataset.items for group in part.groups(item)}
    lines: list[dict[str, Any]] = []
    seen: dict[tuple[str, tuple[str, ...]], str] = {}
    for sample in log.samples:
        key = (sample.item_id, sample.probes)
        group = groups.get(key)
        if group is None:
            raise MmfaithError(f"{sample.where}: id {sample.item_id!r} with probes {list(sample.probes)} is not a probe "
                               f"group of {dataset_source}; import against the dataset the task was exported from.")
        if key in seen:
            raise MmfaithError(f"{sample.where}: a second sample for {sample.item_id} / {'+'.join(sample.probes)} "
                               f"(first: {seen[key]}); import one run's logs at a time.")
        seen[key] = sample.where
        lines.extend(_sample_lines(sample, group, part, model))
    expected = {(item_id, probe) for item_id, probes in groups for probe in probes}
    missing = sorted(expected - {(line["id"], line["probe"]) for line in lines})
    for number, line in enumerate(lines, start=1):
        check_record("prediction", line, f"{out} line {number}")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, "".join(canonical_json(line) + "\n" for line in lines))
    summary = ImportSummary(out, len(lines), sum(line["response"] is not None for line in lines),
                            sum(line["response"] is None for line in lines), len(missing), log.unknown_fields)
    provenance = {
        "harness": log.harness, "harness_version": log.harness_version, "model": model, "family": family.name,
        "mmfaith_version": __version__, "prompt_templates_sha256": part.templates_sha256,
        "settings": part.settings,
        "dataset": {"source": str(dataset_source), "id": dataset.dataset_id, "revision": dataset.revision},
        "logs": [{"path": str(path), "sha256": sha256_file(path)} for path in log.files],
        "export": _export_provenance(export_dir),
        "counts": {"lines": summary.lines, "answered": summary.answered, "errors": summary.errors,
                   "missing": summary.missing},
        "missing": [{"id": item_id, "probe": probe} for item_id, probe in missing[:1000]],
        "unknown_fields": list(log.unknown_fields), **log.details,
    }
    write_text_atomic(out.parent / IMPORT_JSON, dump_json(provenance))
    return summary


def _sample_lines(sample: LoggedSample, group: Any, part: Any, model: str) -> Iterable[dict[str, Any]]:
    images = [{"sha256": image.sha256} for image in group.images]
    rounds = {entry.probe: entry for entry in sample.rounds}
    earlier: list[str | None] = []
    for probe in group.probes:
        asked = part.round(probe, group.state, earlier)
        logged = rounds.get(probe)
        figures = {name: None for name in META_FIGURES}
        if logged is not None:
            figures.update({name: value for name, value in logged.figures.items() if name in META_FIGURES})
        meta = {**asked.meta, **figures}
        if asked.text is None:
            response, meta["error"] = None, asked.not_asked
        elif logged is None or (logged.response is None and logged.error is None):
            response, meta["error"] = None, "not in the harness log (the harness ended before this round)"
        else:
            if logged.prompt is not None and logged.prompt != asked.text:
                raise MmfaithError(f"{sample.where}: the {probe} prompt the harness sent differs from the one mmfaith "
                                   "renders: the task was exported from other prompt templates or edited; export it "
                                   "again with this mmfaith.")
            response, meta["error"] = logged.response, (logged.error if logged.response is None else None)
            meta["images"] = images
            if response is not None:
                meta.update(logged.meta)
        earlier.append(response)
        yield {"id": sample.item_id, "probe": probe, "response": response, "model": model, "meta": meta}


def _export_provenance(export_dir: Path | None) -> dict[str, Any] | None:
    if export_dir is None:
        return None
    path = export_dir / "export.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MmfaithError(f"{path}: cannot read the export's provenance ({exc}); pass the folder "
                           "`mmfaith export` wrote to --export.") from exc
