"""The rows both exporters write: one per (item, probe group), as parquet.

Contract
--------
`export_rows(source)` opens a build dir, release folder or Hub id with its family's loader and
returns the family, its harness part and one `dict` row per (item, probe group), in dataset order:

- `key`: canonical JSON `{"id", "probes"}`, the sample's target / id in the harness logs (unique;
  lmms-eval's doc_hash is not);
- `id`, `family`, `task` (the sub-task: `mmfaith_<family>_<probes>`), `kind`, `probes`,
  `state` (the group's JSON state), `prompt` (the first round's text, rendered by the family);
- `image_sha256` (the group's stored images' hashes in order), and in the parquet `image_1` ...
  `image_N`: their bytes as built (null past the group's images).

`write_parquet(rows, max_images, path)` writes rows deterministically (same rows, same bytes),
reading the images batch by batch (a row holds its `ImageRef`s under `images`, not their bytes),
as plain binary columns (the harnesses' loggers leave bytes out of their logs).
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from mmfaith import families
from mmfaith.errors import MmfaithError
from mmfaith.evaluators.harness.runtime import harness_part, require_kind
from mmfaith.evaluators.harness.spec import HarnessPart, family_task, task_suffix
from mmfaith.jsonl import canonical_json


@dataclass(frozen=True)
class ExportRows:
    """A dataset's rows for the harnesses, by sub-task, with what they came from."""

    family: str
    part: HarnessPart
    dataset_id: str
    revision: str
    by_task: dict[str, list[dict[str, Any]]]
    max_images: int

    @property
    def items(self) -> int:
        return len({row["id"] for rows in self.by_task.values() for row in rows})


def row_key(item_id: str, probes: Iterable[str]) -> str:
    """The id a row travels under through a harness (module docstring)."""
    return canonical_json({"id": item_id, "probes": list(probes)})


def export_rows(source: str, family_name: str | None = None, progress: bool = True,
                harness: str | None = None) -> ExportRows:
    """Every (item, probe group) of the dataset at `source` as a row (module docstring); a group of a kind
    `harness`'s export does not render is refused (`runtime.require_kind`)."""
    family = families.get(family_name or families.family_of_dataset(Path(source)))
    part = harness_part(family.name)
    dataset = family.parts().open_dataset(source)
    by_task: dict[str, list[dict[str, Any]]] = {}
    max_images = 0
    for item in tqdm(dataset.items, desc="export", unit="item", disable=not progress):
        for group in part.groups(item):
            task = f"{family_task(family.name)}_{task_suffix(group)}"
            require_kind(group.kind, task, harness)
            first = part.round(group.probes[0], group.state, [])
            if first.text is None:
                raise MmfaithError(f"{item.id}: the first round of {task} has no text ({first.not_asked}).")
            row = {"key": row_key(item.id, group.probes), "id": item.id, "family": family.name, "task": task,
                   "kind": group.kind, "probes": list(group.probes), "state": canonical_json(group.state),
                   "prompt": first.text, "image_sha256": [image.sha256 for image in group.images],
                   "images": group.images}
            max_images = max(max_images, len(group.images))
            by_task.setdefault(task, []).append(row)
    if not by_task:
        raise MmfaithError(f"{source}: holds no items to export.")
    return ExportRows(family.name, part, dataset.dataset_id, dataset.revision, by_task, max_images)


EXPORT_JSON = "export.json"
TEXT_COLUMNS = ("key", "id", "family", "task", "kind", "state", "prompt")
BATCH_ROWS = 64


def write_parquet(rows: list[dict[str, Any]], max_images: int, path: Path, progress: tqdm | None = None) -> None:
    """The rows as one parquet file (module docstring), written atomically, BATCH_ROWS rows at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([*((name, pa.string()) for name in TEXT_COLUMNS), ("probes", pa.list_(pa.string())),
                        ("image_sha256", pa.list_(pa.string())),
                        *((f"image_{number}", pa.binary()) for number in range(1, max_images + 1))])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    # PNG bytes do not compress further: only the text columns are compressed.
    compression = {name: ("NONE" if name.startswith("image_") and name != "image_sha256" else "ZSTD") for name in schema.names}
    with pq.ParquetWriter(partial, schema, compression=compression) as writer:
        for start in range(0, len(rows), BATCH_ROWS):
            batch = rows[start:start + BATCH_ROWS]
            columns = {name: [row[name] for row in batch] for name in (*TEXT_COLUMNS, "probes", "image_sha256")}
            for number in range(1, max_images + 1):
                columns[f"image_{number}"] = [row["images"][number - 1].load() if number <= len(row["images"])
                                              else None for row in batch]
            writer.write_table(pa.table(columns, schema=schema))
            if progress is not None:
                progress.update(len(batch))
    partial.replace(path)


def write_task_files(rows: ExportRows, out: Path, progress: bool) -> dict[str, Path]:
    """Every sub-task's rows as out/data/<task>.parquet; the files by task, in task order."""
    files = {}
    total = sum(len(task_rows) for task_rows in rows.by_task.values())
    with tqdm(total=total, desc="parquet", unit="row", disable=not progress) as bar:
        for task, task_rows in sorted(rows.by_task.items()):
            files[task] = out / "data" / f"{task}.parquet"
            write_parquet(task_rows, rows.max_images, files[task], bar)
    return files


def prepare_export_dir(out: Path) -> None:
    """DIR empty, absent, or an earlier export of mmfaith (its rows are replaced); anything else refused."""
    if out.exists() and any(out.iterdir()) and not (out / EXPORT_JSON).is_file():
        raise MmfaithError(f"{out}: exists and is not an mmfaith export (no {EXPORT_JSON}); pass an empty or new --out.")
    if (out / "data").is_dir():
        shutil.rmtree(out / "data")
    out.mkdir(parents=True, exist_ok=True)


def export_provenance(rows: ExportRows, harness: str, source: str) -> dict[str, Any]:
    """What export.json records: the harness, mmfaith's version, the dataset, the prompts' hash, the tasks."""
    from mmfaith import __version__

    return {"harness": harness, "family": rows.family, "mmfaith_version": __version__,
            "dataset": {"source": str(source), "id": rows.dataset_id, "revision": rows.revision,
                        "items": rows.items},
            "prompt_templates_sha256": rows.part.templates_sha256, "settings": rows.part.settings,
            "tasks": {task: {"rows": len(task_rows), "kind": task_rows[0]["kind"], "probes": task_rows[0]["probes"]}
                      for task, task_rows in sorted(rows.by_task.items())}}


def dump_json(document: Any) -> str:
    """Indented, key-sorted JSON with a final newline (export.json, import.json)."""
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
