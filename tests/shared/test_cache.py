"""The one cache folder and its content-addressed store."""
from __future__ import annotations

from pathlib import Path

import pytest

from mmfaith.cache import ContentCache, cache_dir


def test_cache_dir_is_mmfaith_cache_else_xdg_else_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MMFAITH_CACHE", str(tmp_path / "named"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "named"
    monkeypatch.delenv("MMFAITH_CACHE")
    assert cache_dir() == tmp_path / "xdg" / "mmfaith"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "mmfaith"


def test_content_cache_round_trips_by_key_and_ignores_damaged_entries(own_cache_dir: Path) -> None:
    cache = ContentCache("judge")
    key = "ab" + "0" * 62
    assert cache.get(key) is None
    cache.put(key, {"claims": [1, 2]}, model="m")
    assert cache.get(key) == {"claims": [1, 2]}
    assert cache.path(key) == own_cache_dir / "judge" / "ab" / f"{key}.json"
    cache.path(key).write_text('{"key": "ab')  # damaged by hand: treated as absent, asked again
    assert cache.get(key) is None
    with pytest.raises(ValueError, match="hex digest"):
        cache.path("../escape")
