"""Reading a release folder back, for every family's loader: its rows, its identity, its images as files.

- `release_rows(folder)`: (the manifest, every row of every config's shards in manifest order, each
  with where it is: "<shard> row N"), images undecoded ({"bytes", "path"}).
- `release_identity(folder, manifest)`: (dataset_id "release:<name>", revision "<tag>+<manifest hash>").
- `cached_image(images, data, sha256, where)`: the image's bytes as `<images>/<sha256>.png` (written
  once, only when they hash to the record's sha256; else an error naming the row and `mmfaith verify`).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmfaith.cache import cache_dir as default_cache_dir
from mmfaith.errors import MmfaithError
from mmfaith.images import sha256_bytes, sha256_file
from mmfaith.jsonl import write_atomic


def release_rows(folder: Path) -> tuple[dict[str, Any], Iterator[tuple[str, dict[str, Any]]]]:
    """The manifest and the rows of a release folder (module docstring)."""
    import pyarrow.parquet as pq

    from mmfaith.release.manifest import read_manifest

    manifest = read_manifest(folder)

    def rows() -> Iterator[tuple[str, dict[str, Any]]]:
        for name, entry in sorted(manifest["files"].items()):
            if "config" not in entry:
                continue
            batches = pq.ParquetFile(folder / name).iter_batches(batch_size=16)
            for number, row in enumerate(row for batch in batches for row in batch.to_pylist()):
                yield f"{folder / name} row {number}", row

    return manifest, rows()


def release_identity(folder: Path, manifest: dict[str, Any]) -> tuple[str, str]:
    """(dataset_id, revision) of a release folder."""
    return f"release:{manifest['name']}", f"{manifest['tag']}+{sha256_file(folder / 'manifest.json')[:16]}"


def images_dir(cache_dir: Path | None) -> Path:
    """Where a release's images are materialised: `<cache dir>/images` (created)."""
    images = (cache_dir or default_cache_dir()) / "images"
    images.mkdir(parents=True, exist_ok=True)
    return images


def cached_image(images: Path, data: bytes | None, sha256: str, where: str) -> Path:
    """The image as a file in the cache (module docstring)."""
    if data is None or sha256_bytes(data) != sha256:
        raise MmfaithError(f"{where}: image bytes do not hash to the record's sha256; the release is damaged "
                           "(run `mmfaith verify` on it).")
    path = images / f"{sha256}.png"
    if not path.is_file():
        write_atomic(path, data)
    return path
