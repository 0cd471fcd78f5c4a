"""Push a build to Label Studio and pull verdicts back, for any Family, through label-studio-sdk 2.x.

Server-agnostic: works with any Label Studio reachable at URL whose local-files serving has a
document root (LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT) above the build dir. Images reach the
server as /data/local-files/ URLs through a local-files import storage on the build dir, never
as public URLs. The API token is read from an environment variable and never printed or written.

Tasks carry, besides the family's data: `record_id`, `family`, `images_sha256` (the hashes the
task shows), `flag` (why the task needs a second look, or "") and `stale_annotation_ids`
(annotations made before the record's images changed; the pull does not count them).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from label_studio_sdk import LabelStudio
from label_studio_sdk.core.api_error import ApiError
from label_studio_sdk.types.serialization_option_request import SerializationOptionRequest
from label_studio_sdk.types.serialization_options_request import SerializationOptionsRequest

from mmfaith.annotation.family import Family
from mmfaith.annotation.merge import merge_record
from mmfaith.annotation.status import RECORDS, read_records
from mmfaith.annotation.votes import Misfit, Vote
from mmfaith.errors import MmfaithError
from mmfaith.jsonl import canonical_json, write_atomic
from mmfaith.redact import register_secret, url_secrets
from mmfaith.schema import check_record


def connect(url: str, api_key_env: str) -> LabelStudio:
    """A client for the server at `url` with the token from $api_key_env (MmfaithError when unset)."""
    key = os.environ.get(api_key_env, "").strip()
    if not key:
        raise MmfaithError(f"environment variable {api_key_env} is empty: set it to your Label Studio "
                           f"access token (Account & Settings), or name another variable with --api-key-env.")
    register_secret(key, *url_secrets(url))
    return LabelStudio(base_url=url.rstrip("/"), api_key=key)


def _api(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one SDK call; a refusal or an unreachable server becomes a one-line MmfaithError."""
    try:
        return call(*args, **kwargs)
    except ApiError as exc:
        raise MmfaithError(f"Label Studio refused to {what} (HTTP {exc.status_code}: {str(exc.body)[:300]}); "
                           f"check the URL, the token and your role in the project.") from exc
    except (httpx.TransportError, OSError) as exc:
        raise MmfaithError(f"could not reach Label Studio to {what} ({exc}); is the server running at that URL?") from exc
    except (AttributeError, KeyError, TypeError, ValueError) as exc:  # an answer of another shape: not Label Studio
        raise MmfaithError(f"the server did not answer as Label Studio does when asked to {what} "
                           f"({type(exc).__name__}: {str(exc)[:200]}); check --url names a Label Studio server.") from exc


def find_project(client: LabelStudio, title: str) -> Any | None:
    """The project with exactly this title, None if there is none (MmfaithError if several)."""
    found = [p for p in _api("list projects", client.projects.list) if p.title == title]
    if len(found) > 1:
        raise MmfaithError(f"{len(found)} Label Studio projects are titled {title!r} (ids "
                           f"{', '.join(str(p.id) for p in found)}); rename all but one.")
    return found[0] if found else None


def _ensure_project(client: LabelStudio, title: str, config: str, overlap: int | None) -> tuple[Any, bool]:
    """Find the project by title or create it; set its labeling config and, unless `overlap` is None,
    its `maximum_annotations` (how many people the label stream gives each task) where they differ."""
    project = find_project(client, title)
    if project is None:
        return _api("create the project", client.projects.create, title=title, label_config=config,
                    maximum_annotations=overlap or 1), True
    changes: dict[str, Any] = {}
    if (project.label_config or "").strip() != config.strip():
        changes["label_config"] = config
    if overlap is not None and project.maximum_annotations != overlap:
        changes["maximum_annotations"] = overlap
    if changes:
        project = _api("update the project", client.projects.update, id=project.id, **changes)
    return project, False


def _ensure_local_storage(client: LabelStudio, project_id: int, build_dir: Path) -> None:
    """Attach a local-files import storage on the build dir (never synced: tasks come from push)."""
    path = str(build_dir)
    storages = _api("list local storages", client.import_storage.local.list, project=project_id)
    if not any(s.path == path for s in storages):
        _api("add a local-files storage", client.import_storage.local.create, project=project_id, path=path,
             title="mmfaith build", use_blob_urls=False)


def files_url(build_dir: Path, files_root: Path) -> Callable[[str], str]:
    """The function mapping a path relative to the build dir to its /data/local-files/ URL.

    MmfaithError unless the build dir lies strictly below the server's document root."""
    build, root = build_dir.resolve(), files_root.resolve()
    if build == root or root not in build.parents:
        raise MmfaithError(f"{build}: the build dir must lie below the server's local-files document root "
                           f"{root} (LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT / --files-root), not be it.")
    prefix = build.relative_to(root).as_posix()
    return lambda rel: "/data/local-files/?d=" + quote(f"{prefix}/{rel}", safe="/")


def list_tasks(client: LabelStudio, project_id: int) -> list[dict[str, Any]]:
    """Every task of the project as {"id", "data"}."""
    pager = _api("list tasks", client.tasks.list, project=project_id, fields="all")
    return [{"id": t.id, "data": dict(t.data or {})} for t in pager]


@dataclass
class PushReport:
    """What a push did: the project, whether it was created, record ids added, unchanged, and
    flagged (their images changed since the last push), and tasks whose record id is unknown."""

    project_id: int
    created: bool
    added: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    unknown_tasks: list[int] = field(default_factory=list)


def _hashes(family: Family, record: dict[str, Any]) -> dict[str, str]:
    """The record's image hashes by image field."""
    return {image: record[digest] for image, digest in family.image_fields.items()}


def push(client: LabelStudio, build_dir: Path, title: str, family: Family, files_root: Path,
         overlap: int | None = None) -> PushReport:
    """Create or find the project, attach local-files storage, import one task per new record.
    `overlap`: annotators per task the label stream aims for (the project's maximum_annotations;
    None: 1 for a new project, unchanged for an existing one).

    Idempotent: a record that already has a task is left alone; one whose image hashes changed since
    its task was made gets its task data updated, a `flag` saying so, and its earlier annotations
    listed in `stale_annotation_ids` (they no longer count)."""
    records = read_records(build_dir)
    url = files_url(build_dir, files_root)
    project, created = _ensure_project(client, title, family.label_config(), overlap)
    _ensure_local_storage(client, project.id, build_dir.resolve())
    existing = [] if created else list_tasks(client, project.id)
    tasks = {t["data"].get("record_id"): t for t in sorted(existing, key=lambda t: -t["id"])}  # first task wins
    known = {r["id"] for r in records}
    report = PushReport(project_id=project.id, created=created,
                        unknown_tasks=sorted(t["id"] for t in existing if t["data"].get("record_id") not in known))
    new: list[dict[str, Any]] = []
    for record in records:
        helpers = family.prepare(build_dir, record) if family.prepare else {}
        data = {**family.task_data(record, url, helpers),
                "record_id": record["id"], "family": family.name, "images_sha256": _hashes(family, record),
                "flag": "", "stale_annotation_ids": []}
        task = tasks.get(record["id"])
        if task is None:
            prefilled = family.task_predictions(build_dir, record) if family.task_predictions else None
            new.append({"data": data, **({"predictions": [{"model_version": "mmfaith-build", "result": prefilled}]}
                                         if prefilled else {})})
            report.added.append(record["id"])
        elif task["data"].get("images_sha256") == data["images_sha256"]:
            report.unchanged.append(record["id"])
        else:
            stale = sorted(set(task["data"].get("stale_annotation_ids", [])) | _annotation_ids(client, task["id"]))
            data["flag"] = (f"The images of this pair changed at {_now()} since the task was made; "
                            f"annotations made before ({len(stale)}) no longer count: verify it again.")
            data["stale_annotation_ids"] = stale
            _api("update a task", client.tasks.update, id=str(task["id"]), data=data)
            report.flagged.append(record["id"])
    if new:
        _api("import tasks", client.projects.import_tasks, id=project.id, request=new)
    return report


def _annotation_ids(client: LabelStudio, task_id: int) -> set[int]:
    """Ids of the annotations a task holds now."""
    return {a.id for a in _api("list annotations", client.annotations.list, id=task_id)}


def _now() -> str:
    """Now, UTC, ISO-8601 to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


@dataclass
class PullReport:
    """What a pull found. Every list names records or tasks a person should look at; nothing in
    them was guessed at: misfit and stale annotations are not counted, unknown tasks are skipped,
    records without a task keep their verification."""

    counts: dict[str, int] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    unknown_tasks: list[tuple[int, str | None]] = field(default_factory=list)
    records_without_task: list[str] = field(default_factory=list)
    misfits: list[tuple[str, int, int, str]] = field(default_factory=list)
    stale: list[tuple[str, int, int]] = field(default_factory=list)
    images_changed: list[str] = field(default_factory=list)
    disagreements: list[tuple[str, int, dict[str, str]]] = field(default_factory=list)
    conflicts: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    skipped: list[tuple[str, int, int]] = field(default_factory=list)


EXPORT_WAIT_S = 600.0


def export_tasks(client: LabelStudio, project_id: int) -> list[dict[str, Any]]:
    """The project's tasks with their annotations, through an export snapshot (made, waited for,
    downloaded as JSON, deleted). Drafts, predictions and annotators come as ids only and the
    annotation history is left out: the pull reads none of them, and the server's export then costs
    about 40 % less CPU than the full synchronous export (docs/annotation.md, Speed)."""
    exports = client.projects.exports
    options = SerializationOptionsRequest(drafts=SerializationOptionRequest(only_id=True),
                                          predictions=SerializationOptionRequest(only_id=True),
                                          annotations_completed_by=SerializationOptionRequest(only_id=True),
                                          include_annotation_history=False)
    snapshot = _api("export the project", exports.create, id=project_id, serialization_options=options)
    try:
        waited = time.monotonic()
        while snapshot.status not in ("completed", "failed") and time.monotonic() - waited < EXPORT_WAIT_S:
            time.sleep(0.2)  # a server with a job queue makes the snapshot in the background
            snapshot = _api("follow the export", exports.get, id=project_id, export_pk=snapshot.id)
        if snapshot.status != "completed":
            raise MmfaithError(f"Label Studio's export {snapshot.id} of project {project_id} ended {snapshot.status!r} "
                               f"(waited {EXPORT_WAIT_S:.0f} s at most); see the server's log.")
        body = b"".join(_api("download the export", exports.download, id=project_id, export_pk=snapshot.id,
                             export_type="JSON"))
    finally:
        _api("delete the export", exports.delete, id=project_id, export_pk=snapshot.id)
    return _api("read the export", json.loads, body)


def _user_names(client: LabelStudio) -> dict[int, str]:
    """User id -> email, for naming annotators."""
    return {u.id: (u.email or u.username or str(u.id)) for u in _api("list users", client.users.list)}


def _iso(value: Any) -> str | None:
    """An export's timestamp as ISO-8601 UTC to the second."""
    if not value:
        return None
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment.astimezone(timezone.utc).replace(microsecond=0).isoformat()


def _votes(task: dict[str, Any], record: dict[str, Any], family: Family, users: dict[int, str],
           report: PullReport) -> list[Vote]:
    """The task's counted votes; misfit, stale and skipped annotations go to the report."""
    stale = set(task["data"].get("stale_annotation_ids") or [])
    votes = []
    for ann in sorted(task.get("annotations") or [], key=lambda a: a["id"]):
        if ann["id"] in stale:
            report.stale.append((record["id"], task["id"], ann["id"]))
            continue
        if ann.get("was_cancelled"):
            report.skipped.append((record["id"], task["id"], ann["id"]))
            continue
        who = ann.get("completed_by")
        who_id = who.get("id") if isinstance(who, dict) else who
        annotator = users.get(who_id, f"user-{who_id}") if isinstance(who_id, int) else f"user-{who_id}"
        try:
            votes.append(family.read_vote(ann.get("result") or [], record, ann["id"], annotator,
                                          _iso(ann.get("updated_at") or ann.get("created_at"))))
        except Misfit as exc:
            report.misfits.append((record["id"], task["id"], ann["id"], str(exc)))
    return votes


def pull(client: LabelStudio, build_dir: Path, title: str, family: Family, policy: str) -> PullReport:
    """Export the project's annotations, merge them into BUILD_DIR/records.jsonl under `policy`
    (merge.decide), and rewrite that file atomically (only when something changed; then the family's
    `after_pull` brings the files that follow the records up to date)."""
    records = read_records(build_dir)
    project = find_project(client, title)
    if project is None:
        raise MmfaithError(f"no Label Studio project is titled {title!r}; run `mmfaith annotate push` first.")
    exported = export_tasks(client, project.id)
    users = _user_names(client)
    by_id = {r["id"]: r for r in records}
    report = PullReport()
    seen: set[str] = set()
    now = _now()
    merged: dict[str, dict[str, Any]] = {}
    for task in sorted(exported, key=lambda t: t["id"]):
        named = (task.get("data") or {}).get("record_id")
        record = by_id.get(named) if isinstance(named, str) else None
        if record is None or named in seen:
            report.unknown_tasks.append((task["id"], named))
            continue
        rid: str = record["id"]
        seen.add(rid)
        if task["data"].get("images_sha256") != _hashes(family, record):
            report.images_changed.append(rid)
            continue
        votes = _votes(task, record, family, users, report)
        outcome = merge_record(record, task["id"], votes, policy, now)
        if outcome.disagreement:
            report.disagreements.append((rid, task["id"], {v.annotator: v.verdict for v in votes}))
        report.conflicts.extend((rid, path, texts) for path, texts in sorted(outcome.conflicts.items()))
        if outcome.record is not record:
            merged[rid] = outcome.record
            report.changed.append(rid)
    report.records_without_task = [r["id"] for r in records if r["id"] not in seen]
    final = [merged.get(r["id"], r) for r in records]
    for rid, record in merged.items():
        check_record(family.schema, record, f"{build_dir / RECORDS}: record {rid} after the merge")
    if merged:
        write_atomic(build_dir / RECORDS, "".join(canonical_json(r) + "\n" for r in final).encode("utf-8"))
        if family.after_pull is not None:
            family.after_pull(build_dir, final, now)
    report.counts = _count(final)
    return report


def _count(records: list[dict[str, Any]]) -> dict[str, int]:
    """accepted / rejected / pending counts."""
    counts = {"accepted": 0, "rejected": 0, "pending": 0}
    for record in records:
        counts[record["verification"]["status"]] += 1
    return counts
