"""`load_config`: one config of any family's data as a `datasets.Dataset`, from a release folder, build dir or Hub id.

The source is resolved by loaders/source.py (one resolver, one set of messages for every family). A
release (local, or downloaded from the Hub at a revision) is loaded with plain
`datasets.load_dataset(folder, config, split=...)`, after its shards are checked against its manifest
(`verify=False` skips that). A build dir's records (whatever their verification status) are turned into
the release's rows by the family's `ReleaseDeclaration`, so a build loads exactly as its release would.
`config=None` is the release's default config (its card's), or a build's first. The split is `test`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.loaders.source import resolve


def load_config(family: str, source: str | Path, config: str | None = None, revision: str | None = None,
                split: str = "test", verify: bool = True) -> Any:
    """The `datasets.Dataset` of one config and split of a `family` release, build dir or Hub repo."""
    import datasets

    found = resolve(source, family, revision, verify)
    if found.kind == "release":
        configs = list(found.manifest["configs"])
        if config is not None and config not in configs:
            raise MmfaithError(f"{source}: config {config!r} is not one of this release's ({', '.join(configs)}).")
        return datasets.load_dataset(str(found.path), config, split=split)
    from mmfaith.release.declaration import declaration_of

    declaration = declaration_of(family)
    units = declaration.units(declaration.read_build(found.path))
    config = config if config is not None else next(iter(units), None)
    if config not in units:
        raise MmfaithError(f"{source}: config {config!r} is not one of this build's ({', '.join(units) or 'none'}).")
    if split != "test":
        raise MmfaithError(f"{source}: split {split!r}: a build has one split, test.")
    features = declaration.features(config)
    rows = [declaration.to_row(found.path, config, unit) for unit in sorted(units[config], key=lambda u: u[0]["id"])]
    return datasets.Dataset.from_list(rows, features=features)
