"""`load_crm(source, config)`: a CRM `datasets.Dataset` of one config ("{mode}-{style}"), split `test`.

`source` is a release folder (plain `datasets.load_dataset(folder, config)`), a build dir (every
record, whatever its verification status, turned into release rows) or a Hub repo id of a release.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError


def load_crm(source: str | Path, config: str = "specific-black", revision: str | None = None,
             split: str = "test", verify: bool = True) -> Any:
    """The `datasets.Dataset` of one variant config of a CRM release, build dir or Hub repo."""
    import datasets

    path = Path(source)
    if (path / "manifest.json").is_file():
        if verify:  # the shards as the manifest lists them (verify=False skips it)
            from mmfaith.loaders.crm.rows import RELEASE_FORMAT
            from mmfaith.release.manifest import open_release

            open_release(path, RELEASE_FORMAT)
        return datasets.load_dataset(str(path), config, split=split)
    if (path / "records.jsonl").is_file():
        from mmfaith.loaders.crm.dataset import open_crm_dataset
        from mmfaith.loaders.crm.rows import features, record_to_row

        items = sorted(open_crm_dataset(path).items, key=lambda item: item.id)
        rows = [record_to_row(item.record, item.variant(config), item.variants[config].load(), item.original.load())
                for item in items if config in item.variants]
        if not rows:
            raise MmfaithError(f"{source}: no variant {config!r}; the build has "
                               f"{', '.join(sorted({v for item in items for v in item.variants}))}.")
        return datasets.Dataset.from_list(rows, features=features())
    if path.exists() or str(source).count("/") != 1:
        raise MmfaithError(f"{source}: not a release folder (manifest.json), a CRM build dir (records.jsonl) or a "
                           "Hub repo id ORG/NAME.")
    return datasets.load_dataset(str(source), config, split=split, revision=revision)
