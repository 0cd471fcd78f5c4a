"""Access to an MCoT dataset for the evaluator: its items, their gold and their image files.

`open_mcot_dataset(path)` reads a build dir (records.jsonl + images/) or a release folder written by
`mmfaith release` (manifest.json + parquet shards; images written once to the content-addressed
cache so every item has an image file), or a Hub id of such a release. Every record is
schema-checked (schemas/mcot_item.schema.json) and every image's bytes hash to its record's sha256.
`open_mcot_source(path, fields, workers, expect)` reads the same items in two passes for a scorer that holds a
chunk of them at a time (loaders/build_records.py `TwoPass`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from mmfaith.cache import cache_dir as default_cache_dir
from mmfaith.errors import MmfaithError
from mmfaith.images import ImageRef
from mmfaith.images import sha256_file
from mmfaith.loaders.build_records import BuildRecords, TwoPass, open_two_pass, read_build_records
from mmfaith.records import Fields, Shared, keep_fields
from mmfaith.loaders.release_files import cached_image
from mmfaith.loaders.source import Source, resolve
from mmfaith.schema import check_loaded_record

Kept = TypeVar("Kept")


@dataclass(frozen=True)
class McotItem:
    """One question: `record` is the gold (schemas/mcot_item.schema.json); `image_path` is absolute."""

    NOUN: ClassVar[str] = "question"  # what `mmfaith serve-reference` counts

    record: dict[str, Any]
    image_path: Path

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def source_key(self) -> str:
        """The image the question is about: the bootstrap's unit (questions on one image are not independent)."""
        return self.record["image_sha256"]

    @property
    def image(self) -> ImageRef:
        return ImageRef(self.record["image_sha256"], self.image_path)

    @property
    def size(self) -> tuple[int, int]:
        return self.record["width"], self.record["height"]


@dataclass(frozen=True)
class McotDataset:
    items: list[McotItem]
    dataset_id: str
    revision: str

    def by_id(self) -> dict[str, McotItem]:
        return {item.id: item for item in self.items}


def open_mcot_dataset(path: Path | str, cache_dir: Path | None = None, verify: bool = True,
                      fields: Fields | None = None, workers: int = 1) -> McotDataset:
    """A build dir, a release folder or a Hub id (module docstring); with `fields`, each record keeps only those
    once checked (mmfaith/records.py). A build dir's records are read on `workers` processes
    (loaders/build_records.py)."""
    found = resolve(path, "mcot", verify=verify)
    if found.kind == "release":
        return _open_release(found.path, found.manifest, cache_dir, fields)
    images: dict[str, Path] = {}  # one Path per image file
    read = _read_build(found.path, fields, workers, lambda item, image: (item.record, image))
    items = [McotItem(record, images.setdefault(image, found.path / image)) for record, image in read.kept]
    return McotDataset(items, dataset_id=f"build:{found.path.resolve().name}", revision=read.sha256[:16])


def _read_build(path: Path, fields: Fields | None, workers: int,
                keep: Callable[[McotItem, str], Kept]) -> BuildRecords[Kept]:
    """records.jsonl of a build dir, every record checked (its image exists) and made an item: `keep(item, its
    image's path relative to the build dir)` kept."""
    checked: set[str] = set()  # each image file looked up once per process (an image holds several questions)

    def image_exists(record: dict[str, Any], where: str) -> None:
        if record["image"] not in checked:
            if not (path / record["image"]).is_file():
                raise MmfaithError(f"{where}: image {path / record['image']} is missing.")
            checked.add(record["image"])

    def kept(record: dict[str, Any], shared: Shared) -> Kept:
        return keep(McotItem(keep_fields(record, fields, shared), path / record["image"]), record["image"])

    return read_build_records(path / "records.jsonl", "mcot_item", "an MCoT record", image_exists, kept, workers)


def open_mcot_source(path: Path | str, fields: Fields | None, workers: int,
                     expect: Callable[[McotItem], Kept]) -> TwoPass[McotItem, Kept]:
    """`open_mcot_dataset`'s items in two passes (loaders/build_records.py `TwoPass`): a build dir's records checked
    on `workers` processes keeping `expect(item)` of each, then read again a chunk at a time; a release folder or
    Hub id is opened whole once and held."""
    return open_two_pass(path, "mcot", lambda found: _held(found, fields),
                         lambda build: _read_build(build, fields, workers, lambda item, _: expect(item)),
                         lambda build: lambda record, shared: McotItem(keep_fields(record, fields, shared),
                                                                       build / record["image"]), expect)


def _held(found: Source, fields: Fields | None) -> tuple[str, str, list[McotItem]]:
    dataset = _open_release(found.path, found.manifest, None, fields)
    return dataset.dataset_id, dataset.revision, dataset.items


def check_item(record: dict[str, Any], where: str, seen: set[str]) -> None:
    """Schema-valid and not a second record with an id already seen (added to `seen`)."""
    check_loaded_record("mcot_item", record, where, seen, "an MCoT record")


def _open_release(folder: Path, manifest: dict[str, Any], cache_dir: Path | None, fields: Fields | None) -> McotDataset:
    """The items of every config of a release folder, images materialised in the cache."""
    import pyarrow.parquet as pq

    from mmfaith.loaders.mcot.rows import row_to_record

    images = (cache_dir or default_cache_dir()) / "images"
    images.mkdir(parents=True, exist_ok=True)
    items: list[McotItem] = []
    seen: set[str] = set()
    shared = Shared()
    for name in sorted(name for name, entry in manifest["files"].items() if "config" in entry):
        batches = pq.ParquetFile(folder / name).iter_batches(batch_size=16)
        for number, row in enumerate(row for batch in batches for row in batch.to_pylist()):
            where = f"{folder / name} row {number}"
            record = row_to_record(row)
            check_item(record, where, seen)
            image = cached_image(images, row["image"]["bytes"], record["image_sha256"], where)
            items.append(McotItem(keep_fields(record, fields, shared), image))
    manifest_hash = sha256_file(folder / "manifest.json")[:16]
    return McotDataset(items, dataset_id=f"release:{manifest['name']}", revision=f"{manifest['tag']}+{manifest_hash}")
