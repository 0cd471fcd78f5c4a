"""Access to an SPD-Faith dataset for the evaluator: its pairs, their gold and their image files.

For now the source is a build dir (records.jsonl + images); release folders and Hub repos join
with the release issue, behind the same `open_spd_dataset`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_file
from mmfaith.jsonl import read_jsonl
from mmfaith.schema import schema_errors


@dataclass(frozen=True)
class SpdPair:
    """One pair: `record` is the gold (schemas/spd_faith_pair.schema.json); paths are absolute."""

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

    def by_id(self) -> dict[str, SpdPair]:
        return {pair.id: pair for pair in self.pairs}


def open_spd_dataset(path: Path) -> SpdDataset:
    """Open a build dir; every record is schema-checked and every image must exist."""
    records_path = path / "records.jsonl"
    if not records_path.is_file():
        raise MmfaithError(f"{path}: not an SPD-Faith build dir (no records.jsonl); pass --dataset BUILD_DIR.")
    pairs = []
    seen: set[str] = set()
    for number, record in read_jsonl(records_path):
        errors = schema_errors("spd_faith_pair", record)
        if errors:
            raise MmfaithError(f"{records_path}:{number}: not an SPD-Faith record: {'; '.join(errors[:3])}")
        if record["id"] in seen:
            raise MmfaithError(f"{records_path}:{number}: duplicate id {record['id']}.")
        seen.add(record["id"])
        pair = SpdPair(record, path / record["image_a"], path / record["image_b"])
        for image in (pair.image_a_path, pair.image_b_path):
            if not image.is_file():
                raise MmfaithError(f"{records_path}:{number}: image {image} is missing.")
        pairs.append(pair)
    return SpdDataset(pairs, dataset_id=f"build:{path.resolve().name}", revision=sha256_file(records_path)[:16])
