"""`load_spd_faith(source, config, revision)`: an SPD-Faith `datasets.Dataset` from any of its three homes.

`source` is a release folder (written by `mmfaith release`: loaded with plain
`datasets.load_dataset(folder, config)`), a build dir (records.jsonl + images: every record of
the config, whatever its verification status, turned into release rows), or a Hub dataset repo id
(`ORG/NAME`, loaded with `datasets.load_dataset(repo, config, revision=...)`) of an mmfaith
release. The official SPD-Faith-Bench (splits easy / medium / hard / multi_diff, no `test`) is not
read here: import it with `mmfaith build spd-faith --from-official SOURCE --out BUILD_DIR` and
pass BUILD_DIR.
The split is always `test`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError

CONFIGS = ("single", "multi", "control")


def load_spd_faith(source: str | Path, config: str | None = "single", revision: str | None = None,
                   split: str = "test", verify: bool = True) -> Any:
    """The `datasets.Dataset` of one config and split of an SPD-Faith release, build dir or Hub repo."""
    import datasets

    path = Path(source)
    if (path / "manifest.json").is_file() or ((path / "README.md").is_file() and (path / "data").is_dir()):
        if revision is not None:
            raise MmfaithError(f"{source}: a local release folder has no revisions; drop revision= "
                               "(or pass the Hub repo id to load a tagged version).")
        if verify and (path / "manifest.json").is_file():  # the shards as the manifest lists them
            from mmfaith.release.manifest import open_release

            open_release(path)
        return datasets.load_dataset(str(path), config, split=split)
    if (path / "records.jsonl").is_file():
        if config not in CONFIGS:
            raise MmfaithError(f"{source}: config {config!r} is not one of {', '.join(CONFIGS)}.")
        return _build_dir_dataset(path, config)
    if path.exists() or str(source).count("/") != 1:
        raise MmfaithError(f"{source}: not a release folder (manifest.json), a build dir (records.jsonl) or a Hub "
                           "repo id ORG/NAME.")
    return datasets.load_dataset(str(source), config, split=split, revision=revision)


def _build_dir_dataset(build: Path, config: str) -> Any:
    """A build dir's records of one subset as release rows (sorted by id, as a release orders them)."""
    from datasets import Dataset

    from mmfaith.loaders.spd_faith.dataset import open_spd_dataset
    from mmfaith.loaders.spd_faith.rows import features, record_to_row

    pairs = sorted((p for p in open_spd_dataset(build).pairs if p.record["subset"] == config), key=lambda p: p.id)
    rows = [record_to_row(p.record, p.image_a_path.read_bytes(), p.image_b_path.read_bytes()) for p in pairs]
    return Dataset.from_list(rows, features=features())
