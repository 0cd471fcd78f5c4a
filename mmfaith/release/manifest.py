"""manifest.json of a release of any family, and `verify_release`, which re-checks a release against it.

The manifest names exactly what a release is: its family (and format `mmfaith-<family>-release/1`),
name and version, the mmfaith version that wrote it, the build it came from (content hashes and
recipe, no local paths, no times), what was kept and left out, the verification summary, every
file's sha256 and size, every shard's rows, and one digest per record (the sha256 of its canonical
record) so the next release can say which records were added, removed or changed. What a row holds
is the family's: its `ReleaseDeclaration` (release/declaration.py) checks each row read back.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes, sha256_file
from mmfaith.jsonl import canonical_json, read_json_object
from mmfaith.release.declaration import declaration_of, release_format

MANIFEST = "manifest.json"


def row_digest(record: dict[str, Any]) -> str:
    """The digest of one record as released: sha256 of its canonical record (image hashes included)."""
    return sha256_bytes(canonical_json(record).encode("utf-8"))


def file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The file's bytes: indented sorted JSON with a final newline (diff-friendly and reproducible)."""
    return (json.dumps(manifest, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def read_manifest(folder: Path, family: str | None = None) -> dict[str, Any]:
    """The manifest of a release folder of `family` (None: of the family it names); MmfaithError when it is
    missing, names another family, or is not of that family's format."""
    path = folder / MANIFEST
    if not path.is_file():
        raise MmfaithError(f"{folder}: not an mmfaith release (no {MANIFEST}); pass the folder `mmfaith release` wrote.")
    manifest = read_json_object(path, "pass the folder `mmfaith release` wrote.")
    named = manifest.get("family")
    if family is not None and named != family:
        raise MmfaithError(f"{path}: a release of family {named!r}, not {family!r}; pass a {family} release "
                           f"(or use the verbs of family {named!r}).")
    expected = release_format(family or str(named))
    if manifest.get("format") != expected:
        raise MmfaithError(f"{path}: format {manifest.get('format')!r} is not {expected!r}; "
                           "this mmfaith cannot read that release.")
    return manifest


def open_release(folder: Path, family: str, verify: bool = True) -> dict[str, Any]:
    """The manifest of a release about to be used (score, run, serve-reference, the loaders). With `verify`
    (the default, as `datasets` verifies its downloads) every shard is first checked against it: each listed
    shard inside the folder with its sha256 and size, no unlisted shard; MmfaithError listing what differs.
    `verify=False` skips the check (`mmfaith verify` checks everything, rows included)."""
    manifest = read_manifest(folder, family)
    if not verify:
        return manifest
    listed = _listed_files(folder / MANIFEST, manifest)
    problems = [f"{name}: shard not listed in {MANIFEST}" for name in files_under(folder)
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


def verify_release(folder: Path) -> VerifyReport:
    """Re-hash every file the manifest lists and check every row of every shard (`mmfaith verify`).

    Checks: every name the manifest lists is a relative path inside the release (no absolute path, no
    `..`, no symlink leading out): one that is not is a problem and is never opened or hashed; the
    manifest has its `files` and `rows` maps and every file entry its sha256 and size
    (MmfaithError, one line, when not: nothing can be checked against it); each listed file exists
    with its sha256 and size; no file under the folder is unlisted (manifest.json itself and
    top-level hidden entries such as .git or .cache aside); each shard's row count matches the
    manifest; every row read back passes its family's `check_row` (a valid record of its config, its
    images hashing to the record's sha256s) and its record's digest equals the manifest's. Returns every
    problem found (file, row and field named).
    """
    import pyarrow.parquet as pq

    manifest = read_manifest(folder)
    declaration = declaration_of(manifest["family"])
    problems: list[str] = []
    rows = 0
    listed = _listed_files(folder / MANIFEST, manifest)
    for name in files_under(folder):
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
                where = f"{name} row {number} (id {row.get('id')})"
                record, row_problems = declaration.check_row(where, entry["config"], row)
                problems.extend(row_problems)
                if record is not None and manifest["rows"].get(record["id"]) != row_digest(record):
                    problems.append(f"{where}: record digest differs from the manifest's rows entry.")
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


def files_under(folder: Path) -> list[str]:
    """Relative names of the files under a release folder, less manifest.json and top-level hidden entries."""
    return sorted(name for path in folder.rglob("*") if path.is_file()
                  and not (name := path.relative_to(folder).as_posix()).startswith(".") and name != MANIFEST)


def previous_manifest(source: str, family: str, subfolder: str = "") -> dict[str, Any]:
    """The manifest of the previous release of `family`: a local release folder, or `ORG/NAME[@REVISION]` on
    the Hub; with `subfolder`, the release in that folder of it (a family's folder in a suite release)."""
    if Path(source).is_dir():
        return read_manifest(Path(source) / subfolder, family)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    repo_id, _, revision = source.partition("@")
    try:
        path = hf_hub_download(repo_id, f"{subfolder}/{MANIFEST}" if subfolder else MANIFEST, repo_type="dataset",
                               revision=revision or None)
    except (HfHubHTTPError, LocalEntryNotFoundError, ValueError) as exc:
        raise MmfaithError(f"--previous {source}: no local release folder of that name, and its {MANIFEST} "
                           f"cannot be fetched from the Hub ({exc.__class__.__name__}).") from exc
    return read_manifest(Path(path).parent, family)


def changelog(previous: dict[str, Any] | None, digests: dict[str, str]) -> dict[str, Any] | None:
    """Ids added, removed and changed (same id, other digest) since `previous`; None without one."""
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
