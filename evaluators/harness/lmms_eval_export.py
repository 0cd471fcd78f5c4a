"""`mmfaith export lmms-eval SOURCE --out DIR`: a folder for lmms-eval's `--include_path`.

Contract
--------
DIR holds, for the dataset's family (`mmfaith_<family>`, e.g. `mmfaith_spd_faith`):

- `mmfaith_<family>.yaml`: the group task, listing the sub-tasks;
- `mmfaith_<family>_<probes>.yaml` per sub-task: `dataset_path: parquet` over
  `data/<task>.parquet` by its absolute path (lmms-eval resolves relative ones against the working
  directory), `output_type: generate_until` for independent probes and `generate_until_agentic`
  for dependent ones (`max_agentic_steps` = its rounds), `doc_to_target: key` (the row's unique
  id), `generation_kwargs` with `until: []` (lmms-eval's default `"\\n\\n"` would cut reasoning at
  backends that honour stop strings), `reasoning_tags: none` (lmms-eval strips `<think>` blocks
  by default; `--reasoning_tags none` on its command line does the same for every task), and the
  prompt templates' hash and the export's provenance in `metadata`;
- `utils.py`: evaluators/harness/lmms_eval_utils.py, copied verbatim (it imports mmfaith);
- `export.json`: the provenance (rows.export_provenance).

lmms-eval decodes the images and encodes them again (PIL, PNG unless LMMS_IMAGE_ENCODE_FORMAT
says otherwise): the pixels stay, the bytes may not. `reencoded_differently` counts the stored
images whose PIL re-encoding gives other bytes (the export warns: a server that matches images by
hash, as the reference server does, would not recognise them); mmfaith's own builds write PNG
with PIL's default settings, so theirs re-encode to the same bytes. A lossy
LMMS_IMAGE_ENCODE_FORMAT (JPEG, WEBP) is refused by the exported `utils.py` at run time and
warned about at export time.

A round that asks a temperature of its own other than the export's is refused: lmms-eval 0.7.3
gives every round, agentic ones too, the task's `generation_kwargs`. So is a round that continues
the earlier rounds' conversation (`Round.continues`, CRM's final answer): its agentic rounds are
fresh single messages (use `mmfaith export inspect`).

The files are written from scratch into DIR (one that holds other files is refused unless it is
an earlier export); the same dataset and mmfaith give the same bytes.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.rows import (EXPORT_JSON, ExportRows, dump_json, export_provenance, export_rows,
                                             prepare_export_dir, write_task_files)
from mmfaith.evaluators.harness.spec import family_task

UTILS_SOURCE = Path(__file__).with_name("lmms_eval_utils.py")
DEFAULT_MAX_NEW_TOKENS = 1024  # `mmfaith run`'s --max-tokens default
DEFAULT_TEMPERATURE = 0.0  # `mmfaith run`'s --temperature default


@dataclass(frozen=True)
class LmmsExport:
    """What an export wrote: the folder, the group task and its sub-tasks with their row counts."""

    out: Path
    group: str
    tasks: dict[str, int]
    reencoded_differently: int
    images: int


def _yaml_value(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON scalar or flow collection is valid YAML


def _task_yaml(task: str, kind: str, rounds: int, data_file: Path, metadata: dict[str, object],
               max_new_tokens: int, temperature: float) -> str:
    dependent = kind == "dependent"
    generation = {"until": [], "max_new_tokens": max_new_tokens, "temperature": temperature,
                  "do_sample": temperature > 0}
    if dependent:
        generation["max_agentic_steps"] = rounds
    lines = [
        f"# Written by `mmfaith export lmms-eval`; rows: {data_file.name}.",
        f"task: {_yaml_value(task)}",
        "dataset_path: parquet",
        f"dataset_kwargs: {_yaml_value({'data_files': {'test': str(data_file)}})}",
        "test_split: test",
        f"output_type: {'generate_until_agentic' if dependent else 'generate_until'}",
        "doc_to_visual: !function utils.doc_to_visual",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_target: key",
        "process_results: !function utils.process_results",
        f"generation_kwargs: {_yaml_value(generation)}",
        "# lmms-eval strips <think> blocks unless told not to: the reasoning is part of the answer mmfaith scores.",
        "reasoning_tags: none",
        "metric_list:",
        "  - metric: mmfaith_answered",
        "    aggregation: mean",
        "    higher_is_better: true",
        f"metadata: {_yaml_value(metadata)}",
    ]
    return "\n".join(lines) + "\n"


def export_lmms_eval(source: str, out: Path, family: str | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS,
                     temperature: float = DEFAULT_TEMPERATURE, progress: bool = True) -> LmmsExport:
    """Write the lmms-eval task folder for the dataset at `source` (module docstring)."""
    rows = export_rows(source, family, progress, "lmms-eval")
    return write_lmms_eval(rows, source, out, max_new_tokens, temperature, progress)


def _check_round_temperatures(rows: ExportRows, temperature: float) -> None:
    """Refuse a round that continues the earlier rounds' conversation (`Round.continues`), then one that
    asks its own temperature (lmms-eval 0.7.3 gives every round, agentic ones too, the task's
    generation_kwargs); rounds are rendered with empty earlier answers (both are the family's choice per
    round, not per answer)."""
    rendered = [(row, probe, rows.part.round(probe, json.loads(row["state"]), [""] * index))
                for task_rows in rows.by_task.values() for row in task_rows
                for index, probe in enumerate(row["probes"])]
    for row, probe, asked in rendered:
        if asked.continues:
            raise MmfaithError(f"{row['task']}: the {probe} round continues the conversation of the earlier rounds "
                               "(the model's own answer as an assistant turn), which lmms-eval 0.7.3's agentic rounds "
                               "(a fresh single message each) cannot send; use `mmfaith export inspect`.")
    for row, probe, asked in rendered:
        if asked.temperature is not None and asked.temperature != temperature:
            raise MmfaithError(f"{row['task']}: the {probe} round asks temperature {asked.temperature}, which "
                               "lmms-eval 0.7.3 cannot set per round; export with --temperature "
                               f"{asked.temperature} or use `mmfaith export inspect`.")


def write_lmms_eval(rows: ExportRows, source: str, out: Path, max_new_tokens: int, temperature: float,
                    progress: bool) -> LmmsExport:
    """The folder for already collected rows."""
    _check_round_temperatures(rows, temperature)
    out = out.resolve()
    prepare_export_dir(out)
    provenance = export_provenance(rows, "lmms-eval", source)
    provenance["generation"] = {"max_new_tokens": max_new_tokens, "temperature": temperature}
    metadata = {"version": 1, "mmfaith_version": provenance["mmfaith_version"], "family": rows.family,
                "prompt_templates_sha256": rows.part.templates_sha256, "dataset_id": rows.dataset_id,
                "dataset_revision": rows.revision}
    group = family_task(rows.family)
    for task, data_file in write_task_files(rows, out, progress).items():
        first = rows.by_task[task][0]
        (out / f"{task}.yaml").write_text(_task_yaml(task, first["kind"], len(first["probes"]), data_file, metadata,
                                                     max_new_tokens, temperature), encoding="utf-8")
    group_lines = [f"# Written by `mmfaith export lmms-eval`: run with --include_path {out} --tasks {group}",
                   f"group: {group}", "task:", *(f"  - {task}" for task in sorted(rows.by_task)),
                   f"metadata: {_yaml_value(metadata)}"]
    (out / f"{group}.yaml").write_text("\n".join(group_lines) + "\n", encoding="utf-8")
    shutil.copyfile(UTILS_SOURCE, out / "utils.py")
    (out / EXPORT_JSON).write_text(dump_json(provenance), encoding="utf-8")
    unique = {image.sha256: image for task_rows in rows.by_task.values() for row in task_rows for image in row["images"]}
    differ = sum(not _reencodes_to_same_bytes(image.load()) for image in tqdm(
        unique.values(), desc="re-encode check", unit="image", disable=not progress))
    return LmmsExport(out, group, {task: len(task_rows) for task, task_rows in sorted(rows.by_task.items())},
                      differ, len(unique))


def _reencodes_to_same_bytes(data: bytes) -> bool:
    """Whether PIL's PNG encoding of the decoded image (what lmms-eval sends) is the stored bytes."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
    return buffer.getvalue() == data
