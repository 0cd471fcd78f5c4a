"""Access to a VFaith dataset for the evaluator: its pairs and perception items, their gold and image files.

`open_vfaith_dataset(path)` reads a build dir (records.jsonl + perception.jsonl + images), a release
folder (written by `mmfaith release`: manifest.json + parquet shards of the configs `pairs` and
`perception`; its images are written once to a content-addressed cache folder so that every item
still has image files), or a Hub dataset repo id `ORG/NAME[@REVISION]` of an mmfaith release
(downloaded with huggingface_hub, then read as a release folder). Every record is schema-checked.
`stream_vfaith_dataset(path)` gives the same items read anew from a build dir's files on each pass, never held
whole (the scorer's bounded memory). `items` lists the pairs, then the perception items: the run engine's unit (probes `original` and
`edited` for a pair, `perception` for a perception item); `source_key` is the source image, the
bootstrap's cluster.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Union

from mmfaith.cache import cache_dir as default_cache_dir
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes, sha256_file
from mmfaith.jsonl import read_jsonl
from mmfaith.records import Fields, Shared, keep_fields
from mmfaith.loaders.release_files import cached_image
from mmfaith.loaders.source import resolve
from mmfaith.schema import check_loaded_record


@dataclass(frozen=True)
class _Item:
    """What both item kinds share: the record, its id and its source image (the bootstrap's cluster)."""

    record: dict[str, Any]

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def source_key(self) -> str:
        source = self.record["source"]
        return f"{source['dataset']}/{source.get('file_name') or source['image_id']}"


@dataclass(frozen=True)
class VfaithPair(_Item):
    """One pair: `record` is the gold (schemas/vfaith_pair.schema.json); paths are absolute."""

    NOUN: ClassVar[str] = "pair"  # what `mmfaith serve-reference` counts

    original_path: Path
    edited_path: Path


@dataclass(frozen=True)
class VfaithPerception(_Item):
    """One perception item (schemas/vfaith_perception.schema.json) and its (edited) image file."""

    NOUN: ClassVar[str] = "perception item"  # what `mmfaith serve-reference` counts

    image_path: Path


VfaithItem = Union[VfaithPair, VfaithPerception]


@dataclass(frozen=True)
class VfaithDataset:
    pairs: list[VfaithPair]
    perception: list[VfaithPerception]
    dataset_id: str
    revision: str

    @property
    def items(self) -> list[VfaithItem]:
        """The pairs, then the perception items (the run engine's and the reference server's items)."""
        return [*self.pairs, *self.perception]


def open_vfaith_dataset(path: Path | str, cache_dir: Path | None = None, verify: bool = True,
                        fields: Fields | None = None) -> VfaithDataset:
    """Open a build dir, a release folder or a Hub repo id (module docstring); with `fields`, each record keeps
    only those once checked (mmfaith/records.py)."""
    found = resolve(path, "vfaith", verify=verify)
    if found.kind == "release":
        return _open_release(found.path, found.manifest, cache_dir, fields)
    return _open_build_dir(found.path, fields)


def check(kind: str, record: Any, where: str, seen: set[str], advice: str = "") -> None:
    """Schema-valid (`vfaith_pair` or `vfaith_perception`) and not a second record with an id already seen."""
    check_loaded_record(kind, record, where, seen, f"a VFaith {kind.split('_')[1]} record", advice)


def _open_build_dir(path: Path, fields: Fields | None) -> VfaithDataset:
    items = list(_build_items(path, fields))
    return VfaithDataset([item for item in items if isinstance(item, VfaithPair)],
                         [item for item in items if isinstance(item, VfaithPerception)],
                         dataset_id=f"build:{path.resolve().name}", revision=_build_revision(path))


def _build_items(path: Path, fields: Fields | None) -> Iterator[VfaithItem]:
    """A build dir's pairs, then its perception items of those pairs, each checked as read (`check`, its images)."""
    records_path = path / "records.jsonl"
    shared = Shared()
    seen: set[str] = set()
    pair_ids: set[str] = set()
    for number, record in read_jsonl(records_path):
        check("vfaith_pair", record, f"{records_path}:{number}", seen)
        pair = VfaithPair(keep_fields(record, fields, shared), path / record["image_original"],
                          path / record["image_edited"])
        for image in (pair.original_path, pair.edited_path):
            if not image.is_file():
                raise MmfaithError(f"{records_path}:{number}: image {image} is missing.")
        pair_ids.add(pair.id)
        yield pair
    perception_path = path / "perception.jsonl"
    if perception_path.is_file():
        for number, record in read_jsonl(perception_path):
            check("vfaith_perception", record, f"{perception_path}:{number}", seen)
            if record["pair_id"] in pair_ids:
                yield VfaithPerception(keep_fields(record, fields, shared), path / record["image"])


def _build_revision(path: Path) -> str:
    return sha256_bytes(b"".join(sha256_file(p).encode() for p in (path / "records.jsonl", path / "perception.jsonl")
                                 if p.is_file()))[:16]


@dataclass(frozen=True)
class VfaithStream:
    """A dataset read item by item (`stream_vfaith_dataset`): `items()` gives its pairs, then its perception items,
    each time anew, in the order of `VfaithDataset.items`."""

    dataset_id: str
    revision: str
    items: Callable[[], Iterator[VfaithItem]]


def stream_vfaith_dataset(path: Path | str, cache_dir: Path | None = None, verify: bool = True,
                          fields: Fields | None = None) -> VfaithStream:
    """`open_vfaith_dataset`'s items, read from a build dir's files on each `items()` and never held whole (a
    scorer's memory bound, docs/scale.md); a release folder or Hub repo is opened whole once and held."""
    found = resolve(path, "vfaith", verify=verify)
    if found.kind == "release":
        dataset = _open_release(found.path, found.manifest, cache_dir, fields)
        return VfaithStream(dataset.dataset_id, dataset.revision, lambda: iter(dataset.items))
    return VfaithStream(f"build:{found.path.resolve().name}", _build_revision(found.path),
                        lambda: _build_items(found.path, fields))


def _open_release(folder: Path, manifest: dict[str, Any], cache_dir: Path | None, fields: Fields | None) -> VfaithDataset:
    """The pairs and perception items of a release folder, images materialised in the cache."""
    import pyarrow.parquet as pq

    from mmfaith.loaders.vfaith.rows import row_to_pair, row_to_perception

    images = (cache_dir or default_cache_dir()) / "images"
    images.mkdir(parents=True, exist_ok=True)
    shared = Shared()
    pairs, perception = [], []
    seen: set[str] = set()
    for name, entry in sorted(manifest["files"].items()):
        config = entry.get("config")
        if config not in ("pairs", "perception"):
            continue
        rows = (row for batch in pq.ParquetFile(folder / name).iter_batches(batch_size=64) for row in batch.to_pylist())
        for number, row in enumerate(rows):
            where = f"{folder / name} row {number}"
            if config == "pairs":
                record = row_to_pair(row)
                check("vfaith_pair", record, where, seen, f"; run `mmfaith verify {folder}`")
                original = cached_image(images, row["image_original"]["bytes"], record["image_original_sha256"], where)
                edited = cached_image(images, row["image_edited"]["bytes"], record["image_edited_sha256"], where)
                pairs.append(VfaithPair(keep_fields(record, fields, shared), original, edited))
            else:
                record = row_to_perception(row)
                check("vfaith_perception", record, where, seen, f"; run `mmfaith verify {folder}`")
                image = cached_image(images, row["image"]["bytes"], record["image_sha256"], where)
                perception.append(VfaithPerception(keep_fields(record, fields, shared), image))
    manifest_hash = sha256_file(folder / "manifest.json")[:16]
    return VfaithDataset(pairs, perception, dataset_id=f"release:{manifest['name']}",
                         revision=f"{manifest['tag']}+{manifest_hash}")
