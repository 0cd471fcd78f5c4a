"""A tiny in-memory Hugging Face Hub for tests: the API calls `mmfaith release --push` makes, answered as the Hub does.

Endpoints (dataset repos only; shapes follow huggingface_hub 2.4.0's parsers):
  POST /api/repos/create                                  {"url"}, 409 when the repo exists
  GET  /api/datasets/{repo}/refs                          {"branches", "tags", "converts", "pullRequests"}
  GET  /api/datasets/{repo}/revision/{rev}               {"id", "sha", "siblings"} (repo info, for downloads)
  GET  /api/datasets/{repo}/tree/{rev}[/path]             [{"type": file|directory, "path", "oid", "size"}]
  POST /api/validate-yaml                                 card metadata checks; 400 {"errors"} when invalid
  POST /api/datasets/{repo}/preupload/{rev}               {"files": [{"path", "uploadMode", "shouldIgnore"}]}
  POST /datasets/{repo}.git/info/lfs/objects/batch        basic transfer: upload and verify hrefs on this server
  PUT  /lfs/{oid}    POST /lfs-verify                     LFS object upload (sha256 checked) and verify
  POST /api/datasets/{repo}/commit/{rev}                  NDJSON commit -> {"commitUrl", "commitOid"}
  POST /api/datasets/{repo}/tag/{rev}                     409 when the tag exists
  GET  /datasets/{repo}/resolve/{rev}/{path}              file bytes with X-Repo-Commit / ETag headers
Every /api call needs `Authorization: Bearer <token>` (401 otherwise). Files ending in .parquet go
through LFS (as the Hub's default .gitattributes says); others are regular blobs in the commit.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlparse

import yaml

GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
HUB_LICENSES = {"apache-2.0", "mit", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "cc0-1.0", "other",
                "unknown", "openrail", "cc-by-2.0", "cc-by-nc-nd-4.0"}
HUB_TASKS = {"visual-question-answering", "image-text-to-text", "image-to-text", "image-classification",
             "question-answering", "text-generation", "object-detection"}
HUB_SIZES = {"n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "n>1T"}


@dataclass
class Repo:
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, rev: str) -> str | None:
        return self.branches.get(rev) or self.tags.get(rev) or (rev if rev in self.commits else None)


class FakeHub:
    """The server and its state; `start()` serves on 127.0.0.1 in a thread, `stop()` ends it."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.lfs: dict[str, bytes] = {}
        self.calls: list[str] = []
        self.lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hub._handle(self, "GET")

            def do_POST(self) -> None:
                hub._handle(self, "POST")

            def do_PUT(self) -> None:
                hub._handle(self, "PUT")

            def do_HEAD(self) -> None:
                hub._handle(self, "HEAD")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> "FakeHub":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- request handling ----

    def _handle(self, request: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(request.path)
        path, query = unquote(url.path), dict(parse_qsl(url.query))
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        with self.lock:
            self.calls.append(f"{method} {path}")
            if path.startswith("/api/") and request.headers.get("Authorization") != f"Bearer {self.token}":
                return _send(request, 401, {"error": "Invalid credentials in Authorization header"})
            for pattern, verb, handler in self._routes():
                match = re.fullmatch(pattern, path)
                if match and verb == method.replace("HEAD", "GET"):
                    extra = (query,) if handler == self._tree else ()
                    status, payload, headers = handler(body, *match.groups(), *extra)
                    return _send(request, status, payload, headers, head=method == "HEAD")
            _send(request, 404, {"error": f"no route for {method} {path}"})

    def _routes(self) -> list[tuple[str, str, Any]]:
        repo = r"([^/]+/[^/]+?)"
        return [
            (r"/api/repos/create", "POST", self._create),
            (rf"/api/datasets/{repo}/refs", "GET", self._refs),
            (rf"/api/datasets/{repo}/revision/([^/]+)", "GET", self._info),
            (rf"/api/datasets/{repo}/tree/([^/]+)(?:/(.*))?", "GET", self._tree),
            (r"/api/validate-yaml", "POST", self._validate_yaml),
            (rf"/api/datasets/{repo}/preupload/([^/]+)", "POST", self._preupload),
            (rf"/datasets/{repo}\.git/info/lfs/objects/batch", "POST", self._lfs_batch),
            (r"/lfs/([0-9a-f]{64})", "PUT", self._lfs_put),
            (r"/lfs-verify", "POST", self._lfs_verify),
            (rf"/api/datasets/{repo}/commit/([^/]+)", "POST", self._commit),
            (rf"/api/datasets/{repo}/tag/([^/]+)", "POST", self._tag),
            (rf"/datasets/{repo}/resolve/([^/]+)/(.+)", "GET", self._resolve),
        ]

    def _repo(self, repo_id: str) -> Repo:
        if repo_id not in self.repos:
            raise KeyError(repo_id)
        return self.repos[repo_id]

    def _create(self, body: bytes) -> tuple[int, Any, dict[str, str]]:
        data = json.loads(body)
        repo_id = f"{data['organization']}/{data['name']}" if data.get("organization") else data["name"]
        url = f"{self.url}/datasets/{repo_id}"
        if repo_id in self.repos:
            return 409, {"error": "You already created this dataset repo", "url": url}, {}
        oid = _commit_oid("", "initial commit", {".gitattributes": GITATTRIBUTES})
        self.repos[repo_id] = Repo(commits={oid: {".gitattributes": GITATTRIBUTES}}, branches={"main": oid})
        return 200, {"url": url, "name": repo_id}, {}

    def _refs(self, body: bytes, repo_id: str) -> tuple[int, Any, dict[str, str]]:
        if repo_id not in self.repos:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        repo = self.repos[repo_id]
        return 200, {
            "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": o} for n, o in sorted(repo.branches.items())],
            "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": o} for n, o in sorted(repo.tags.items())],
            "converts": [], "pullRequests": [],
        }, {}

    def _info(self, body: bytes, repo_id: str, rev: str) -> tuple[int, Any, dict[str, str]]:
        repo = self.repos.get(repo_id)
        oid = repo.resolve(rev) if repo else None
        if oid is None:
            return 404, {"error": f"Revision Not Found for url: {rev}"}, {"X-Error-Code": "RevisionNotFound"}
        siblings = [{"rfilename": path, "size": len(data)} for path, data in sorted(repo.commits[oid].items())]
        return 200, {"id": repo_id, "sha": oid, "private": False, "siblings": siblings, "tags": []}, {}

    def _tree(self, body: bytes, repo_id: str, rev: str, prefix: str | None,
              query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        repo = self.repos.get(repo_id)
        oid = repo.resolve(rev) if repo else None
        if oid is None:
            return 404, {"error": f"Revision Not Found for url: {rev}"}, {"X-Error-Code": "RevisionNotFound"}
        base = prefix.strip("/") + "/" if prefix else ""
        recursive = query.get("recursive", "").lower() in ("1", "true")
        entries: dict[str, dict[str, Any]] = {}
        for path, data in sorted(repo.commits[oid].items()):
            if not path.startswith(base):
                continue
            parts = path[len(base):].split("/")
            for depth in range(1, len(parts)):
                folder = base + "/".join(parts[:depth])
                if recursive or depth == 1:
                    entries[folder] = {"type": "directory", "path": folder, "oid": hashlib.sha1(folder.encode()).hexdigest()}
            if recursive or len(parts) == 1:
                entries[path] = {"type": "file", "path": path, "oid": hashlib.sha1(data).hexdigest(), "size": len(data)}
        if base and not entries:
            return 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
        return 200, [entries[key] for key in sorted(entries)], {}

    def _validate_yaml(self, body: bytes) -> tuple[int, Any, dict[str, str]]:
        content = json.loads(body)["content"]
        errors = [{"message": m} for m in card_metadata_errors(content)]
        return (400 if errors else 200), {"errors": errors, "warnings": []}, {}

    def _preupload(self, body: bytes, repo_id: str, rev: str) -> tuple[int, Any, dict[str, str]]:
        if repo_id not in self.repos:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        files = json.loads(body)["files"]
        return 200, {"files": [{"path": f["path"], "uploadMode": "lfs" if f["path"].endswith(".parquet") else "regular",
                                "shouldIgnore": False} for f in files]}, {}

    def _lfs_batch(self, body: bytes, repo_id: str) -> tuple[int, Any, dict[str, str]]:
        data = json.loads(body)
        objects = []
        for obj in data["objects"]:
            entry: dict[str, Any] = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.lfs:
                entry["actions"] = {"upload": {"href": f"{self.url}/lfs/{obj['oid']}"},
                                    "verify": {"href": f"{self.url}/lfs-verify"}}
            objects.append(entry)
        return 200, {"transfer": "basic", "objects": objects}, {}

    def _lfs_put(self, body: bytes, oid: str) -> tuple[int, Any, dict[str, str]]:
        if hashlib.sha256(body).hexdigest() != oid:
            return 400, {"error": "sha256 does not match the object id"}, {}
        self.lfs[oid] = body
        return 200, {}, {}

    def _lfs_verify(self, body: bytes) -> tuple[int, Any, dict[str, str]]:
        data = json.loads(body)
        ok = len(self.lfs.get(data["oid"], b"")) == data["size"] and data["oid"] in self.lfs
        return (200, {"success": True}, {}) if ok else (404, {"error": "object not uploaded"}, {})

    def _commit(self, body: bytes, repo_id: str, rev: str) -> tuple[int, Any, dict[str, str]]:
        repo = self.repos.get(repo_id)
        if repo is None or rev not in repo.branches:
            return 404, {"error": "Repository or branch not found"}, {"X-Error-Code": "RepoNotFound"}
        parent = repo.branches[rev]
        files = dict(repo.commits[parent])
        summary = ""
        for line in body.splitlines():
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                summary = value["summary"]
            elif key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "lfsFile":
                if value["oid"] not in self.lfs:
                    return 400, {"error": f"LFS object {value['oid']} was never uploaded"}, {}
                files[value["path"]] = self.lfs[value["oid"]]
            elif key == "deletedFile":
                if value["path"] not in files:
                    return 404, {"error": "A file with this name doesn't exist"}, {"X-Error-Code": "EntryNotFound"}
                del files[value["path"]]
        oid = _commit_oid(parent, summary, files)
        repo.commits[oid] = files
        repo.branches[rev] = oid
        return 200, {"commitUrl": f"{self.url}/datasets/{repo_id}/commit/{oid}", "commitOid": oid,
                     "pullRequestUrl": None}, {}

    def _tag(self, body: bytes, repo_id: str, rev: str) -> tuple[int, Any, dict[str, str]]:
        repo = self.repos.get(repo_id)
        oid = repo.resolve(rev) if repo else None
        if oid is None:
            return 404, {"error": "Revision not found"}, {"X-Error-Code": "RevisionNotFound"}
        tag = json.loads(body)["tag"]
        if tag in repo.tags:
            return 409, {"error": f"Tag {tag} already exists"}, {}
        repo.tags[tag] = oid
        return 200, {}, {}

    def _resolve(self, body: bytes, repo_id: str, rev: str, path: str) -> tuple[int, Any, dict[str, str]]:
        repo = self.repos.get(repo_id)
        oid = repo.resolve(rev) if repo else None
        if oid is None or path not in repo.commits[oid]:
            return 404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
        data = repo.commits[oid][path]
        return 200, data, {"X-Repo-Commit": oid, "ETag": f'"{hashlib.sha1(data).hexdigest()}"'}


def card_metadata_errors(content: str) -> list[str]:
    """The checks this fake Hub makes on a dataset card's YAML (a subset of the Hub's)."""
    match = re.match(r"^---\n(.*?)\n---\n", content, re.S)
    if not match:
        return ["README.md has no YAML front matter"]
    meta = yaml.safe_load(match.group(1))
    errors = []
    if meta.get("license") not in HUB_LICENSES:
        errors.append(f"license {meta.get('license')!r} is not a Hub license id")
    if meta.get("license") == "other" and not (meta.get("license_name") and meta.get("license_link")):
        errors.append("license: other needs license_name and license_link")
    errors += [f"task_categories: {t!r} is not a Hub task" for t in meta.get("task_categories", []) if t not in HUB_TASKS]
    errors += [f"size_categories: {s!r} is not a Hub size" for s in meta.get("size_categories", []) if s not in HUB_SIZES]
    for config in meta.get("configs", []):
        if not isinstance(config.get("config_name"), str) or not config.get("data_files"):
            errors.append(f"configs: {config!r} needs config_name and data_files")
    return errors


def _commit_oid(parent: str, summary: str, files: dict[str, bytes]) -> str:
    digest = hashlib.sha1(f"{parent}\n{summary}\n".encode())
    for path, data in sorted(files.items()):
        digest.update(f"{path}\0{hashlib.sha1(data).hexdigest()}\n".encode())
    return digest.hexdigest()


def _send(request: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None,
          head: bool = False) -> None:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    request.send_response(status)
    request.send_header("Content-Type", "application/octet-stream" if isinstance(payload, bytes) else "application/json")
    request.send_header("Content-Length", str(len(data)))
    for key, value in (headers or {}).items():
        request.send_header(key, value)
    request.end_headers()
    if not head:
        request.wfile.write(data)
