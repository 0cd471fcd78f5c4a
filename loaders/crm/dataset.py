"""Access to a CRM dataset for the evaluator: its items, their gold and their image files.

`open_crm_dataset(path)` reads a build dir (records.jsonl + originals/ + variants/), a release
folder written by `mmfaith release` (manifest.json + parquet shards, one config per mask mode and
style; the images are written once to the content-addressed cache so every item still has files),
or a Hub repo id `ORG/NAME[@REVISION]` of such a release (loaders/source.py resolves all three).
Every record is schema-checked and every image exists and hashes to its record's sha256 (release).
`open_crm_source(path, fields, workers, expect)` reads the same items in two passes for a scorer that holds a
chunk of them at a time (loaders/build_records.py `TwoPass`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from mmfaith.errors import MmfaithError
from mmfaith.images import ImageRef
from mmfaith.loaders.build_records import BuildRecords, TwoPass, open_two_pass, read_build_records
from mmfaith.loaders.source import Source
from mmfaith.records import Fields, Shared, keep_fields
from mmfaith.schema import check_loaded_record

Kept = TypeVar("Kept")


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
    read = _read_build(path, workers, lambda record, shared: (keep_fields(record, fields, shared), _images(record)))
    items = [_item(path, record, shown) for record, shown in read.kept]
    return CrmDataset(items, dataset_id=f"build:{path.resolve().name}", revision=read.sha256[:16])


def open_crm_source(path: Path | str, fields: Fields | None, workers: int,
                    expect: Callable[[CrmItem], Kept]) -> TwoPass[CrmItem, Kept]:
    """`open_crm_dataset`'s items in two passes (loaders/build_records.py `TwoPass`): a build dir's records checked
    on `workers` processes keeping `expect(item)` of each, then read again a chunk at a time; a release folder or
    Hub id is opened whole once and held."""
    def make(build: Path) -> Callable[[dict[str, Any], Shared], CrmItem]:
        return lambda record, shared: _item(build, keep_fields(record, fields, shared), _images(record))

    def held(found: Source) -> tuple[str, str, list[CrmItem]]:
        from mmfaith.loaders.crm.rows import open_crm_release

        dataset = open_crm_release(found.path, found.manifest, None, fields)
        return dataset.dataset_id, dataset.revision, dataset.items

    def first_pass(build: Path) -> BuildRecords[Kept]:
        item = make(build)
        return _read_build(build, workers, lambda record, shared: expect(item(record, shared)))

    return open_two_pass(path, "crm", held, first_pass, make, expect)


def _images(record: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, sha256, path relative to the build dir) of the original and of each variant."""
    return [("original", record["image_original_sha256"], record["image_original"]),
            *((variant_name(v), v["sha256"], v["image"]) for v in record["variants"])]


def _item(build: Path, record: dict[str, Any], images: list[tuple[str, str, str]]) -> CrmItem:
    """The item of a build dir's (kept) record and its `_images`."""
    refs = {name: ImageRef(sha256, build / image) for name, sha256, image in images}
    return CrmItem(record, refs.pop("original"), refs)


def _read_build(build: Path, workers: int, keep: Callable[[dict[str, Any], Shared], Kept]) -> BuildRecords[Kept]:
    """records.jsonl of a build dir, every record checked (its images exist) and `keep(record, shared)` kept."""
    def images_exist(record: dict[str, Any], where: str) -> None:
        for _, _, image in _images(record):
            if not (build / image).is_file():
                raise MmfaithError(f"{where}: image {build / image} is missing.")

    return read_build_records(build / "records.jsonl", "crm_item", "a CRM record", images_exist, keep, workers)
