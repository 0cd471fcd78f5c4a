"""What a family declares for `mmfaith release`, `verify` and the loaders: its release format, nothing shared.

The shared writer (release/writer.py), manifest and verifier (release/manifest.py) and the loaders'
source resolver (loaders/source.py) know no family: they reach one through its `ReleaseDeclaration`,
which the family's `FamilyParts.release` returns (mmfaith/families.py). A declaration lives beside the
family's other parts (loaders/<family>/release.py) and says:

- `family`: the registry name; the manifest's `family` and format `mmfaith-<family>-release/1`.
- `noun`: what one released record is, plural ("pairs", "questions", "items"), for the summaries.
- `read_build(build) -> records`: every record of a build dir, schema-checked, each image present and
  hashing to its record's sha256 (MmfaithError naming file and line otherwise).
- `select(records, include, allow_noderivs, build) -> (kept, excluded)`: what ships, and the count left
  out per reason (usually `writer.select_records` with the family's noun and derivative rule).
- `units(records) -> {config: [(record, part), ...]}`: the rows of each config, one unit per row (`part`
  is what the row shows of the record, e.g. CRM's variant; None when the row is the whole record). Every
  config listed gets at least one shard; list only the configs that ship.
- `features(config)`: the `datasets.Features` of a config's rows.
- `to_row(build, config, unit) -> row`: one row, its images read from the build now (the writer streams
  row group by row group, so nothing holds a shard's images at once).
- `check_row(where, config, row) -> (record or None, problems)`: a row read back (for `verify`): its
  record, valid, in its config, its images hashing to the record's sha256s. The digest check is shared.
- `card(facts: CardFacts) -> str`: README.md of the release (the family's template, a pure function).
- `counted(record) -> bool`: the records the verification summary counts (default: all).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Record = dict[str, Any]
Unit = tuple[Record, Any]


@dataclass(frozen=True)
class CardFacts:
    """What a card states; all of it also lies in the manifest or the rows."""

    name: str
    version: str
    include: str
    allow_noderivs: bool
    rows: dict[str, int]
    excluded: dict[str, int]
    records: list[Record]
    build: dict[str, Any]
    verification: dict[str, Any]
    changelog: dict[str, Any] | None
    data_files: dict[str, str]


@dataclass(frozen=True)
class ReleaseDeclaration:
    """A family's release format (module docstring)."""

    family: str
    noun: str
    read_build: Callable[[Path], list[Record]]
    select: Callable[[list[Record], str, bool, Path], tuple[list[Record], dict[str, int]]]
    units: Callable[[list[Record]], dict[str, list[Unit]]]
    features: Callable[[str], Any]
    to_row: Callable[[Path, str, Unit], dict[str, Any]]
    check_row: Callable[[str, str, dict[str, Any]], tuple[Record | None, list[str]]]
    card: Callable[[CardFacts], str]
    counted: Callable[[Record], bool] = lambda record: True

    @property
    def format(self) -> str:
        """The manifest's `format`."""
        return release_format(self.family)


def release_format(family: str) -> str:
    """The manifest format of a family's release."""
    return f"mmfaith-{family}-release/1"


def declaration_of(family: str) -> ReleaseDeclaration:
    """The release declaration of a registered family; a one-line error when it has none."""
    from mmfaith import families

    return families.get(family).part("release", "release format")()


def checked_records(build: Path, family: str, name: str, check: Callable[[Record, str, set[str]], None],
                    images: Callable[[Record], list[tuple[str, str]]], seen: set[str] | None = None) -> list[Record]:
    """The records of `build`/`name` for a declaration's `read_build`: each passed to `check(record, where, seen)`
    (schema and unique id; raises), and each of its `images(record)` (relative path, sha256) present and hashing
    to its sha256; a one-line MmfaithError naming file and line otherwise."""
    from mmfaith.errors import MmfaithError
    from mmfaith.images import sha256_file
    from mmfaith.jsonl import read_jsonl

    path = build / name
    if not path.is_file():
        raise MmfaithError(f"{build}: no {name}; pass the --out of `mmfaith build {family}`.")
    seen = set() if seen is None else seen
    records = []
    for number, record in read_jsonl(path):
        check(record, f"{path}:{number}", seen)
        for relative, digest in images(record):
            image = build / relative
            if not image.is_file():
                raise MmfaithError(f"{path}:{number}: image {image} is missing; restore the build's images.")
            if sha256_file(image) != digest:
                raise MmfaithError(f"{path}:{number}: image {image} does not match its sha256; the image was changed.")
        records.append(record)
    return records
