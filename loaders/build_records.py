"""A build dir's records.jsonl read on several processes: parsed, checked and cut to what the caller keeps by block.

Contract (`read_build_records(path, schema_name, what, check, keep, workers)`)
--------------------------------------------------------------------------------
- The file is cut into blocks of about BLOCK_BYTES on line boundaries (mmfaith/jsonl.py `line_blocks`), each
  read, parsed (`read_block`: `read_jsonl`'s rules), schema-checked (`schema_name`, mmfaith/schema.py), checked
  by the family's `check(record, where)` (its images exist, say) and reduced to `keep(record, shared)` on one of
  `workers` forked processes (mmfaith/ordered_pool.py; with one, here). Only what `keep` returns comes back from
  a worker (pickled): keep it small (the scored fields, image paths as the record's relative strings). `shared`
  (mmfaith/records.py) holds equal values once within a block.
- `kept` is every record's `keep` in file order; `sha256` is the file's, from the same single read of its bytes.
- `record_chunks(path, size, sha256)`: the same file read again after it was checked, `size` records at a time
  (their raw lines, with the position of the first), for a scorer that holds only a chunk of records at a time;
  the file must still hash to `sha256` (else a one-line MmfaithError once read: it changed while scored).
- `TwoPass`: a dataset as such a scorer reads it (a family's loader makes it): what it kept of every item in
  the first pass (`expected`), then `chunks(size)` and `items(payload)` (on any process) to read its items
  again a chunk at a time, from a build dir's records.jsonl, or from a release's items held whole.
- Errors are those of reading the file line by line on one process, in the same order, each one line naming the
  file and line (`where` is "FILE:LINE"): not JSON or not an object, not `what` by the schema, a second record
  with an id already seen (checked here, in file order: it needs every earlier line), then the family's check.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from mmfaith.errors import MmfaithError
from mmfaith.gc_pause import gc_paused
from mmfaith.jsonl import LineBlock, line_blocks, read_block
from mmfaith.loaders.source import Source, resolve
from mmfaith.ordered_pool import ordered_map
from mmfaith.records import Shared
from mmfaith.schema import check_loaded_schema, check_new_id

Kept = TypeVar("Kept")
Item = TypeVar("Item")
BLOCK_BYTES = 1 << 20
"""Bytes of records.jsonl parsed at a time by one worker (about 500 SPD-Faith or CRM records)."""


@dataclass(frozen=True)
class BuildRecords(Generic[Kept]):
    """What `read_build_records` gives: each record's kept value in file order, and the file's sha256."""

    kept: list[Kept]
    sha256: str


@dataclass(frozen=True)
class _Failure:
    """A block's first bad line: its message, and for a record that passed its schema, its id and where it is (the
    id is checked for a duplicate before the message is raised: that is the line's first error)."""

    message: str
    record_id: str | None = None
    where: str = ""


@dataclass(frozen=True)
class _Block(Generic[Kept]):
    """One block's reading: (line number, id, kept) of its good records up to its first bad line, if any."""

    records: list[tuple[int, str, Kept]]
    failure: _Failure | None


def read_build_records(path: Path, schema_name: str, what: str, check: Callable[[dict[str, Any], str], None],
                       keep: Callable[[dict[str, Any], Shared], Kept], workers: int) -> BuildRecords[Kept]:
    """Every record of the JSON Lines file `path`, checked and kept on `workers` processes (module docstring)."""
    digest = hashlib.sha256()
    seen: set[str] = set()
    kept: list[Kept] = []

    def read(block: LineBlock) -> _Block[Kept]:
        records: list[tuple[int, str, Kept]] = []
        shared = Shared()
        try:
            for number, record in read_block(block):
                where = f"{path}:{number}"
                check_loaded_schema(schema_name, record, where, what)
                try:
                    check(record, where)
                except MmfaithError as exc:
                    return _Block(records, _Failure(str(exc), record["id"], where))
                records.append((number, record["id"], keep(record, shared)))
        except MmfaithError as exc:
            return _Block(records, _Failure(str(exc)))
        return _Block(records, None)

    with gc_paused():  # many objects, no garbage (mmfaith/gc_pause.py)
        for block in ordered_map(read, line_blocks(path, BLOCK_BYTES, digest=digest), workers):
            for number, record_id, value in block.records:
                check_new_id(record_id, f"{path}:{number}", seen)
                kept.append(value)
            if block.failure is not None:
                if block.failure.record_id is not None:
                    check_new_id(block.failure.record_id, block.failure.where, seen)
                raise MmfaithError(block.failure.message)
    return BuildRecords(kept, digest.hexdigest())


def record_chunks(path: Path, size: int, sha256: str) -> Iterator[tuple[int, list[bytes]]]:
    """(position of the first, raw lines) of `size` records at a time, read again (module docstring): the lines
    `read_build_records` reads as records (complete and not blank), in file order."""
    digest, position, chunk = hashlib.sha256(), 0, []
    with open(path, "rb") as handle:
        for raw in handle:
            digest.update(raw)
            if raw.endswith(b"\n") and raw.strip():
                chunk.append(raw)
                if len(chunk) == size:
                    yield position, chunk
                    position, chunk = position + size, []
    if chunk:
        yield position, chunk
    if digest.hexdigest() != sha256:
        raise MmfaithError(f"{path}: changed while it was scored (its sha256 is not that of its first read); "
                           "score again.")


@dataclass(frozen=True)
class TwoPass(Generic[Item, Kept]):
    """A dataset read in two passes, never held whole (module docstring): `expected` is what the first pass kept of
    every item, in dataset order; `chunks(size)` gives (position of the first, payload) of `size` items at a time,
    read again, and `items(payload)` the chunk's items: `make(record, shared)` of each record of `records` (a build
    dir's records.jsonl, hashing to `sha256`), or the slice of `held` (a release's items, held whole)."""

    dataset_id: str
    revision: str
    expected: list[Kept]
    records: Path | None = None
    sha256: str = ""
    make: Callable[[dict[str, Any], Shared], Item] | None = None
    held: list[Item] | None = None

    def chunks(self, size: int) -> Iterator[tuple[int, Any]]:
        if self.held is not None:
            held = self.held
            yield from ((start, held[start:start + size]) for start in range(0, len(held), size))
        else:
            assert self.records is not None
            yield from record_chunks(self.records, size, self.sha256)

    def items(self, payload: Any) -> list[Item]:
        if self.held is not None:
            return payload
        assert self.make is not None
        shared = Shared()
        return [self.make(json.loads(raw), shared) for raw in payload]


def open_two_pass(path: Path | str, family: str, held: Callable[[Source], tuple[str, str, list[Item]]],
                  read_build: Callable[[Path], BuildRecords[Kept]],
                  make: Callable[[Path], Callable[[dict[str, Any], Shared], Item]],
                  expect: Callable[[Item], Kept]) -> TwoPass[Item, Kept]:
    """A family's dataset as a TwoPass: `path` resolved (loaders/source.py, verified); a release folder or Hub id
    opened whole by `held(found)` (its id, revision and items), `expect(item)` kept of each; a build dir's records
    checked by `read_build(build)` (keeping `expect` of each) and read again a chunk at a time by `make(build)`."""
    found = resolve(path, family, verify=True)
    if found.kind == "release":
        dataset_id, revision, items = held(found)
        return TwoPass(dataset_id, revision, [expect(item) for item in items], held=items)
    build, read = found.path, read_build(found.path)
    return TwoPass(f"build:{build.resolve().name}", read.sha256[:16], read.kept, build / "records.jsonl",
                   read.sha256, make(build))
