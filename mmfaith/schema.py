"""JSON Schema validation of the records that pass between stages (schemas/*.schema.json).

Every check goes through `schema_errors`: a record is first checked by the schema compiled once
(jsonschema-rs, `compiled(name)`), which only says valid or not, fast; only a record it finds
invalid is checked again by the detailed validator (jsonschema, `validator(name)`), whose messages
('field.path: message') are the ones users see. Score, load, verify, release and import all check
records here.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import jsonschema_rs

from mmfaith.errors import MmfaithError

if TYPE_CHECKING:  # the detailed validator loads only when a record is invalid (about 0.3 s of every run's start)
    import jsonschema


@lru_cache(maxsize=None)
def _schema(schema_name: str) -> dict[str, Any]:
    text = files("mmfaith.schemas").joinpath(f"{schema_name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@lru_cache(maxsize=None)
def validator(schema_name: str) -> jsonschema.protocols.Validator:
    """The detailed validator for schemas/<schema_name>.schema.json (its messages name every violation)."""
    import jsonschema

    schema = _schema(schema_name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@lru_cache(maxsize=None)
def compiled(schema_name: str) -> jsonschema_rs.Validator:
    """The schema compiled once (jsonschema-rs, formats checked): a fast valid-or-not verdict."""
    return jsonschema_rs.validator_for(_schema(schema_name), validate_formats=True)


def schema_errors(schema_name: str, record: Any) -> list[str]:
    """Every violation of the schema, each as 'field.path: message', sorted for stable output; [] when valid."""
    if compiled(schema_name).is_valid(record):
        return []
    found = validator(schema_name).iter_errors(record)
    return sorted(f"{'.'.join(str(p) for p in e.absolute_path) or '<record>'}: {e.message}" for e in found)


def check_record(schema_name: str, record: Any, where: str) -> None:
    """Raise MmfaithError naming `where` (file:line or record id) if the record breaks its schema."""
    errors = schema_errors(schema_name, record)
    if errors:
        raise MmfaithError(f"{where}: does not match schema {schema_name}: " + "; ".join(errors[:5]))


def check_loaded_record(schema_name: str, record: Any, where: str, seen: set[str], what: str,
                        advice: str = "") -> None:
    """A record read back from a build dir or release: schema-valid (`check_loaded_schema`) and not a second
    record with an id already seen (`check_new_id`; its id is added to `seen`)."""
    check_loaded_schema(schema_name, record, where, what, advice)
    check_new_id(record["id"], where, seen)


def check_loaded_schema(schema_name: str, record: Any, where: str, what: str, advice: str = "") -> None:
    """MmfaithError naming `where` and `what` the record should be ("an SPD-Faith record"), with `advice`
    appended, when the record breaks its schema."""
    errors = schema_errors(schema_name, record)
    if errors:
        raise MmfaithError(f"{where}: not {what}: {'; '.join(errors[:3])}{advice}.")


def check_new_id(record_id: str, where: str, seen: set[str]) -> None:
    """MmfaithError naming `where` when `record_id` is in `seen` (a second record with one id); else it is added."""
    if record_id in seen:
        raise MmfaithError(f"{where}: duplicate id {record_id}.")
    seen.add(record_id)
