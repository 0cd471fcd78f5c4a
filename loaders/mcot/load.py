"""`load_mcot(source, config, revision)`: an MCoT `datasets.Dataset` from a release folder, build dir or Hub repo.

A release folder (`mmfaith release`) or a Hub repo id is loaded with plain `datasets.load_dataset`;
a build dir's records of the config (its source: coco, vstar, hrbench-4k, hrbench-8k) are turned
into release rows, whatever their verification status. The split is always `test`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError

CONFIGS = ("coco", "vstar", "hrbench-4k", "hrbench-8k")


def load_mcot(source: str | Path, config: str | None = None, revision: str | None = None, split: str = "test",
              verify: bool = True) -> Any:
    """The `datasets.Dataset` of one config (default: the release's default; a build dir's only source)."""
    import datasets

    path = Path(source)
    if (path / "manifest.json").is_file():
        if revision is not None:
            raise MmfaithError(f"{source}: a local release folder has no revisions; drop revision=.")
        if verify:  # the shards as the manifest lists them (verify=False skips it)
            from mmfaith.release.mcot import FORMAT
            from mmfaith.release.manifest import open_release

            open_release(path, FORMAT)
        return datasets.load_dataset(str(path), config, split=split)
    if (path / "records.jsonl").is_file():
        from datasets import Dataset

        from mmfaith.loaders.mcot.dataset import open_mcot_dataset
        from mmfaith.loaders.mcot.rows import features, record_to_row

        items = open_mcot_dataset(path).items
        sources = sorted({item.record["source"]["dataset"] for item in items})
        config = config or (sources[0] if len(sources) == 1 else None)
        if config not in sources:
            raise MmfaithError(f"{source}: config {config!r} is not one of this build's sources ({', '.join(sources)}).")
        chosen = sorted((i for i in items if i.record["source"]["dataset"] == config), key=lambda i: i.id)
        return Dataset.from_list([record_to_row(i.record, i.image_path.read_bytes()) for i in chosen],
                                 features=features())
    if path.exists() or str(source).count("/") != 1:
        raise MmfaithError(f"{source}: not a release folder (manifest.json), a build dir (records.jsonl) or a Hub "
                           "repo id ORG/NAME.")
    return datasets.load_dataset(str(source), config, split=split, revision=revision)
