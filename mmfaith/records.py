"""Records held small: only the fields their reader uses, and equal values held once.

A scorer reads a few fields of each record (ids, gold, options, the source image, images' sha256);
the rest (build provenance, attribution, edit history, verification) is most of a record's
memory, about 10 KB of Python objects per VFaith record (docs/scale.md). Loaders take `fields` and
keep only those, after the record's schema check and image lookup. What is kept repeats across
records (option lists, a source image's fields, a run's generation settings): `Shared` holds each
distinct small JSON object or list once. Values held here are read, never changed.
"""
from __future__ import annotations

from collections.abc import Collection
from typing import Any

Fields = Collection[str]
"""Top-level field names, or "name.sub" for one field of a nested object (the object keeps only those)."""
SHARED_MAX_CHARS = 1024
"""The longest value (its repr) `Shared` looks up; longer ones are rarely repeated and kept as they are."""


class Shared:
    """Equal JSON objects and lists held once: `value(v)` is the first value equal to `v` seen, by its repr (as
    strict as its JSON for a JSON value: 1, 1.0 and True stay apart; a third of json.dumps's cost)."""

    def __init__(self) -> None:
        self._seen: dict[str, Any] = {}

    def value(self, value: Any) -> Any:
        if not isinstance(value, (dict, list)):
            return value
        key = repr(value)
        return value if len(key) > SHARED_MAX_CHARS else self._seen.setdefault(key, value)


def keep_fields(record: dict[str, Any], fields: Fields | None, shared: Shared | None = None) -> dict[str, Any]:
    """`record` with only `fields` (absent ones stay absent), each object or list through `shared`; the record
    itself when `fields` is None."""
    if fields is None:
        return record
    kept: dict[str, Any] = {}
    for name in fields:
        head, _, sub = name.partition(".")
        if head not in record:
            continue
        value = record[head]
        if not sub or not isinstance(value, dict):
            kept[head] = value
        elif sub in value:
            kept.setdefault(head, {})[sub] = value[sub]
    if shared is not None:
        kept = {name: shared.value(value) for name, value in kept.items()}
    return kept
