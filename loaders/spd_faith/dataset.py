"""Access to an SPD-Faith dataset for the evaluator: its pairs, their gold and their image files.

`open_spd_dataset(path)` reads a build dir (records.jsonl + images), a release folder (written by
`mmfaith release`: manifest.json + parquet shards; its images are written once to a
content-addressed cache folder so that every SpdPair still has two image files), or a Hub dataset
repo id `ORG/NAME[@REVISION]` of an mmfaith release (downloaded with huggingface_hub, then read as
a release folder).
`open_spd_source(path, fields, workers, expect)` reads the same pairs in two passes for a scorer that holds a chunk
of them at a time (loaders/build_records.py `TwoPass`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from mmfaith.cache import cache_dir as default_cache_dir
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_file
from mmfaith.records import Fields, Shared, keep_fields
from mmfaith.loaders.build_records import BuildRecords, TwoPass, open_two_pass, read_build_records
from mmfaith.loaders.release_files import cached_image
from mmfaith.loaders.source import Source, resolve
from mmfaith.schema import check_loaded_record

Kept = TypeVar("Kept")


@dataclass(frozen=True)
class SpdPair:
    """One pair: `record` is the gold (schemas/spd_faith_pair.schema.json); paths are absolute."""

    NOUN: ClassVar[str] = "pair"  # what `mmfaith serve-reference` counts

    record: dict[str, Any]
    image_a_path: Path
    image_b_path: Path

    @property
    def id(self) -> str:
        return self.record["id"]

    @property
    def source_key(self) -> str:
        """The source image the pair was made from: the unit of the bootstrap (pairs of one image are not independent)."""
        source = self.record["source"]
        return f"{source['dataset']}/{source['file_name']}"


@dataclass(frozen=True)
class SpdDataset:
    pairs: list[SpdPair]
    dataset_id: str
    revision: str

    @property
    def items(self) -> list[SpdPair]:
        """The pairs, as the shared run engine and reference server name a dataset's items."""
        return self.pairs

    def by_id(self) -> dict[str, SpdPair]:
        return {pair.id: pair for pair in self.pairs}




def open_spd_dataset(path: Path, cache_dir: Path | None = None, verify: bool = True,
                     fields: Fields | None = None, workers: int = 1) -> SpdDataset:
    """Open a build dir, a release folder or a Hub repo id; every record is schema-checked and every image exists;
    with `fields`, each record keeps only those once checked (mmfaith/records.py). A build dir's records.jsonl is
    read on `workers` forked processes (loaders/build_records.py: the same pairs and errors whatever the number).

    `cache_dir` is where a release's images are written (default: `mmfaith.cache.cache_dir()`), as
    images/<sha256>.png; an image is written only when absent, and its bytes
    are checked against the record's hash first.
    """
    found = resolve(path, "spd-faith", verify=verify)
    if found.kind == "release":
        return _open_release(found.path, found.manifest, cache_dir, fields)
    return _open_build_dir(found.path, fields, workers)


def _open_build_dir(path: Path, fields: Fields | None, workers: int) -> SpdDataset:
    read = _read_build(path, fields, workers, lambda pair, image_a, image_b: (pair.record, image_a, image_b))
    pairs = [SpdPair(record, path / image_a, path / image_b) for record, image_a, image_b in read.kept]
    return SpdDataset(pairs, dataset_id=f"build:{path.resolve().name}", revision=read.sha256[:16])


def _read_build(path: Path, fields: Fields | None, workers: int,
                keep: Callable[[SpdPair, str, str], Kept]) -> BuildRecords[Kept]:
    """records.jsonl of a build dir, every record checked (its images exist) and made a pair: `keep(pair, its two
    images' paths relative to the build dir)` kept."""
    def images_exist(record: dict[str, Any], where: str) -> None:
        for side in ("image_a", "image_b"):
            if not (path / record[side]).is_file():
                raise MmfaithError(f"{where}: image {path / record[side]} is missing.")

    def kept(record: dict[str, Any], shared: Shared) -> Kept:
        return keep(_pair(path, fields, record, shared), record["image_a"], record["image_b"])

    return read_build_records(path / "records.jsonl", "spd_faith_pair", "an SPD-Faith record", images_exist, kept,
                              workers)


def _pair(path: Path, fields: Fields | None, record: dict[str, Any], shared: Shared) -> SpdPair:
    return SpdPair(keep_fields(record, fields, shared), path / record["image_a"], path / record["image_b"])


def open_spd_source(path: Path, fields: Fields | None, workers: int,
                    expect: Callable[[SpdPair], Kept]) -> TwoPass[SpdPair, Kept]:
    """`open_spd_dataset`'s pairs in two passes (loaders/build_records.py `TwoPass`): a build dir's records checked
    on `workers` processes keeping `expect(pair)` of each, then read again a chunk at a time; a release folder or
    Hub id is opened whole once and held."""
    return open_two_pass(path, "spd-faith", lambda found: _held(found, fields),
                         lambda build: _read_build(build, fields, workers, lambda pair, *_: expect(pair)),
                         lambda build: lambda record, shared: _pair(build, fields, record, shared), expect)


def _held(found: Source, fields: Fields | None) -> tuple[str, str, list[SpdPair]]:
    dataset = _open_release(found.path, found.manifest, None, fields)
    return dataset.dataset_id, dataset.revision, dataset.pairs


def _check_record(record: dict[str, Any], where: str, seen: set[str], advice: str = "") -> None:
    """Schema-valid and not a second record with an id already seen (added to `seen`)."""
    check_loaded_record("spd_faith_pair", record, where, seen, "an SPD-Faith record", advice)


def _open_release(folder: Path, manifest: dict[str, Any], cache_dir: Path | None, fields: Fields | None) -> SpdDataset:
    """The pairs of every config of a release folder, images materialised in the cache."""
    import pyarrow.parquet as pq

    from mmfaith.loaders.spd_faith.rows import row_to_record

    images = (cache_dir or default_cache_dir()) / "images"
    images.mkdir(parents=True, exist_ok=True)
    pairs = []
    seen: set[str] = set()
    shared = Shared()
    for name, entry in sorted(manifest["files"].items()):
        if "config" not in entry:
            continue
        rows = (row for batch in pq.ParquetFile(folder / name).iter_batches(batch_size=64) for row in batch.to_pylist())
        for number, row in enumerate(rows):
            where = f"{folder / name} row {number}"
            record = row_to_record(row)
            _check_record(record, where, seen, f"; run `mmfaith verify {folder}`")
            paths = [cached_image(images, row[side]["bytes"], record[f"{side}_sha256"], f"{where} {side}")
                     for side in ("image_a", "image_b")]
            pairs.append(SpdPair(keep_fields(record, fields, shared), paths[0], paths[1]))
    manifest_hash = sha256_file(folder / "manifest.json")[:16]
    return SpdDataset(pairs, dataset_id=f"release:{manifest['name']}", revision=f"{manifest['tag']}+{manifest_hash}")
