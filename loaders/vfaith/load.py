"""`load_vfaith(source, config, revision)`: a VFaith `datasets.Dataset` from any of its three homes.

`source` is a release folder (written by `mmfaith release`: loaded with plain
`datasets.load_dataset(folder, config)`), a build dir (records.jsonl / perception.jsonl + images:
every record of the config, whatever its verification status, turned into release rows), or a Hub
dataset repo id (`ORG/NAME`, loaded with `datasets.load_dataset(repo, config, revision=...)`).
Configs: `pairs` and `perception`; the split is always `test`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError

CONFIGS = ("pairs", "perception")


def load_vfaith(source: str | Path, config: str = "pairs", revision: str | None = None, split: str = "test",
                verify: bool = True) -> Any:
    """The `datasets.Dataset` of one config and split of a VFaith release, build dir or Hub repo."""
    import datasets

    if config not in CONFIGS:
        raise MmfaithError(f"{source}: config {config!r} is not one of {', '.join(CONFIGS)}.")
    path = Path(source)
    if (path / "manifest.json").is_file():
        if revision is not None:
            raise MmfaithError(f"{source}: a local release folder has no revisions; drop revision= "
                               "(or pass the Hub repo id to load a tagged version).")
        if verify:  # the shards as the manifest lists them (verify=False skips it)
            from mmfaith.release.vfaith import FORMAT
            from mmfaith.release.manifest import open_release

            open_release(path, FORMAT)
        return datasets.load_dataset(str(path), config, split=split)
    if (path / "records.jsonl").is_file():
        return _build_dir_dataset(path, config)
    if path.exists() or str(source).count("/") != 1:
        raise MmfaithError(f"{source}: not a release folder (manifest.json), a build dir (records.jsonl) or a Hub "
                           "repo id ORG/NAME.")
    return datasets.load_dataset(str(source), config, split=split, revision=revision)


def _build_dir_dataset(build: Path, config: str) -> Any:
    """A build dir's records of one config as release rows (sorted by id, as a release orders them)."""
    from datasets import Dataset

    from mmfaith.loaders.vfaith.dataset import open_vfaith_dataset
    from mmfaith.loaders.vfaith.rows import pair_features, pair_to_row, perception_features, perception_to_row

    dataset = open_vfaith_dataset(build)
    if config == "pairs":
        rows = [pair_to_row(p.record, p.original_path.read_bytes(), p.edited_path.read_bytes())
                for p in sorted(dataset.pairs, key=lambda p: p.id)]
        return Dataset.from_list(rows, features=pair_features())
    rows = [perception_to_row(p.record, p.image_path.read_bytes()) for p in sorted(dataset.perception, key=lambda p: p.id)]
    return Dataset.from_list(rows, features=perception_features())
