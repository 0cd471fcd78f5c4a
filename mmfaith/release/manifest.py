"""manifest.json of an SPD-Faith release, and `verify_release`, which re-checks a release against it.

The manifest names exactly what a release is: its name and version, the mmfaith version that
wrote it, the build it came from (content hashes and recipe, no local paths, no times), what was
kept and left out, the verification summary, every file's sha256 and size, every shard's rows, and
one digest per pair (the sha256 of its canonical record) so the next release can say which pairs
were added, removed or changed.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes, sha256_file
from mmfaith.jsonl import canonical_json, read_json_object
from mmfaith.loaders.spd_faith.rows import row_to_record
from mmfaith.schema import schema_errors

MANIFEST = "manifest.json"
FORMAT = "mmfaith-spd-faith-release/1"


def row_digest(record: dict[str, Any]) -> str:
    """The digest of one pair as released: sha256 of its canonical record (image hashes included)."""
    return sha256_bytes(canonical_json(record).encode("utf-8"))


def file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The file's bytes: indented sorted JSON with a final newline (diff-friendly and reproducible)."""
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_manifest(folder: Path, format: str = FORMAT) -> dict[str, Any]:
    """The manifest of a release folder; MmfaithError when it is missing or not of `format` (a family's)."""
    path = folder / MANIFEST
    if not path.is_file():
        raise MmfaithError(f"{folder}: not an mmfaith release (no {MANIFEST}); pass the folder `mmfaith release` wrote.")
    manifest = read_json_object(path, "pass the folder `mmfaith release` wrote.")
    if manifest.get("format") != format:
        raise MmfaithError(f"{path}: format {manifest.get('format')!r} is not {format!r}; "
                           "this mmfaith cannot read that release.")
    return manifest


def open_release(folder: Path, format: str = FORMAT, verify: bool = True) -> dict[str, Any]:
    """The manifest of a release about to be used (score, run, serve-reference, the loaders). With `verify`
    (the default, as `datasets` verifies its downloads) every shard is first checked against it: each listed
    shard inside the folder with its sha256 and size, no unlisted shard; MmfaithError listing what differs.
    `verify=False` skips the check (`mmfaith verify` checks everything, rows included)."""
    manifest = read_manifest(folder, format)
    if not verify:
        return manifest
    listed = _listed_files(folder / MANIFEST, manifest)
    problems = [f"{name}: shard not listed in {MANIFEST}" for name in _files_under(folder)
                if name.endswith(".parquet") and name not in listed]
    for name, entry in sorted(listed.items()):
        if "config" not in entry:
            continue
        outside = _outside(folder, name)
        if outside or not (folder / name).is_file():
            problems.append(f"{name}: {outside or 'missing'}")
        elif file_entry(folder / name) != {"sha256": entry["sha256"], "bytes": entry["bytes"]}:
            problems.append(f"{name}: sha256 differs from the manifest's (the shard was changed)")
    if problems:
        raise MmfaithError(f"{folder}: the release does not match its {MANIFEST} ({'; '.join(problems[:5])}"
                           f"{'; ...' if len(problems) > 5 else ''}); restore it (`mmfaith verify` lists every "
                           "problem), or pass verify=False to use it anyway.")
    return manifest


@dataclass(frozen=True)
class VerifyReport:
    """What `verify_release` checked; `problems` is empty when the release is intact."""

    files: int
    rows: int
    problems: list[str]


def verify_release(folder: Path, format: str = FORMAT,
                   check_row: Callable[[str, dict[str, Any], dict[str, Any], dict[str, str]], list[str]] | None = None
                   ) -> VerifyReport:
    """Re-hash every file the manifest lists and schema-check every row of every shard.

    Checks: every name the manifest lists is a relative path inside the release (no absolute path, no
    `..`, no symlink leading out): one that is not is a problem and is never opened or hashed; the
    manifest has its `files` and `rows` maps and every file entry its sha256 and size
    (MmfaithError, one line, when not: nothing can be checked against it); each listed file exists
    with its sha256 and size; no file under the folder is unlisted (manifest.json itself and
    top-level hidden entries such as .git or .cache aside); each shard's row count, config and split match the manifest; every row read back is
    a valid SPD-Faith record of its config, its two images hash to the record's image_*_sha256,
    and its digest equals the manifest's. Returns every problem found (file, row and field named).
    Another family's release passes its manifest `format` and its `check_row(where, entry, row, digests)`
    (the problems of one row; SPD-Faith's `_check_row` by default).
    """
    import pyarrow.parquet as pq

    manifest = read_manifest(folder, format)
    check = check_row or _check_row
    problems: list[str] = []
    rows = 0
    listed = _listed_files(folder / MANIFEST, manifest)
    for name in _files_under(folder):
        if name not in listed:
            kind = "shard" if name.endswith(".parquet") else "file"
            problems.append(f"{name}: {kind} not listed in {MANIFEST}; remove it or re-run `mmfaith release`.")
    for name, entry in sorted(listed.items()):
        path = folder / name
        outside = _outside(folder, name)
        if outside:
            problems.append(f"{name}: {outside}; a release lists only its own files (re-run `mmfaith release`).")
            continue
        if not path.is_file():
            problems.append(f"{name}: listed in {MANIFEST} but missing.")
            continue
        actual = file_entry(path)
        if actual != {"sha256": entry["sha256"], "bytes": entry["bytes"]}:
            problems.append(f"{name}: sha256 {actual['sha256'][:16]}... ({actual['bytes']} bytes) differs from the "
                            f"manifest's {entry['sha256'][:16]}... ({entry['bytes']} bytes): the file was changed.")
            continue
        if "config" in entry:
            found = (row for batch in pq.ParquetFile(path).iter_batches(batch_size=64) for row in batch.to_pylist())
            count = 0
            for number, row in enumerate(found):
                count += 1
                problems.extend(check(f"{name} row {number} (id {row.get('id')})", entry, row, manifest["rows"]))
            if count != entry["rows"]:
                problems.append(f"{name}: {count} rows, the manifest says {entry['rows']}.")
            rows += count
    return VerifyReport(files=len(listed), rows=rows, problems=problems)


def _listed_files(path: Path, manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The manifest's `files` map, each entry with its sha256 and bytes; MmfaithError naming what is missing."""
    fix = "the manifest was edited or cut: restore it, or re-run `mmfaith release`."
    for key in ("files", "rows"):
        if not isinstance(manifest.get(key), dict):
            raise MmfaithError(f"{path}: no '{key}' map; {fix}")
    for name, entry in sorted(manifest["files"].items()):
        lacking = [key for key, kind in (("sha256", str), ("bytes", int)) + ((("rows", int),) if isinstance(entry, dict)
                   and "config" in entry else ()) if not isinstance(entry, dict) or not isinstance(entry.get(key), kind)]
        if lacking:
            raise MmfaithError(f"{path}: files.{name} lacks {', '.join(lacking)}; {fix}")
    return manifest["files"]


def _outside(folder: Path, name: str) -> str | None:
    """Why a listed name is not a file of the release folder (absolute, `..`, a symlink out), None when it is one."""
    parts = Path(name).parts
    if Path(name).is_absolute() or name.startswith(("/", "\\")):
        return "an absolute path, outside the release"
    if ".." in parts or "\\" in name:
        return "a path leading out of the release ('..')"
    # A Hub snapshot's files are symlinks into the repo's own cache (snapshots/REV/... -> ../../blobs/...).
    root = folder.parent.parent if folder.parent.name == "snapshots" else folder
    if not (folder / name).resolve().is_relative_to(root.resolve()):
        return "a symlink leading out of the release"
    return None


def _files_under(folder: Path) -> list[str]:
    """Relative names of the files under a release folder, less manifest.json and top-level hidden entries."""
    return sorted(name for path in folder.rglob("*") if path.is_file()
                  and not (name := path.relative_to(folder).as_posix()).startswith(".") and name != MANIFEST)


def _check_row(where: str, entry: dict[str, Any], row: dict[str, Any], digests: dict[str, str]) -> list[str]:
    """Problems of one shard row: readable as a record, valid, in its config, images and digest as listed."""
    try:
        record = row_to_record(row)
    except (KeyError, TypeError, ValueError) as exc:
        return [f"{where}: cannot be read as a record ({exc!r})."]
    problems = []
    errors = schema_errors("spd_faith_pair", record)
    if errors:
        problems.append(f"{where}: not a valid SPD-Faith record: {'; '.join(errors[:3])}")
    if record["subset"] != entry["config"]:
        problems.append(f"{where}: subset {record['subset']!r} in config {entry['config']!r}.")
    for side in ("image_a", "image_b"):
        if sha256_bytes(row[side]["bytes"] or b"") != record[f"{side}_sha256"]:
            problems.append(f"{where}: {side} bytes do not hash to {side}_sha256.")
    if digests.get(record["id"]) != row_digest(record):
        problems.append(f"{where}: record digest differs from the manifest's rows entry.")
    return problems


def previous_manifest(source: str) -> dict[str, Any]:
    """The manifest of the previous release: a local release folder, or `ORG/NAME[@REVISION]` on the Hub."""
    if Path(source).is_dir():
        return read_manifest(Path(source))
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    repo_id, _, revision = source.partition("@")
    try:
        path = hf_hub_download(repo_id, MANIFEST, repo_type="dataset", revision=revision or None)
    except (HfHubHTTPError, LocalEntryNotFoundError, ValueError) as exc:
        raise MmfaithError(f"--previous {source}: no local release folder of that name, and its {MANIFEST} "
                           f"cannot be fetched from the Hub ({exc.__class__.__name__}).") from exc
    return read_manifest(Path(path).parent)


def changelog(previous: dict[str, Any] | None, digests: dict[str, str]) -> dict[str, Any] | None:
    """Pairs added, removed and changed (same id, other digest) since `previous`; None without one."""
    if previous is None:
        return None
    before = previous["rows"]
    return {
        "previous_name": previous["name"],
        "previous_version": previous["version"],
        "added": sorted(set(digests) - set(before)),
        "removed": sorted(set(before) - set(digests)),
        "changed": sorted(key for key in set(digests) & set(before) if digests[key] != before[key]),
    }
