"""`mmfaith export inspect SOURCE --out DIR`: an inspect_ai task file over the dataset's rows.

Contract
--------
DIR holds `mmfaith_<family>.py` (its `@task` is `mmfaith_<family>`, taking `max_tokens`,
`temperature` and the family's own (`HarnessPart.task_arguments`: MCoT's `max_turns`) as task
arguments: `-T max_tokens=...`), the rows as `data/<sub-task>.parquet`
(evaluators/harness/rows.py; the file names them by absolute path) and `export.json` (the
provenance). The task file only calls `inspect_solvers.mmfaith_task`: the dataset, samples and
solvers live in the package, so inspect and `mmfaith run` render the same prompt bytes. Every
probe group kind is rendered, MCoT's zoom-in tool loop included.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mmfaith.evaluators.harness.rows import (EXPORT_JSON, dump_json, export_provenance, export_rows,
                                             prepare_export_dir, write_task_files)
from mmfaith.evaluators.harness.spec import family_task

TASK_FILE = '''"""mmfaith's {family} benchmark as an inspect_ai task (written by `mmfaith export inspect`).

Run (in this folder; inspect takes relative paths only):
      inspect eval {name}.py --model openai-api/PROVIDER/MODEL --log-dir LOGS
Then: mmfaith import inspect LOGS --dataset SOURCE --out predictions.jsonl
Needs inspect-ai and mmfaith in the same environment (the prompts are mmfaith's own code).
"""
from inspect_ai import task

from mmfaith.evaluators.harness.inspect_solvers import mmfaith_task

DATA_FILES = {data_files}
EXPORT = {export}


@task
def {name}(max_tokens: int = {max_tokens}, temperature: float = {temperature}{signature}):
    """{family}: every probe of every item; dependent probes asked with the model's own earlier answer."""
    return mmfaith_task("{name}", DATA_FILES, EXPORT, max_tokens=max_tokens, temperature=temperature{passed})
'''


@dataclass(frozen=True)
class InspectExport:
    out: Path
    task_file: Path
    rows: int


def export_inspect(source: str, out: Path, family: str | None = None, max_new_tokens: int = 1024,
                   temperature: float = 0.0, progress: bool = True) -> InspectExport:
    """Write the inspect task folder for the dataset at `source` (module docstring)."""
    rows = export_rows(source, family, progress, "inspect")
    out = out.resolve()
    prepare_export_dir(out)
    provenance = export_provenance(rows, "inspect", source)
    provenance["generation"] = {"max_new_tokens": max_new_tokens, "temperature": temperature}
    name = family_task(rows.family)
    data_files = [str(path) for path in write_task_files(rows, out, progress).values()]
    export = {key: provenance[key] for key in ("family", "mmfaith_version", "prompt_templates_sha256", "dataset")}
    task_file = out / f"{name}.py"
    family_arguments = getattr(rows.part, "task_arguments", {})
    signature = "".join(f", {key}: {type(value).__name__} = {value!r}" for key, value in family_arguments.items())
    passed = "".join(f", {key}={key}" for key in family_arguments)
    task_file.write_text(TASK_FILE.format(family=rows.family, data_files=repr(data_files),
                                          export=repr(export), name=name, max_tokens=max_new_tokens,
                                          temperature=float(temperature), signature=signature, passed=passed),
                         encoding="utf-8")
    (out / EXPORT_JSON).write_text(dump_json(provenance), encoding="utf-8")
    return InspectExport(out, task_file, sum(len(task_rows) for task_rows in rows.by_task.values()))
