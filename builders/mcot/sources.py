"""Adapters for the published V* Bench and HR-Bench layouts (/work/shared/data/FORMATS.md sections 1-2).

Contract
--------
`resolve_origin(kind, origin)` gives the local path to read (fetching a Hub id) and its commit;
`read_source(kind, path, columns)` yields `SourceItem`s (the question, options, answer letter,
category, evidence boxes and the image's encoded bytes) in the source's own order.

- `kind` is "vstar", "hrbench-4k" or "hrbench-8k".
- `origin` is a dataset folder (V*: `test_questions.jsonl` beside the image folders, each image's
  `<name>.json` annotation giving `bbox` [[x, y, w, h], ...] and `target_object`; HR-Bench: the
  folder holding `hr_bench_4k.parquet` / `hr_bench_8k.parquet` or the `.tsv` files), one parquet or
  TSV file (V*'s lmms-lab mirror with the image embedded; an HR-Bench file), or a Hub dataset id
  `ORG/NAME[@REVISION]` fetched with huggingface_hub and then read as a folder.
- `columns` renames: {canonical name: the column's name in this copy}. Canonical names: V*
  `image`, `text`, `label`, `category`, `question_id`; HR-Bench `index`, `question`, `answer`, `A`,
  `B`, `C`, `D`, `category`, `cycle_category`, `image`.
- A row that lacks a field, or whose answer is not one of its options, is an error naming the file
  and row, and the `--columns` fix.
- HR-Bench images are base64 strings; in a TSV an image of 64 characters or fewer is the `index`
  of the row whose image it reuses (VLMEvalKit's convention).
"""
from __future__ import annotations

import base64
import binascii
import csv
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.loaders.release_files import HUB_REPO

KINDS = ("vstar", "hrbench-4k", "hrbench-8k")
VSTAR_COLUMNS = ("image", "text", "label", "category", "question_id")
HRBENCH_COLUMNS = ("index", "question", "answer", "A", "B", "C", "D", "category", "cycle_category", "image")
VSTAR_QUESTIONS = "test_questions.jsonl"
_OPTION_LINE = re.compile(r"^\(([A-Z])\)\s*(.*)$")
_INSTRUCTION = "answer with the option"


@dataclass(frozen=True)
class SourceItem:
    """One source question: `image_bytes` as the source stores them (JPEG, PNG ...)."""

    item_id: str
    question: str
    options: tuple[tuple[str, str], ...]
    answer: str
    category: str
    image_bytes: bytes
    file_name: str | None
    targets: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def parse_columns(text: str | None) -> dict[str, str]:
    """`--columns canonical=actual,...` as a dict; an error naming the bad pair."""
    mapping: dict[str, str] = {}
    for pair in filter(None, (text or "").split(",")):
        canonical, sep, actual = pair.partition("=")
        if not sep or not canonical.strip() or not actual.strip():
            raise MmfaithError(f"--columns {text!r}: {pair!r} is not NAME=COLUMN (e.g. --columns text=prompt,label=answer).")
        mapping[canonical.strip()] = actual.strip()
    return mapping


def resolve_origin(kind: str, origin: str) -> tuple[Path, str | None]:
    """(the local file or folder to read, the Hub commit it was fetched at; None for a local path).

    A Hub id is fetched with huggingface_hub (its cache; offline with HF_HUB_OFFLINE=1 once cached):
    V* whole (questions, images, annotations), HR-Bench only the file of its size."""
    path = Path(origin)
    if path.exists():
        return path, None
    if not HUB_REPO.match(origin):
        raise MmfaithError(f"--source-path {origin}: no such file or folder, and not a Hub id ORG/NAME[@REVISION].")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    repo_id, _, revision = origin.partition("@")
    patterns = None if kind == "vstar" else [f"hr_bench_{kind.split('-')[-1]}.*"]
    try:
        folder = Path(snapshot_download(repo_id, repo_type="dataset", revision=revision or None,
                                        allow_patterns=patterns))
    except (HfHubHTTPError, LocalEntryNotFoundError) as exc:
        raise MmfaithError(f"{origin}: cannot fetch that Hub dataset ({exc.__class__.__name__}); check the id, the "
                           "revision, HF_TOKEN, or pass a local folder.") from exc
    return folder, folder.name  # huggingface_hub's snapshot folder is named by the commit


def read_source(kind: str, path: Path, columns: dict[str, str] | None = None) -> Iterator[SourceItem]:
    """The items of one source read from a local file or folder (module docstring; `resolve_origin` for Hub ids)."""
    columns = dict(columns or {})
    if kind not in KINDS:
        raise MmfaithError(f"unknown source {kind!r}; known: {', '.join(KINDS)}, coco.")
    known = VSTAR_COLUMNS if kind == "vstar" else HRBENCH_COLUMNS
    unknown = sorted(set(columns) - set(known))
    if unknown:
        raise MmfaithError(f"--columns: {', '.join(unknown)} is not a field of {kind} (its fields: {', '.join(known)}).")
    if kind == "vstar":
        yield from _vstar(path, columns)
    else:
        yield from _hrbench(path, kind.split("-")[1], columns)


def _column(row: dict[str, Any], name: str, columns: dict[str, str], where: str) -> Any:
    actual = columns.get(name, name)
    if actual not in row or row[actual] is None:
        raise MmfaithError(f"{where}: no column {actual!r} (the {name} field); name the column with "
                           f"--columns {name}=COLUMN (columns here: {', '.join(sorted(row))}).")
    return row[actual]


# -- V* --------------------------------------------------------------------------------------------

def split_vstar_text(text: str, where: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """V*'s `text`: the question, one `(A) option` per line, then an instruction line (dropped)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if lines and lines[-1].lower().startswith(_INSTRUCTION):
        lines = lines[:-1]
    options = []
    for line in lines[1:]:
        match = _OPTION_LINE.match(line)
        if not match:
            raise MmfaithError(f"{where}: option line {line!r} is not '(A) text'.")
        options.append((match.group(1), match.group(2).strip()))
    if not lines or len(options) < 2:
        raise MmfaithError(f"{where}: the text holds no question with at least two '(A) ...' option lines.")
    return lines[0], tuple(options)


def _vstar(path: Path, columns: dict[str, str]) -> Iterator[SourceItem]:
    if path.is_dir():
        questions = path / VSTAR_QUESTIONS
        if not questions.is_file():
            raise MmfaithError(f"{path}: no {VSTAR_QUESTIONS}; a V* Bench folder holds it beside its image folders.")
        rows: Iterator[tuple[str, dict[str, Any]]] = _jsonl_rows(questions)
    else:
        rows = _table_rows(path)
    for where, row in rows:
        text = _column(row, "text", columns, where)
        question, options = split_vstar_text(str(text), where)
        label = str(_column(row, "label", columns, where)).strip()
        _check_answer(label, options, where)
        image = _column(row, "image", columns, where)
        targets: tuple[dict[str, Any], ...] = ()
        if isinstance(image, str):
            image_path = path / image
            file_name = image
            data = _read_file(image_path, where)
            targets = _vstar_targets(image_path.with_suffix(".json"), where)
        else:
            data, file_name = _image_struct(image, where)
        yield SourceItem(item_id=str(_column(row, "question_id", columns, where)), question=question, options=options,
                         answer=label, category=str(_column(row, "category", columns, where)), image_bytes=data,
                         file_name=file_name, targets=targets)


def _vstar_targets(annotation: Path, where: str) -> tuple[dict[str, Any], ...]:
    """The evidence boxes of V*'s per-image annotation (none when the copy has no annotation file)."""
    if not annotation.is_file():
        return ()
    try:
        document = json.loads(annotation.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MmfaithError(f"{annotation}: not a V* annotation JSON ({exc}).") from exc
    boxes = document.get("bbox") or []
    labels = document.get("target_object") or []
    targets = []
    for number, box in enumerate(boxes):
        if not (isinstance(box, list) and len(box) == 4 and all(isinstance(v, (int, float)) and v >= 0 for v in box)):
            raise MmfaithError(f"{annotation}: bbox {number} is not [x, y, w, h] ({where}).")
        label = labels[number] if number < len(labels) else (labels[-1] if labels else "target")
        targets.append({"bbox": [float(v) for v in box], "label": str(label)})
    return tuple(targets)


# -- HR-Bench --------------------------------------------------------------------------------------

def _hrbench(path: Path, size: str, columns: dict[str, str]) -> Iterator[SourceItem]:
    if path.is_dir():
        found = [path / f"hr_bench_{size}.{suffix}" for suffix in ("parquet", "tsv")]
        found = [file for file in found if file.is_file()]
        if not found:
            raise MmfaithError(f"{path}: neither hr_bench_{size}.parquet nor hr_bench_{size}.tsv; pass the file itself "
                               "or a folder of the DreamMr/HR-Bench layout.")
        path = found[0]
    rows = list(_table_rows(path))
    images_by_index = {str(_column(row, "index", columns, where)): _column(row, "image", columns, where)
                       for where, row in rows}
    for where, row in rows:
        options = tuple((letter, str(row[columns.get(letter, letter)]))
                        for letter in "ABCD" if row.get(columns.get(letter, letter)) not in (None, ""))
        answer = str(_column(row, "answer", columns, where)).strip()
        _check_answer(answer, options, where)
        image = str(_column(row, "image", columns, where))
        if len(image) <= 64:  # VLMEvalKit: a short value is the index of the row whose image this one reuses
            if image not in images_by_index or len(str(images_by_index[image])) <= 64:
                raise MmfaithError(f"{where}: image refers to row index {image!r}, which holds no image.")
            image = str(images_by_index[image])
        try:
            data = base64.b64decode(image, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise MmfaithError(f"{where}: the image is not base64 ({exc}).") from exc
        index = str(_column(row, "index", columns, where))
        cycle = row.get(columns.get("cycle_category", "cycle_category"))
        yield SourceItem(item_id=index, question=str(_column(row, "question", columns, where)), options=options,
                         answer=answer, category=str(_column(row, "category", columns, where)), image_bytes=data,
                         file_name=None, extra={"cycle_category": None if cycle is None else str(cycle)})


# -- readers ---------------------------------------------------------------------------------------

def _check_answer(answer: str, options: tuple[tuple[str, str], ...], where: str) -> None:
    if answer not in {label for label, _ in options}:
        raise MmfaithError(f"{where}: the answer {answer!r} is not one of the option letters "
                           f"{', '.join(label for label, _ in options)}.")


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    from mmfaith.jsonl import read_jsonl

    for number, row in read_jsonl(path):
        yield f"{path}:{number}", row


def _table_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Rows of a parquet or TSV file (tab-separated with a header, VLMEvalKit's layout)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.ParquetFile(path)
        except Exception as exc:  # pyarrow raises several types for a file that is no parquet
            raise MmfaithError(f"{path}: not a parquet file ({exc}).") from exc
        number = 0
        for batch in table.iter_batches(batch_size=64):
            for row in batch.to_pylist():
                yield f"{path} row {number}", row
                number += 1
    elif path.suffix == ".tsv":
        csv.field_size_limit(sys.maxsize)
        with open(path, encoding="utf-8", newline="") as handle:
            for number, row in enumerate(csv.DictReader(handle, delimiter="\t"), start=2):
                yield f"{path}:{number}", row
    else:
        raise MmfaithError(f"{path}: expected a dataset folder, a .parquet or a .tsv file.")


def _read_file(path: Path, where: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise MmfaithError(f"{where}: image {path} cannot be read ({exc.strerror}).") from exc


def _image_struct(value: Any, where: str) -> tuple[bytes, str | None]:
    """An embedded image: a `datasets` Image struct {bytes, path}, raw bytes, or a base64 string."""
    if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)):
        return bytes(value["bytes"]), value.get("path")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), None
    raise MmfaithError(f"{where}: the image is neither a path nor an embedded image ({type(value).__name__}).")

