"""`mmfaith release --push`: upload a verified release folder to a Hub dataset repo and tag it.

Contract: the folder is verified first (`verify_folder`: a family's release or a suite's); the repo is
created if needed; an
existing tag `vX.Y.Z` is refused before anything is uploaded (a published version never
changes); the folder goes up in one commit on `main` (data/ and families/ files of the previous
version are deleted in that same commit, so `main` holds exactly this release); the commit is tagged
`vX.Y.Z`. Old tags are never touched. The token is passed to `huggingface_hub` only, never
printed or written.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mmfaith.jsonl import read_json_object
from mmfaith.release.manifest import MANIFEST
from mmfaith.release.suite_release import FAMILIES_DIR, verify_folder
from mmfaith.errors import MmfaithError

UPLOADED = ["README.md", "manifest.json", "data/**/*.parquet",
            *(f"{FAMILIES_DIR}/*/{name}" for name in ("README.md", "manifest.json", "data/**/*.parquet"))]


@dataclass(frozen=True)
class PushResult:
    commit: str
    tag: str
    url: str


def push_release(folder: Path, repo_id: str, token: str, endpoint: str | None = None) -> PushResult:
    """Upload `folder` to the dataset repo `repo_id` in one commit tagged v<manifest version>.

    `endpoint` defaults to huggingface_hub's (HF_ENDPOINT or https://huggingface.co). Raises
    MmfaithError when the folder fails verification, the tag exists, or the Hub refuses a call.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    report = verify_folder(folder)
    if report.problems:
        raise MmfaithError(f"{folder}: not pushed, `mmfaith verify` finds {len(report.problems)} problem(s), "
                           f"first: {report.problems[0]}")
    manifest = read_json_object(folder / MANIFEST, "pass the folder `mmfaith release` wrote.")
    tag = manifest["tag"]
    api = HfApi(endpoint=endpoint, token=token)
    step = "create the repo"
    try:
        api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
        step = "list its tags"
        existing = {ref.name: ref.target_commit for ref in api.list_repo_refs(repo_id, repo_type="dataset").tags}
        if tag in existing:
            raise MmfaithError(f"{repo_id}: tag {tag} already exists (commit {existing[tag]}); a published version "
                               "is never changed: release again with a new --version.")
        step = "upload the release"
        commit = api.upload_folder(
            folder_path=folder, repo_id=repo_id, repo_type="dataset", allow_patterns=UPLOADED,
            delete_patterns=["data/**", f"{FAMILIES_DIR}/**"], commit_message=f"Release {tag}",
            commit_description=_description(manifest))
        step = f"tag the commit {tag}"
        api.create_tag(repo_id, tag=tag, revision=commit.oid, repo_type="dataset",
                       tag_message=f"{manifest['name']} {tag}")
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        hint = " (the tag was created meanwhile: release with a new --version)" if status == 409 and step.startswith("tag") else ""
        raise MmfaithError(f"{repo_id}: the Hub refused to {step}: HTTP {status}{hint}; "
                           f"check HF_TOKEN's write access to the repo. {str(exc).splitlines()[0]}") from exc
    return PushResult(commit=commit.oid, tag=tag, url=f"{api.endpoint}/datasets/{repo_id}/tree/{tag}")


def _description(manifest: dict) -> str:
    """The commit's description: what the release is made of (a family's build, or a suite's families)."""
    made_of = (f"build {manifest['build']['records_sha256'][:16]}" if "build" in manifest
               else f"families {', '.join(manifest['families'])}")
    rows = manifest.get("configs") or {name: entry["rows"] for name, entry in manifest["families"].items()}
    return f"{manifest['name']} {manifest['tag']}: {made_of}, mmfaith {manifest['mmfaith_version']}, rows {rows}."
