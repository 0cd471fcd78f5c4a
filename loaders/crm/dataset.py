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
from mmfaith.images import sha256_file
from mmfaith.jsonl import read_jsonl
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
                     fields: Fields | None = None) -> CrmDataset:
    """Open a CRM build dir, release folder or Hub repo id `ORG/NAME[@REVISION]` (module docstring); with `fields`,
    each record keeps only those once checked (mmfaith/records.py)."""
    from mmfaith.loaders.source import resolve

    found = resolve(path, "crm", verify=verify)
    if found.kind == "release":
        from mmfaith.loaders.crm.rows import open_crm_release

        return open_crm_release(found.path, found.manifest, cache_dir, fields)
    path = found.path
    records_path = path / "records.jsonl"
    items, seen, shared = [], set(), Shared()
    for number, record in read_jsonl(records_path):
        where = f"{records_path}:{number}"
        check_crm_record(record, where, seen)
        refs = {"original": ImageRef(record["image_original_sha256"], path / record["image_original"])}
        refs |= {variant_name(v): ImageRef(v["sha256"], path / v["image"]) for v in record["variants"]}
        for ref in refs.values():
            if not ref.path.is_file():
                raise MmfaithError(f"{where}: image {ref.path} is missing.")
        items.append(CrmItem(keep_fields(record, fields, shared), refs.pop("original"), refs))
    return CrmDataset(items, dataset_id=f"build:{path.resolve().name}", revision=sha256_file(records_path)[:16])
