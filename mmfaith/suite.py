"""A suite: which dataset each family is evaluated on, and how it is asked (`mmfaith evaluate`).

Contract
--------
A suite file is JSON: ``{"format": "mmfaith-suite/1", "name", "version", "description",
"families": {FAMILY: ENTRY}}`` with FAMILY a registered family and ENTRY either
``{"dataset": SOURCE, "run": [ARG...]}`` (SOURCE a release folder, relative to the suite file's
folder, or a Hub id ORG/NAME@REVISION) or ``{"build": [ARG...], "run": [ARG...]}`` (the arguments
of `mmfaith build FAMILY` on a COCO source, without --out). `run` holds the family's own
`mmfaith run FAMILY` flags the suite asks with (e.g. ``--circular``). An entry may add
``"no_image": true``: the suite also asks the family's probes without the images (`run --no-image`),
so a profile holds the model's multimodal gain (MMStar's; `evaluate` runs that pass).

- `load_suite(name_or_path)`: "default" (or None) is the suite shipped in the package
  (mmfaith/data/suites/default.json, the embedded COCO sample); anything else is a path. A bad
  file is one `mmfaith: error:` line naming the file and what is wrong.
- `suite_dataset(suite, family)`: the dataset source of one family. A recipe on the embedded
  sample is built once into the cache (`mmfaith.cache.cache_dir()/suites/...`, keyed by the
  recipe and mmfaith's version; built deterministically, so every machine builds the same bytes)
  and reused after: the build runs in a folder of its own and is put in place only when complete,
  so nothing half-built is ever read (a killed build starts again on the next call).
- `build_suite(suite, out, coco_annotations, images)`: every recipe of the suite built on a real
  COCO split into OUT/FAMILY (`mmfaith suite build`); OUT/suite.json names those folders, so it is
  a suite file itself.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith import __version__, families
from mmfaith.cache import cache_dir
from mmfaith.errors import MmfaithError
from mmfaith.jsonl import canonical_json, write_text_atomic

FORMAT = "mmfaith-suite/1"
DEFAULT = "default"
_SHIPPED = Path(__file__).parent / "data" / "suites"


@dataclass(frozen=True)
class SuiteEntry:
    """One family's part of a suite: a dataset source or a build recipe, and the run flags."""

    family: str
    dataset: str | None
    build: tuple[str, ...] | None
    run: tuple[str, ...]
    no_image: bool = False
    """Whether the suite also asks the family's probes without the images (the `--no-image` pass)."""


@dataclass(frozen=True)
class Suite:
    """A loaded suite file (module docstring); `entries` in the file's order."""

    name: str
    version: str
    description: str
    path: Path
    entries: tuple[SuiteEntry, ...]

    def entry(self, family: str) -> SuiteEntry:
        for entry in self.entries:
            if entry.family == family:
                return entry
        raise MmfaithError(f"suite {self.name} ({self.path}) has no {family} entry; it has "
                           f"{', '.join(self.families())}.")

    def families(self) -> list[str]:
        return [entry.family for entry in self.entries]

    def identity(self) -> dict[str, str]:
        """What a profile records of the suite: {"name", "version"}."""
        return {"name": self.name, "version": self.version}


def load_suite(name_or_path: str | Path | None) -> Suite:
    """The suite named "default" (or None), or the suite file at a path (module docstring)."""
    path = _SHIPPED / "default.json" if name_or_path in (None, DEFAULT) else Path(name_or_path)
    if path.is_dir():
        path = path / "suite.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MmfaithError(f"--suite {path}: no such file; give a suite file (JSON) or `default`.") from None
    except ValueError as exc:
        raise MmfaithError(f"{path}: not a suite file: invalid JSON ({exc}).") from None
    return _parse(document, path)


def _parse(document: Any, path: Path) -> Suite:
    def bad(what: str) -> MmfaithError:
        return MmfaithError(f"{path}: not a {FORMAT} suite file: {what}.")

    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise bad(f'"format" must be "{FORMAT}"')
    for key in ("name", "version"):
        if not isinstance(document.get(key), str) or not document[key]:
            raise bad(f'"{key}" must be a non-empty string')
    listed = document.get("families")
    if not isinstance(listed, dict) or not listed:
        raise bad('"families" must map at least one family name to its entry')
    entries = []
    for family, entry in listed.items():
        families.get(family)  # an unknown family: one line listing the known ones
        if not isinstance(entry, dict) or ("dataset" in entry) == ("build" in entry):
            raise bad(f'{family}: an entry has "dataset" (a source) or "build" (a recipe), one of the two')
        for key in ("build", "run"):
            if key in entry and not (isinstance(entry[key], list) and all(isinstance(a, str) for a in entry[key])):
                raise bad(f'{family}: "{key}" must be a list of strings (command-line arguments)')
        if "dataset" in entry and not isinstance(entry["dataset"], str):
            raise bad(f'{family}: "dataset" must be a string')
        if not isinstance(entry.get("no_image", False), bool):
            raise bad(f'{family}: "no_image" must be true or false')
        dataset = entry.get("dataset")
        if dataset is not None and (path.parent / dataset).exists():
            dataset = str(path.parent / dataset)
        entries.append(SuiteEntry(family, dataset, tuple(entry["build"]) if "build" in entry else None,
                                  tuple(entry.get("run", ())), entry.get("no_image", False)))
    return Suite(document["name"], document["version"], str(document.get("description", "")), path, tuple(entries))


def suite_dataset(suite: Suite, family: str, progress: bool = True) -> str:
    """The dataset source of `family` in `suite`: its named source, or its recipe built once into the cache."""
    entry = suite.entry(family)
    if entry.dataset is not None:
        return entry.dataset
    folder = recipe_folder(entry)
    if not folder.is_dir():
        _build_once(entry, folder, progress)
    return str(folder)


def recipe_folder(entry: SuiteEntry) -> Path:
    """The cache folder of a recipe's build, keyed by the family, the recipe and mmfaith's version."""
    assert entry.build is not None
    key = hashlib.sha256(canonical_json({"family": entry.family, "build": list(entry.build),
                                         "mmfaith": __version__}).encode("utf-8")).hexdigest()[:16]
    return cache_dir() / "suites" / f"{entry.family}-{key}"


def _build_once(entry: SuiteEntry, folder: Path, progress: bool) -> None:
    """Build into a folder of this process's own, then put it in place whole. Two processes building the same
    recipe at once both finish; the first in place wins and the other's identical build is dropped."""
    assert entry.build is not None
    partial = folder.parent / f".{folder.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    try:
        run_build(entry.family, list(entry.build), partial, progress)
        try:
            os.replace(partial, folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def run_build(family: str, recipe: list[str], out: Path, progress: bool) -> None:
    """`mmfaith build FAMILY --out OUT RECIPE...` in this process; an error if the build fails."""
    from mmfaith.cli import parser

    argv = ["build", family, "--out", str(out), *recipe, *([] if progress else ["--no-progress"])]
    args = parser().parse_args(argv)
    if args.handler(args) != 0:
        raise MmfaithError(f"mmfaith {' '.join(argv)} failed; run it alone to see why.")


def build_suite(suite: Suite, out: Path, coco_annotations: Path, images: Path, progress: bool = True) -> Path:
    """Every recipe of `suite` built on a COCO split into OUT/FAMILY, and OUT/suite.json naming them (module
    docstring); returns OUT/suite.json. Families the suite names by source are copied into suite.json as they are."""
    out.mkdir(parents=True, exist_ok=True)
    listed: dict[str, Any] = {}
    for entry in suite.entries:
        if entry.build is None:
            listed[entry.family] = {"dataset": entry.dataset, "run": list(entry.run), "no_image": entry.no_image}
            continue
        run_build(entry.family, [*entry.build, "--coco-annotations", str(coco_annotations), "--images", str(images)],
                  out / entry.family, progress)
        listed[entry.family] = {"dataset": entry.family, "run": list(entry.run), "no_image": entry.no_image}
    document = {"format": FORMAT, "name": suite.name, "version": suite.version,
                "description": f"{suite.description} Built on {coco_annotations.name}.".strip(),
                "built_from": {"suite": str(suite.path), "coco_annotations": str(coco_annotations),
                               "images": str(images), "mmfaith": __version__},
                "families": listed}
    write_text_atomic(out / "suite.json", json.dumps(document, indent=2) + "\n")
    return out / "suite.json"
