"""`mmfaith build spd-faith --from-official SOURCE --out BUILD_DIR`: the official SPD-Faith-Bench as a build dir.

SOURCE is one of (facts of both layouts: /work/shared/data/spd_official/README.md):
- a local snapshot folder of the Hub dataset (Jackson-Lv/SPD-Faith-Bench layout: splits easy,
  medium, hard, multi_diff; columns image_id, image1 = original, image2 = edited,
  num_differences, differences[{type, category, bbox_x, bbox_y, bbox_w, bbox_h, description}]),
  read with the real `datasets.load_dataset(folder)`;
- a Hub id `ORG/NAME[@REVISION]`, downloaded with huggingface_hub (cached; offline once cached)
  and then read as a folder (tested against the local fake Hub of tests/hub_server.py, online and
  with HF_HUB_OFFLINE=1; the real Hub is not reachable from the test machine);
- a GitHub-layout JSONL file ({qid, image: canvas path, modifications[{type, category}],
  is_faithful, question}); canvas paths are relative to `images` (default: the JSONL's folder).

What each record keeps (schemas/spd_faith_pair.schema.json; `build.slot` is "official"):
- id `official-<split>-<image_id>` (GitHub: `official-<tier or github>-<qid>`), characters
  outside [A-Za-z0-9_.-] replaced by "_";
- subset/difficulty: easy|medium|hard -> single with that difficulty; multi_diff -> multi; a
  GitHub row outside such a folder -> by its count (1 single, 2+ multi, 0 control), difficulty
  null (the JSONL carries no tier);
- each difference: its type (normalised with the judge's TYPE_SYNONYMS), its COCO category
  (lower-cased; category_id from the COCO names of the embedded COCO annotations), its box, and a
  description; colors are null (the release names none);
- boxes (Hub only): bbox_before = [bbox_x, bbox_y, bbox_w, bbox_h], in pixels of the original,
  for every type. The official pipeline (data/data_pipeline/generator.py of the GitHub repository)
  logs `bbox` = the COCO annotation box for color and remove, and `original_bbox` / `new_bbox` for
  position; the Hub row has a single box, which we take to be the original (COCO) box because it
  is the one field all three types log. The position's destination is not in the row:
  bbox_after is null for position (unknown), equal to bbox_before for color, null for remove.
  area_ratio is the box's share of the image (the release has no masks). GitHub rows have no
  boxes: bbox_before, bbox_after and area_ratio are null;
- caption: the row-level free text that the first difference carries (the others keep their own
  non-empty text as their description); a difference without text gets a plain sentence
  ("The bus was removed.");
- source: dataset "SPD-Faith-Bench", split, image_id (the leading COCO image id of the official
  id, e.g. 2006 of "2006_1"), file_name (the COCO file name the pipeline reads,
  `<image_id:012d>.jpg`, so the bootstrap clusters pairs of one photograph), license and
  attribution, and `official` {origin, repo, revision, image_id or qid, is_faithful, question, cut}.

Pixels are kept exactly: each JPEG is decoded once and written as lossless PNG with
mmfaith.images.png_bytes (fixed settings), so a re-import of the same revision is byte-identical.
Rows that cannot be imported (a tier/count mismatch, an unknown category, a canvas whose halves
disagree) go to rejected.jsonl with the reason; nothing is silently dropped.
"""
from __future__ import annotations

import io
import json
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from PIL import Image

from mmfaith import __version__
from mmfaith.builders.spd_faith.canvas_cut import CutRefused, best_cut
from mmfaith.errors import MmfaithError
from mmfaith.loaders.spd_faith.difference_types import TYPE_SYNONYMS
from mmfaith.images import DEFAULT_MAX_PIXELS, png_bytes, read_rgb, sha256_bytes
from mmfaith.jsonl import canonical_json, write_atomic
from mmfaith.schema import schema_errors

DATASET = "SPD-Faith-Bench"
HUB_ID = "Jackson-Lv/SPD-Faith-Bench"
GITHUB_REPO = "Johanson-colab/SPD-Faith-Bench"
SPLITS = ("easy", "medium", "hard", "multi_diff")
MARKER = "build.json"
"""Written last, as a build's: recipe.family spd-faith and recipe.official (what was imported); no times."""
_HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*(@[^@/]+)?$")
_SENTENCE = {"color": "The {} changed color.", "remove": "The {} was removed.", "position": "The {} moved."}


@dataclass
class ImportSummary:
    """What an import wrote: accepted records and rejected rows (with reasons)."""

    out: Path
    origin: str
    revision: str
    accepted: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)


class RowRejected(MmfaithError):
    """A row that cannot become a record; the message is the reason written to rejected.jsonl."""


def coco_category_ids() -> dict[str, int]:
    """COCO name -> COCO category id, from the COCO annotations embedded in mmfaith."""
    from importlib.resources import files

    path = Path(str(files("mmfaith.data").joinpath("coco_sample", "annotations", "instances_train2017.json")))
    return {c["name"]: int(c["id"]) for c in json.loads(path.read_text(encoding="utf-8"))["categories"]}


def safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def coco_image_id(official_id: str) -> int:
    """The leading COCO image id of an official id ("2006_1" -> 2006); RowRejected when there is none."""
    match = re.match(r"\d+", official_id)
    if not match:
        raise RowRejected(f"image_id {official_id!r} does not start with a COCO image id")
    return int(match.group(0))


def _decode(data: bytes, where: str) -> np.ndarray:
    """Decode image bytes once to RGB (bounded like mmfaith.images.read_rgb)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.size[0] * image.size[1] > DEFAULT_MAX_PIXELS:
                raise RowRejected(f"{where}: {image.size[0]}x{image.size[1]} exceeds {DEFAULT_MAX_PIXELS} pixels")
            return np.asarray(image.convert("RGB"))
    except (OSError, ValueError, SyntaxError) as exc:
        raise RowRejected(f"{where}: cannot decode the image ({exc})") from exc


def _difference(raw: dict[str, Any], index: int, width: int, height: int, categories: dict[str, int],
                with_box: bool) -> dict[str, Any]:
    kind = str(raw.get("type") or "").strip().lower()
    kind = TYPE_SYNONYMS.get(kind, kind)
    category = str(raw.get("category") or "").strip().lower()
    if kind not in _SENTENCE:
        raise RowRejected(f"differences[{index}].type {raw.get('type')!r} is not color, remove or position")
    if category not in categories:
        raise RowRejected(f"differences[{index}].category {raw.get('category')!r} is not a COCO category name")
    box = None
    area = None
    if with_box:
        try:
            x, y, w, h = (float(raw[k]) for k in ("bbox_x", "bbox_y", "bbox_w", "bbox_h"))
        except (KeyError, TypeError, ValueError) as exc:
            raise RowRejected(f"differences[{index}] needs numeric bbox_x, bbox_y, bbox_w, bbox_h ({exc})") from exc
        box = [max(0.0, x), max(0.0, y), max(0.0, w), max(0.0, h)]
        area = min(1.0, box[2] * box[3] / (width * height))
        if area <= 0:
            raise RowRejected(f"differences[{index}] has an empty box ({w} x {h})")
    return {"type": kind, "category": category, "category_id": categories[category], "color_before": None,
            "color_after": None, "bbox_before": box, "bbox_after": box if kind == "color" else None,
            "area_ratio": round(area, 6) if area is not None else None,
            "description": _SENTENCE[kind].format(category)}


def _subset(split: str | None, n: int) -> tuple[str, str | None]:
    if split in ("easy", "medium", "hard"):
        if n != 1:
            raise RowRejected(f"split {split} is single-difference, but the row has {n} differences")
        return "single", split
    if split == "multi_diff":
        if not 2 <= n <= 5:
            raise RowRejected(f"split multi_diff needs 2 to 5 differences, the row has {n}")
        return "multi", None
    if n > 5:
        raise RowRejected(f"{n} differences (at most 5)")
    return ("control" if n == 0 else "single" if n == 1 else "multi"), None


@dataclass(frozen=True)
class OfficialRow:
    """One official row, read but not yet checked: the two images and what the record needs."""

    split: str
    official_id: str
    key: str
    image_a: np.ndarray
    image_b: np.ndarray
    differences: list[dict[str, Any]]
    with_box: bool
    num_differences: int | None
    extra: dict[str, Any]


def _record(row: OfficialRow, categories: dict[str, int], license_: dict[str, Any], official: dict[str, Any],
            out: Path) -> dict[str, Any]:
    height, width = row.image_a.shape[:2]
    if row.image_b.shape != row.image_a.shape:
        raise RowRejected(f"image1 is {width}x{height}, image2 {row.image_b.shape[1]}x{row.image_b.shape[0]}")
    differences = [_difference(d, i, width, height, categories, row.with_box) for i, d in enumerate(row.differences)]
    if row.num_differences is not None and row.num_differences != len(differences):
        raise RowRejected(f"num_differences {row.num_differences} but {len(differences)} differences listed")
    texts = [str(d.get("description") or "").strip() for d in row.differences]
    caption = texts[0] if texts and texts[0] else None
    for difference, text in zip(differences[1:], texts[1:]):
        if text:
            difference["description"] = text
    subset, difficulty = _subset(row.split if row.split in SPLITS else None, len(differences))
    record_id = safe_id(f"official-{row.split}-{row.key}")
    image_id = coco_image_id(row.official_id)
    files = {}
    for side, rgb in (("a", row.image_a), ("b", row.image_b)):
        data = png_bytes(rgb)
        name = f"images/{record_id}_{side}.png"
        write_atomic(out / name, data)
        files[side] = (name, sha256_bytes(data))
    return {
        "id": record_id, "image_a": files["a"][0], "image_b": files["b"][0],
        "image_a_sha256": files["a"][1], "image_b_sha256": files["b"][1],
        "subset": subset, "difficulty": difficulty, "num_differences": len(differences), "differences": differences,
        "instance_count": None, "caption": caption,
        "source": {"dataset": DATASET, "split": row.split, "image_id": image_id, "file_name": f"{image_id:012d}.jpg",
                   "license": license_, "flickr_url": None, "coco_url": None,
                   "attribution": f"{DATASET} ({official['repo']}@{official['revision']}), pair {row.official_id}, "
                                  f"{license_['name']}; the photograph is COCO image {image_id} under its Flickr "
                                  "license (not recorded by the official release).",
                   "official": {**official, "image_id": row.official_id, **row.extra}},
        "verification": {"status": "pending"},
        "build": {"mmfaith_version": __version__, "seed": 0, "slot": "official",
                  "planner": {"name": "official-import", "origin": official["origin"]}, "inpainter": None,
                  "gates": {"delta_e": [], "outside_changed_pixels": None}},
    }


# -- the sources ------------------------------------------------------------------------------------

def _card_license(folder: Path) -> dict[str, Any]:
    """The dataset card's `license:` (YAML front matter), else "not stated"."""
    card = folder / "README.md"
    name = "not stated by the dataset card"
    if card.is_file():
        match = re.search(r"^license:\s*(\S+)", card.read_text(encoding="utf-8", errors="replace"), flags=re.M)
        if match:
            name = match.group(1).strip("'\"")
    return {"id": 0, "name": name, "url": f"https://huggingface.co/datasets/{HUB_ID}"}


def _folder_revision(folder: Path) -> str:
    """A Hub snapshot's commit (the snapshots/<sha> folder name), else a hash of the data files."""
    if folder.parent.name == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", folder.name):
        return folder.name
    digest = sha256_bytes(b"".join(f"{p.relative_to(folder)}:{sha256_bytes(p.read_bytes())}\n".encode()
                                   for p in sorted(folder.rglob("*")) if p.is_file() and ".cache" not in p.parts))
    return f"local-sha256:{digest[:16]}"


def _hub_rows(folder: Path) -> Iterator[OfficialRow | tuple[str, str, str]]:
    """Rows of a Hub-layout folder, split by split in SPLITS order, by image_id within a split."""
    import datasets

    try:
        loaded = datasets.load_dataset(str(folder))
    except Exception as exc:  # datasets raises many types for a folder it cannot read
        raise MmfaithError(f"{folder}: not a Hub-layout SPD-Faith-Bench folder that `datasets` can load "
                           f"({exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                           "pass the snapshot folder (data/<split>-*.parquet) or a GitHub-layout JSONL.") from exc
    unknown = sorted(set(loaded) - set(SPLITS))
    if unknown or not loaded:
        raise MmfaithError(f"{folder}: splits {', '.join(sorted(loaded)) or 'none'}; the official release has "
                           f"{', '.join(SPLITS)}.")
    for split in [s for s in SPLITS if s in loaded]:
        table = loaded[split]
        missing = {"image_id", "image1", "image2", "num_differences", "differences"} - set(table.column_names)
        if missing:
            raise MmfaithError(f"{folder} split {split}: column(s) {', '.join(sorted(missing))} missing "
                               f"(has {', '.join(table.column_names)}).")
        table = table.cast_column("image1", datasets.Image(decode=False)).cast_column("image2", datasets.Image(decode=False))
        rows = sorted(table, key=lambda r: (len(str(r["image_id"])), str(r["image_id"])))
        for row in rows:
            official_id = str(row["image_id"])
            where = f"{folder} split {split} image_id {official_id}"
            try:
                a = _decode(row["image1"]["bytes"], f"{where} image1")
                b = _decode(row["image2"]["bytes"], f"{where} image2")
            except RowRejected as exc:
                yield split, official_id, str(exc)
                continue
            differences = row["differences"] or []
            if isinstance(differences, str):  # some exports keep the list as a JSON string
                try:
                    differences = json.loads(differences)
                except ValueError:
                    yield split, official_id, f"{where}: differences is neither a list nor a JSON list"
                    continue
            yield OfficialRow(split, official_id, official_id, a, b, list(differences), True,
                              row["num_differences"], {})


def _github_rows(jsonl: Path, images: Path) -> Iterator[OfficialRow | tuple[str, str, str]]:
    """Rows of a GitHub-layout JSONL, canvases cut where their halves agree best (canvas_cut)."""
    for number, line in enumerate(jsonl.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            qid, path, modifications = str(raw["qid"]), str(raw["image"]), raw["modifications"]
        except (ValueError, KeyError, TypeError) as exc:
            raise MmfaithError(f"{jsonl}:{number}: not an official SPD-Faith JSONL line (needs qid, image, "
                               f"modifications): {exc}") from exc
        parts = Path(path).parts
        split = next((p for p in reversed(parts[:-1]) if p in SPLITS), "github")
        try:
            cut = best_cut(read_rgb(images / path))
        except (CutRefused, MmfaithError) as exc:
            yield split, qid, f"{jsonl}:{number} canvas {path}: {exc}"
            continue
        extra = {"qid": qid, "canvas": path, "is_faithful": raw.get("is_faithful"), "question": raw.get("question"),
                 "cut": cut.as_json()}
        yield OfficialRow(split, qid, qid, cut.first, cut.second, list(modifications or []), False, None, extra)


def _download(source: str) -> Path:
    """A local snapshot of the Hub dataset `ORG/NAME[@REVISION]` (huggingface_hub's cache; offline once cached)."""
    from huggingface_hub import snapshot_download

    repo_id, _, revision = source.partition("@")
    try:
        return Path(snapshot_download(repo_id, repo_type="dataset", revision=revision or None))
    except Exception as exc:  # network, auth and cache-miss errors alike
        raise MmfaithError(f"--from-official {source}: cannot fetch that Hub dataset ({exc.__class__.__name__}); "
                           "check the id and revision, the network or HF_HUB_OFFLINE, or pass a local snapshot "
                           "folder.") from exc


def import_official(source: str, out: Path, images: Path | None = None) -> ImportSummary:
    """Import the official release at `source` (module docstring) into the build dir `out`.

    `out` must be absent, empty, or a previous official import (its build.json names
    recipe.official), which is replaced whole. Returns the summary; rejected rows are in out/rejected.jsonl.
    """
    path = Path(source)
    if path.is_file():
        rows, origin = _github_rows(path, images or path.parent), "github-jsonl"
        official = {"origin": origin, "repo": GITHUB_REPO,
                    "revision": f"local-sha256:{sha256_bytes(path.read_bytes())[:16]}"}
        license_ = {"id": 0, "name": "MIT (repository); photographs: COCO images under their Flickr licenses",
                    "url": f"https://github.com/{GITHUB_REPO}"}
    elif path.is_dir():
        rows, origin = _hub_rows(path), "hub-folder"
        official = {"origin": origin, "repo": HUB_ID, "revision": _folder_revision(path)}
        license_ = _card_license(path)
    elif _HUB_REPO.match(source):
        folder = _download(source)
        rows, origin = _hub_rows(folder), "hub"
        official = {"origin": origin, "repo": source.partition("@")[0], "revision": _folder_revision(folder)}
        license_ = _card_license(folder)
    else:
        raise MmfaithError(f"--from-official {source}: no such file or folder, and not a Hub id ORG/NAME[@REVISION]; "
                           "pass a Hub snapshot folder, a GitHub-layout JSONL file, or a Hub id.")
    if images is not None and origin != "github-jsonl":
        raise MmfaithError("--images goes with a GitHub-layout JSONL (the folder its canvas paths are relative to).")
    _prepare(out)
    categories = coco_category_ids()
    summary = ImportSummary(out, origin, official["revision"])
    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for row in rows:
        if isinstance(row, tuple):
            summary.rejected.append({"split": row[0], "official_id": row[1], "reason": row[2]})
            continue
        try:
            record = _record(row, categories, license_, official, out)
        except RowRejected as exc:
            summary.rejected.append({"split": row.split, "official_id": row.official_id, "reason": str(exc)})
            continue
        if record["id"] in seen:
            summary.rejected.append({"split": row.split, "official_id": row.official_id,
                                     "reason": f"a second row with id {record['id']}"})
            continue
        errors = schema_errors("spd_faith_pair", record)
        if errors:  # a bug of this module, not of the data: say so loudly
            raise MmfaithError(f"record {record['id']}: the import made an invalid record: {'; '.join(errors[:3])}")
        seen.add(record["id"])
        records.append(record)
    summary.accepted = len(records)
    write_atomic(out / "records.jsonl", "".join(canonical_json(r) + "\n" for r in records).encode("utf-8"))
    write_atomic(out / "rejected.jsonl", "".join(canonical_json(r) + "\n" for r in summary.rejected).encode("utf-8"))
    by_group = Counter(f"{r['subset']}/{r['difficulty']}" if r["difficulty"] else r["subset"] for r in records)
    build_json = {"recipe": {"family": "spd-faith", "official": official, "seed": 0,
                             "planner": {"name": "official-import"}},
                  "source": {"dataset": DATASET, "license": license_}, "mmfaith_version": __version__,
                  "status": "complete", "counts": {"accepted": dict(sorted(by_group.items())),
                                                   "rejected": len(summary.rejected)}}
    write_atomic(out / MARKER, canonical_json(build_json).encode("utf-8"))
    return summary


def _prepare(out: Path) -> None:
    """`out` absent or empty (created), or a previous official import (emptied); else MmfaithError."""
    from mmfaith.outdir import prepare_out_dir

    prepare_out_dir(out, "build")
    held = sorted(p.name for p in out.iterdir())
    try:
        previous = json.loads((out / MARKER).read_text(encoding="utf-8"))["recipe"]["official"]
    except (OSError, ValueError, KeyError, TypeError):
        previous = None
    if held and previous is None:
        raise MmfaithError(f"build --out {out}: not empty ({', '.join(held[:3])}) and not an official import; "
                           "choose a new --out.")
    for child in out.iterdir():
        shutil.rmtree(child) if child.is_dir() else child.unlink()
    (out / "images").mkdir()
