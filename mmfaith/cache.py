"""The one cache folder of mmfaith, and a content-addressed JSON store inside it.

Contract
--------
`cache_dir()` is ``$MMFAITH_CACHE`` when set, else ``$XDG_CACHE_HOME/mmfaith``, else
``~/.cache/mmfaith``. Everything mmfaith keeps to avoid paying twice (a release's images, LLM judge
answers; later embeddings and injector outputs) lives under it, keyed by a hash of its content,
never inside a run or score folder: replacing such a folder throws nothing paid-for away.

`ContentCache(namespace)` keeps one JSON value per key (a hex SHA-256 of what produced it) in
``<cache_dir>/<namespace>/<key[:2]>/<key>.json``, written atomically, so concurrent processes
sharing the cache never see a torn entry; `get` of an absent or unreadable entry is None.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from mmfaith.jsonl import canonical_json, write_atomic

_KEY = re.compile(r"^[0-9a-f]{16,128}$")


def cache_dir() -> Path:
    """$MMFAITH_CACHE, else $XDG_CACHE_HOME/mmfaith, else ~/.cache/mmfaith (not created here)."""
    named = os.environ.get("MMFAITH_CACHE")
    if named:
        return Path(named).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "mmfaith"


class ContentCache:
    """JSON values by content hash under `cache_dir()/namespace` (module docstring)."""

    def __init__(self, namespace: str, root: Path | None = None) -> None:
        self.folder = (root or cache_dir()) / namespace

    def path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise ValueError(f"a cache key is a lower-case hex digest, not {key!r}")
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        """The value stored under `key`, or None when there is none (or it cannot be read)."""
        try:
            return json.loads(self.path(key).read_bytes())["value"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, value: Any, **about: Any) -> None:
        """Store `value` under `key` (replacing any), with `about` fields kept beside it for people reading it."""
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, (canonical_json({**about, "key": key, "value": value}) + "\n").encode("utf-8"))
