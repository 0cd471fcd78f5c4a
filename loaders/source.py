"""One resolver for every family's data sources: a Hub repo id (with a revision), a release folder or a build dir.

`resolve(source, family, revision=None, verify=True) -> Source` is what every loader (`open_*_dataset`
for the evaluator, `load_*` for `datasets` users) calls first, so all of them accept the same three
homes, refuse the same things and say so in the same words:

- a local folder with manifest.json: a release, of `family` (its manifest names the family and format);
  with `verify` its shards are first checked against the manifest (release/manifest.py `open_release`);
- a local folder with records.jsonl: a build dir (whatever its records' verification status);
- `ORG/NAME` or `ORG/NAME@REVISION` that is not a local path: the Hub dataset repo, downloaded with
  huggingface_hub (its cache) and then opened as a release folder; `revision=` names the revision
  instead of `@REVISION` (both at once must agree).

A revision on a local folder, a folder that is neither, or a name that is none of these is a one-line
MmfaithError naming the fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.loaders.release_files import HUB_REPO, download_release


@dataclass(frozen=True)
class Source:
    """A resolved source: `kind` "release" (with its `manifest`) or "build"; `path` the local folder."""

    kind: str
    path: Path
    manifest: dict[str, Any] | None = None


def resolve(source: Path | str, family: str, revision: str | None = None, verify: bool = True) -> Source:
    """The local release folder or build dir that `source` names (module docstring)."""
    from mmfaith.release.manifest import open_release

    path = Path(source)
    if path.is_dir() and ((path / "manifest.json").is_file() or (path / "records.jsonl").is_file()):
        if revision is not None:
            raise MmfaithError(f"{source}: a local folder has no revisions; drop the revision "
                               "(or pass the Hub repo id ORG/NAME@REVISION to load a tagged version).")
        if (path / "manifest.json").is_file():
            return Source("release", path, open_release(path, family, verify))
        return Source("build", path)
    if not path.exists() and HUB_REPO.match(str(source)):
        repo, _, pinned = str(source).partition("@")
        if pinned and revision is not None and pinned != revision:
            raise MmfaithError(f"{source}: names revision {pinned!r} and revision= names {revision!r}; give one.")
        folder = download_release(f"{repo}@{pinned or revision}" if (pinned or revision) else repo)
        return Source("release", folder, open_release(folder, family, verify))
    from mmfaith import families

    raise MmfaithError(f"{source}: not a {families.get(family).title} release folder (manifest.json), build dir "
                       "(records.jsonl) or Hub "
                       f"repo id ORG/NAME[@REVISION]; pass one of those (a build comes from `mmfaith build {family}`, "
                       "a release from `mmfaith release`).")
