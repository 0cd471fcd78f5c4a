"""Predictions read in two passes, for scorers whose memory must not grow with the answers (issue 34, a million items).

Contract
--------
- `ItemTable`: what `read_predictions` checks a line against, per item of the dataset in dataset order, held
  compactly: the item's id and position, its expected probes (equal tuples held once), its images' sha256 (raw
  digests, 32 bytes each: `raw_digests`) and its shown digest (raw). A scorer fills it in one pass over the dataset
  (`add`, or `add_raw` with the digests already raw), then holds no record; `probes`, `images` and `shown` are
  the mappings by id that `read_predictions` takes.
- `AnswerIndex` (what `read_predictions(..., index=table)` keeps in place of the kept lines): per (item, probe),
  the winning line's number, byte offset and length (numpy arrays indexed by the item's position and a probe
  number), whether it was asked without images, the family's `fact` of it (a few distinct values, e.g. the
  image perturbation it records: `facts()` gives those of the answers) and whether the (id, probe) had a failed
  call; a line of a file that cannot be read twice (a pipe) keeps its bytes. It is the `answered` mapping of the rules (key -> (line
  number, reference)), so `read_predictions` applies the same rules in the same order with either store.
- `kept_line(line, shared, scored_meta)`: a line as scorers read it (both passes and the one-pass reader).
- `AnswerIndex.lines(positions, scored_meta)`: pass 2, one chunk of items at a time: the chunk's answered lines
  read again by offset (sorted, `os.pread`), parsed and kept as the one-pass reader keeps them (`kept_line`), and
  its failed (id, probe)s: a `PredictionSet`'s `answered` and `failed` for those items only.
Memory: about 17 bytes per (item, probe) and the ids, whatever the responses' length.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np

from mmfaith.records import Shared

Key = tuple[str, str]
LineRef = tuple[int | bytes, int, bool, Any]
"""A kept answer of pass 1: (byte offset, length, asked without images, the family's `fact` of the line), the
line's bytes in place of its offset where the file cannot be read twice."""
_ANSWERED, _NO_IMAGE, _FAILED = 1, 2, 4


class ItemTable:
    """Per item, what its prediction lines are checked against (module docstring); `add` items in dataset order."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.position: dict[str, int] = {}
        self._probes: list[tuple[str, ...]] = []
        self._probe_tuples: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._images: list[bytes | None] = []
        self._shown: list[bytes | None] = []

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, item_id: str, probes: Sequence[str], images: Iterable[str] | None, shown: str | None) -> None:
        """The next item: its id, expected probes, images' sha256 (hex) and shown digest (hex)."""
        self.add_raw(item_id, probes, None if images is None else raw_digests(images),
                     None if shown is None else bytes.fromhex(shown))

    def add_raw(self, item_id: str, probes: Sequence[str], images: bytes | None, shown: bytes | None) -> None:
        """`add` with the digests raw (`raw_digests` of the images'), held as given: a scorer that kept them so in
        its first pass holds them once."""
        probes = tuple(probes)
        self.position[item_id] = len(self.ids)
        self.ids.append(item_id)
        self._probes.append(self._probe_tuples.setdefault(probes, probes))
        self._images.append(images)
        self._shown.append(shown)

    @property
    def probes(self) -> Mapping[str, tuple[str, ...]]:
        return _Column(self.position, self._probes, lambda probes: probes)

    @property
    def images(self) -> Mapping[str, set[str]]:
        return _Column(self.position, self._images,
                       lambda packed: {packed[i:i + 32].hex() for i in range(0, len(packed or b""), 32)})

    @property
    def shown(self) -> Mapping[str, str | None]:
        return _Column(self.position, self._shown, lambda digest: None if digest is None else digest.hex())


def raw_digests(digests: Iterable[str]) -> bytes:
    """sha256 hex digests as one bytes object (32 bytes each, in order): how an `ItemTable` holds an item's images."""
    return b"".join(bytes.fromhex(sha) for sha in digests)


class _Column(Mapping[str, Any]):
    """One field of an `ItemTable` by item id, decoded when looked up."""

    def __init__(self, position: Mapping[str, int], values: Sequence[Any], decode: Callable[[Any], Any]) -> None:
        self._position, self._values, self._decode = position, values, decode

    def __getitem__(self, item_id: str) -> Any:
        return self._decode(self._values[self._position[item_id]])

    def __iter__(self) -> Iterator[str]:
        return iter(self._position)

    def __len__(self) -> int:
        return len(self._position)


class AnswerIndex(MutableMapping[Key, tuple[int, LineRef]]):
    """The winning line of each (id, probe) of a predictions file, and its failed calls (module docstring)."""

    def __init__(self, table: ItemTable, path: os.PathLike[str] | str) -> None:
        self._table, self._path = table, path
        self._probes: dict[str, int] = {}
        self._number = np.zeros((len(table), 0), dtype=np.int64)
        self._offset = np.zeros((len(table), 0), dtype=np.int64)
        self._length = np.zeros((len(table), 0), dtype=np.int32)
        self._flags = np.zeros((len(table), 0), dtype=np.int8)
        self._fact = np.zeros((len(table), 0), dtype=np.int32)
        self._facts: dict[Any, int] = {}
        self._fact_values: list[Any] = []
        self._raw: dict[tuple[int, int], bytes] = {}
        self._count = 0

    def _cell(self, key: Key, make: bool = False) -> tuple[int, int] | None:
        column = self._probes.get(key[1])
        if column is None:
            if not make:
                return None
            column = self._probes[key[1]] = len(self._probes)
            self._number, self._offset, self._length, self._flags, self._fact = (
                np.pad(array, ((0, 0), (0, 1)))
                for array in (self._number, self._offset, self._length, self._flags, self._fact))
        return self._table.position[key[0]], column

    def __getitem__(self, key: Key) -> tuple[int, LineRef]:
        cell = self._cell(key)
        if cell is None or not self._flags[cell] & _ANSWERED:
            raise KeyError(key)
        where = self._raw.get(cell, int(self._offset[cell]))
        return int(self._number[cell]), (where, int(self._length[cell]), bool(self._flags[cell] & _NO_IMAGE),
                                         self._fact_values[int(self._fact[cell])])

    def __setitem__(self, key: Key, value: tuple[int, LineRef]) -> None:
        number, (where, length, no_image, fact) = value
        cell = self._cell(key, make=True)
        assert cell is not None
        if not self._flags[cell] & _ANSWERED:
            self._count += 1
        self._number[cell], self._length[cell] = number, length
        code = self._facts.get(fact)
        if code is None:
            code = self._facts[fact] = len(self._fact_values)
            self._fact_values.append(fact)
        self._fact[cell] = code
        if isinstance(where, bytes):
            self._raw[cell] = where
        else:
            self._offset[cell] = where
        self._flags[cell] = (self._flags[cell] & _FAILED) | _ANSWERED | (_NO_IMAGE if no_image else 0)

    def __delitem__(self, key: Key) -> None:
        raise TypeError("an answer index only gains answers")

    def __iter__(self) -> Iterator[Key]:
        probes = list(self._probes)
        for position, column in zip(*np.nonzero(self._flags & _ANSWERED)):
            yield self._table.ids[position], probes[column]

    def __len__(self) -> int:
        return self._count

    def fail(self, key: Key) -> None:
        """(id, probe) had a failed call (a failed one without an answer is `failed`)."""
        cell = self._cell(key, make=True)
        assert cell is not None
        self._flags[cell] |= _FAILED

    def failed(self) -> Collection[Key]:
        """The (id, probe)s with a failed call and no answer (a `PredictionSet`'s `failed`)."""
        return _Failed(self)

    def _failed_cells(self, rows: slice = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        flags = self._flags[rows]
        return np.nonzero((flags & (_FAILED | _ANSWERED)) == _FAILED)

    def no_image(self) -> set[bool]:
        """Whether each answer was asked without images, as a set (a file may not mix them)."""
        answered = self._flags[(self._flags & _ANSWERED) != 0]
        return {bool(flag & _NO_IMAGE) for flag in np.unique(answered & _NO_IMAGE).tolist()}

    def facts(self) -> set[Any]:
        """The distinct `fact`s of the answers."""
        codes = np.unique(self._fact[(self._flags & _ANSWERED) != 0])
        return {self._fact_values[code] for code in codes.tolist()}

    def lines(self, positions: range, scored_meta: Callable[[dict[str, Any]], dict[str, Any]] | None
              ) -> tuple[dict[Key, dict[str, Any]], frozenset[Key]]:
        """The answered lines (as `kept_line` keeps them) and failed (id, probe)s of the items at `positions`."""
        probes = list(self._probes)
        flags = self._flags[positions.start:positions.stop]
        cells = [(positions.start + int(row), int(column)) for row, column in zip(*np.nonzero(flags & _ANSWERED))]
        cells.sort(key=lambda cell: int(self._offset[cell]))
        shared, answered = Shared(), {}
        with open(self._path, "rb") as handle:
            for cell in cells:
                raw = self._raw.get(cell)
                if raw is None:
                    raw = os.pread(handle.fileno(), int(self._length[cell]), int(self._offset[cell]))
                line = json.loads(raw)
                answered[(self._table.ids[cell[0]], probes[cell[1]])] = kept_line(line, shared, scored_meta)
        failed = frozenset((self._table.ids[positions.start + int(row)], probes[int(column)])
                           for row, column in zip(*self._failed_cells(slice(positions.start, positions.stop))))
        return answered, failed


class _Failed(Collection[Key]):
    """An `AnswerIndex`'s failed (id, probe)s without an answer."""

    def __init__(self, index: AnswerIndex) -> None:
        self._index = index

    def __contains__(self, key: object) -> bool:
        index = self._index
        if not isinstance(key, tuple) or key[1] not in index._probes or key[0] not in index._table.position:
            return False
        return int(index._flags[index._cell(key)]) & (_FAILED | _ANSWERED) == _FAILED

    def __iter__(self) -> Iterator[Key]:
        probes = list(self._index._probes)
        for position, column in zip(*self._index._failed_cells()):
            yield self._index._table.ids[position], probes[column]

    def __len__(self) -> int:
        return len(self._index._failed_cells()[0])


RUN_ONLY_META = frozenset({"images", "shown_sha256", "attempts", "latency_s", "prompt_tokens", "completion_tokens"})
"""A run line's meta that only the reader checks or only run.json counts, never a scorer: left out of kept lines."""


def kept_line(line: dict[str, Any], shared: Shared,
              scored_meta: Callable[[dict[str, Any]], dict[str, Any]] | None) -> dict[str, Any]:
    """The line as scorers read it: its `response` and `meta` (always a dict, equal ones held once), without
    RUN_ONLY_META and null values (a scorer reads meta with .get), then through the family's `scored_meta`; the
    id, probe and model are the answered key and the set's model."""
    meta = {name: value for name, value in (line.get("meta") or {}).items()
            if value is not None and name not in RUN_ONLY_META}
    return {"response": line.get("response"), "meta": shared.value(scored_meta(meta) if scored_meta else meta)}
