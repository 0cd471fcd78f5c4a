"""Access to a CRM dataset for the evaluator: its items, their gold and their image files.

`open_crm_dataset(path)` reads a build dir (records.jsonl + originals/ + variants/), a release
folder written by `mmfaith release` (manifest.json + parquet shards, one config per mask mode and
style; the images are written once to the content-addressed cache so every item still has files),
or a Hub repo id `ORG/NAME[@REVISION]` of such a release (loaders/source.py resolves all three).
Every record is schema-checked and every image exists and hashes to its record's sha256 (release).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from mmfaith.errors import MmfaithError
from mmfaith.images import ImageRef
from mmfaith.loaders.build_records import read_build_records
from mmfaith.records import Fields, Shared, keep_fields
from mmfaith.schema import check_loaded_record


def variant_name(variant: dict[str, Any]) -> str:
    """A variant's name in probes and metrics: "{mode}-{style}"."""
    return f"{variant['mode']}-{variant['style']}"


@dataclass(frozen=True)
class CrmItem:
    """One question: `record` is the gold (schemas/crm_item.schema.json); images as `ImageRef`s."""

    NOUN: ClassVar[str] = "question"  # what `mmfaith serve-reference` counts

    record: dict[str, Any]
    original: ImageRef
    variants: dict[str, ImageRef]

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def source_key(self) -> str:
        """The source image: the bootstrap's cluster (questions on one image are not independent)."""
        source = self.record["source"]
        return f"{source['dataset']}/{source['file_name']}"

    def variant(self, name: str) -> dict[str, Any]:
        """The record's variant named "{mode}-{style}"."""
        return next(v for v in self.record["variants"] if variant_name(v) == name)


@dataclass(frozen=True)
class CrmDataset:
    items: list[CrmItem]
    dataset_id: str
    revision: str

    def by_id(self) -> dict[str, CrmItem]:
        return {item.id: item for item in self.items}


def check_crm_record(record: Any, where: str, seen: set[str]) -> None:
    """Schema-valid and not a second record with an id already seen (added to `seen`)."""
    check_loaded_record("crm_item", record, where, seen, "a CRM record")


def open_crm_dataset(path: Path | str, cache_dir: Path | None = None, verify: bool = True,
                     fields: Fields | None = None, workers: int = 1) -> CrmDataset:
    """Open a CRM build dir, release folder or Hub repo id `ORG/NAME[@REVISION]` (module docstring); with `fields`,
    each record keeps only those once checked (mmfaith/records.py). A build dir's records.jsonl is read on
    `workers` forked processes (loaders/build_records.py: the same items and errors whatever the number)."""
    from mmfaith.loaders.source import resolve

    found = resolve(path, "crm", verify=verify)
    if found.kind == "release":
        from mmfaith.loaders.crm.rows import open_crm_release

        return open_crm_release(found.path, found.manifest, cache_dir, fields)
    path = found.path

    def images(record: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(name, sha256, path relative to the build dir) of the original and of each variant."""
        return [("original", record["image_original_sha256"], record["image_original"]),
                *((variant_name(v), v["sha256"], v["image"]) for v in record["variants"])]

    def images_exist(record: dict[str, Any], where: str) -> None:
        for _, _, image in images(record):
            if not (path / image).is_file():
                raise MmfaithError(f"{where}: image {path / image} is missing.")

    def keep(record: dict[str, Any], shared: Shared) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
        return keep_fields(record, fields, shared), images(record)

    read = read_build_records(path / "records.jsonl", "crm_item", "a CRM record", images_exist, keep, workers)
    items = []
    for record, shown in read.kept:
        refs = {name: ImageRef(sha256, path / image) for name, sha256, image in shown}
        items.append(CrmItem(record, refs.pop("original"), refs))
    return CrmDataset(items, dataset_id=f"build:{path.resolve().name}", revision=read.sha256[:16])
