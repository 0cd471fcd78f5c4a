"""`mmfaith release SUITE`: one Hugging Face dataset repo for a whole suite, one config per family.

Contract
--------
`write_suite_release(suite, request)` releases each family's suite dataset (a build dir: a recipe of
the suite, built once into the cache as `evaluate` builds it, or a folder of `mmfaith suite build`)
with the shared writer and the family's own `ReleaseDeclaration` (release/writer.py; nothing here
knows a family), into one folder:

- `families/<family>/`: the family's release (README.md, manifest.json, data/<config>/test-*.parquet),
  verifiable and loadable alone (`mmfaith verify`, `mmfaith.loaders`);
- `README.md`: the suite's card. Its Hub front matter declares one config per family, named after the
  family with `_` for `-` (spd_faith, vfaith, crm, mcot), whose splits are the family's own configs
  (named with `_` for `-`: datasets allows only word characters in split names), so
  `datasets.load_dataset(REPO, "crm")` gives every variant of CRM as a split. A family config whose
  features differ from those of the family's first config (VFaith's perception statements beside its
  pairs) cannot share that config: it is a config of its own, `<family>_<config>`. Configs without
  rows are left out of the front matter.
- `manifest.json` (format `mmfaith-suite-release/1`): name, version, tag, the suite (name, version,
  description), per family its folder, its Hub configs ({config: {split: family config}}), its row
  count and noun; `files`: README.md and each family's manifest.json with sha256 and size.

`--previous` (a previous suite release folder, or ORG/NAME[@REV] on the Hub) gives each family's
changelog against the same family's release in it. The files are written to a staging folder and
moved into place at the end: a failed release leaves nothing behind. Same suite, builds and
arguments: the same bytes.

`verify_folder(folder)` verifies a family release or a suite release: for a suite, README.md and the
family manifests against the suite manifest, no file outside what the manifests list, and each family
release verified whole (`verify_release`: every file hashed, every row checked), problems prefixed by
the family's folder.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from mmfaith import __version__, families
from mmfaith.errors import MmfaithError
from mmfaith.jsonl import read_json_object
from mmfaith.outdir import staged_folder
from mmfaith.release.card import fill, pretty_name, size_category
from mmfaith.release.declaration import declaration_of
from mmfaith.release.manifest import (MANIFEST, VerifyReport, files_under, file_entry, manifest_bytes,
                                      previous_manifest, verify_release)
from mmfaith.release.writer import SPLIT, ReleaseRequest, ReleaseSummary, check_request, write_release
from mmfaith.suite import Suite, suite_dataset

FORMAT = "mmfaith-suite-release/1"
FAMILIES_DIR = "families"


@dataclass(frozen=True)
class SuiteReleaseSummary:
    """What a suite release wrote: each family's summary and Hub configs ({config: {split: family config}})."""

    out: Path
    released: dict[str, ReleaseSummary]
    configs: dict[str, dict[str, dict[str, str]]]


def hub_name(name: str) -> str:
    """A config or split name as the Hub and `datasets` take it: `-` becomes `_`."""
    return re.sub(r"\W", "_", name)


def family_configs(family: str, rows: dict[str, int]) -> dict[str, dict[str, str]]:
    """The Hub configs of one family in the suite repo: {config: {split: family config}} (module docstring)."""
    declaration = declaration_of(family)
    shipped = [config for config, count in rows.items() if count]
    configs: dict[str, dict[str, str]] = {}
    if not shipped:
        return configs
    first = declaration.features(shipped[0])
    for config in shipped:
        name = hub_name(family) if declaration.features(config) == first else hub_name(f"{family}-{config}")
        configs.setdefault(name, {})[hub_name(config)] = config
    return configs


def is_suite_source(source: str) -> bool:
    """Whether `mmfaith release SOURCE` names a suite (`default`, a suite file, a folder holding suite.json) rather
    than a build dir."""
    path = Path(source)
    if (path / "build.json").is_file():
        return False
    return source == "default" or (path.is_file() and path.suffix == ".json") or (path / "suite.json").is_file()


def write_suite_release(suite: Suite, request: ReleaseRequest, progress: bool = True) -> SuiteReleaseSummary:
    """Release every family of `suite` into `request.out` (module docstring); `request.build` is unused."""
    check_request(request)
    builds = {name: _build_dir(suite, name, progress) for name in suite.families()}
    previous = {name: previous_manifest(request.previous, name, f"{FAMILIES_DIR}/{name}") for name in builds} \
        if request.previous and _is_suite_release(request.previous) else {}
    released: dict[str, ReleaseSummary] = {}
    configs: dict[str, dict[str, dict[str, str]]] = {}
    with staged_folder(request.out, "release") as staging:
        for name, build in builds.items():
            folder = staging / FAMILIES_DIR / name
            released[name] = write_release(declaration_of(name), replace(request, build=build, out=folder),
                                           previous=previous.get(name))
            configs[name] = family_configs(name, released[name].rows)
        (staging / "README.md").write_bytes(suite_card(suite, request, released, configs).encode("utf-8"))
        manifest = {
            "format": FORMAT, "name": request.name, "version": request.version, "tag": f"v{request.version}",
            "mmfaith_version": __version__,
            "suite": {"name": suite.name, "version": suite.version, "description": suite.description},
            "families": {name: {"folder": f"{FAMILIES_DIR}/{name}", "configs": configs[name],
                                "records": released[name].records, "noun": released[name].noun,
                                "rows": released[name].rows} for name in builds},
            "files": {"README.md": file_entry(staging / "README.md"),
                      **{f"{FAMILIES_DIR}/{name}/{MANIFEST}": file_entry(staging / FAMILIES_DIR / name / MANIFEST)
                         for name in builds}},
        }
        (staging / MANIFEST).write_bytes(manifest_bytes(manifest))
    return SuiteReleaseSummary(out=request.out, released=released, configs=configs)


def _is_suite_release(source: str) -> bool:
    """Whether `--previous` is a suite release: always true of a Hub id (its manifest names it when fetched); a
    local folder must hold a suite release's manifest.json (a one-line error otherwise)."""
    if not Path(source).is_dir():
        return True
    manifest = read_json_object(Path(source) / MANIFEST, "pass the folder `mmfaith release SUITE` wrote.")
    if manifest.get("format") != FORMAT:
        raise MmfaithError(f"--previous {source}: not a suite release (format {manifest.get('format')!r}, not "
                           f"{FORMAT!r}); pass the previous release of this suite.")
    return True


def _build_dir(suite: Suite, family: str, progress: bool) -> Path:
    """The build dir of a family of the suite; a one-line error when the suite names a release or a Hub id."""
    source = suite_dataset(suite, family, progress)
    if not (Path(source) / "build.json").is_file():
        raise MmfaithError(f"{suite.path}: {family}'s dataset {source} is not a build dir; a suite release packs "
                           "builds (a recipe, or a folder of `mmfaith suite build`), not releases.")
    return Path(source)


def suite_card(suite: Suite, request: ReleaseRequest, released: dict[str, ReleaseSummary],
               configs: dict[str, dict[str, dict[str, str]]]) -> str:
    """README.md of the suite release: cards/suite.md with the Hub front matter (module docstring); pure."""
    data_files = [{"config_name": config, "data_files": [
        {"split": split, "path": f"{FAMILIES_DIR}/{name}/data/{family_config}/{SPLIT}-*.parquet"}
        for split, family_config in splits.items()]} for name in released for config, splits in configs[name].items()]
    if data_files:
        data_files[0]["default"] = True
    total = sum(sum(summary.rows.values()) for summary in released.values())
    front = {"pretty_name": pretty_name(request.name), "license": "other",
             "license_name": "per-image-source-licenses",
             "license_link": f"https://huggingface.co/datasets/{request.name}#licenses", "language": ["en"],
             "task_categories": ["visual-question-answering"],
             "tags": ["multimodal", "faithfulness", "benchmark", "mmfaith"],
             "size_categories": [size_category(total)],
             "configs": data_files}
    table = "".join(
        f"| {families.get(name).title} | `{config}` | {', '.join(f'`{s}` ({released[name].rows[c]})' for s, c in splits.items())} "
        f"| {families.get(name).summary} |\n"
        for name in released for config, splits in configs[name].items())
    loading = "\n".join(f'{hub_name(name)} = load_dataset("{request.name}", "{config}", revision="v{request.version}")'
                        for name in released for config in list(configs[name])[:1])
    runs = "".join(f"| `{name}` | {' '.join(suite.entry(name).run) or '(none)'} | "
                   f"{'yes' if suite.entry(name).no_image else 'no'} |\n" for name in released)
    return fill("suite.md", front, pretty_name=front["pretty_name"], version=request.version,
                mmfaith_version=__version__, suite_name=suite.name, suite_version=suite.version,
                description=suite.description, configs_table=table, loading=loading, runs_table=runs,
                repo_id=request.name,
                counts=", ".join(f"{families.get(n).title} {s.records} {s.noun}" for n, s in released.items()),
                include=("verified and pending records (`--include all`): check the verification line of each "
                         "family's card" if request.include == "all" else "verified records only"))


def verify_folder(folder: Path) -> VerifyReport:
    """`mmfaith verify`: a family release (`verify_release`) or a suite release (module docstring)."""
    path = folder / MANIFEST
    manifest = read_json_object(path, "pass the folder `mmfaith release` wrote.") if path.is_file() else {}
    if manifest.get("format") != FORMAT:
        return verify_release(folder)
    listed = manifest.get("files")
    named = manifest.get("families")
    if not isinstance(listed, dict) or not isinstance(named, dict):
        raise MmfaithError(f"{path}: no 'files' or 'families' map; the manifest was edited or cut: restore it, or "
                           "re-run `mmfaith release`.")
    problems: list[str] = []
    files, rows = len(listed), 0
    inside = tuple(f"{FAMILIES_DIR}/{name}/" for name in named)
    for name in files_under(folder):
        if name not in listed and not name.startswith(inside):
            problems.append(f"{name}: file not listed in {MANIFEST}; remove it or re-run `mmfaith release`.")
    for name, entry in sorted(listed.items()):
        if not (folder / name).is_file():
            problems.append(f"{name}: listed in {MANIFEST} but missing.")
        elif file_entry(folder / name) != {"sha256": entry.get("sha256"), "bytes": entry.get("bytes")}:
            problems.append(f"{name}: sha256 differs from the manifest's: the file was changed.")
    for name in named:
        sub = folder / FAMILIES_DIR / name
        if not (sub / MANIFEST).is_file():
            continue  # reported above as missing
        report = verify_release(sub)
        files += report.files
        rows += report.rows
        problems.extend(f"{FAMILIES_DIR}/{name}/{problem}" for problem in report.problems)
    return VerifyReport(files=files, rows=rows, problems=problems)
