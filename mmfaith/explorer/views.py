"""The explorer's data model, as JSON the page reads (mmfaith/explorer/static/app.js).

A family's `explore` part (`FamilyParts.explore`) turns its dataset, its score dir's items.jsonl lines
and its predictions into item views, one per unit items.jsonl scores:

    {"id", "title" (the question), "options": [str], "gold": str,
     "images": [{"label", "sha256", "path" (the source file), "width", "height",
                 "boxes": [{"b": [x, y, w, h] in the image's pixels, "label", "kind"}]}],
     "facets": {name: str}  (category, tier, template, edit type, mask style: what filters select),
     "model": {"probes": [{"name", "answer", "status", "correct", "text"}], "verdict", "flags": [str],
               "parts": {metric key: number|null}, "boxes": [{"image": index, "b", "label", "kind"}],
               "turns": [{"role", "text"}]}}

`status` is "answered", "unparsed", "empty", "failed" or "missing"; `correct` is True, False or None (no
gold verdict for that probe); `verdict` is "right", "wrong", "unanswered" or "failed" (`verdict_of`);
`flags` name the item's flips ("flip: ..."); `parts` give the item's part in each metric, null where
the item is not in the metric's denominator, so a metric's link selects the items behind its number.
Box kinds: "gold" (drawn green), "mask" (black), "crop" (orange, numbered in order), "cue" (magenta).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

TEXT_LIMIT = 4000
"""A model reply longer than this is cut in the page (the whole reply stays in predictions.jsonl)."""


def box(xywh: Sequence[float], label: str, kind: str) -> dict[str, Any]:
    """One box in image pixels ([x, y, width, height], as COCO and the records store them)."""
    return {"b": [round(float(v), 1) for v in xywh], "label": label, "kind": kind}


def xyxy_box(xyxy: Sequence[float], label: str, kind: str) -> dict[str, Any]:
    """One box given by its corners [x0, y0, x1, y1]."""
    x0, y0, x1, y1 = (float(v) for v in xyxy)
    return box([x0, y0, x1 - x0, y1 - y0], label, kind)


def image(label: str, sha256: str, path: Path, size: tuple[int, int] | None,
          boxes: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """One image of an item: where its file is, its size (None: read from the file when thumbnailed) and its gold boxes."""
    return {"label": label, "sha256": sha256, "path": str(path), "width": None if size is None else size[0],
            "height": None if size is None else size[1], "boxes": list(boxes)}


def probe(name: str, answer: Any, status: str, correct: bool | None, text: str | None = None) -> dict[str, Any]:
    """One probe's answer as read, its status, its verdict against the gold and the model's reply."""
    shown = None if answer is None else answer if isinstance(answer, str) else _plain(answer)
    cut = None if text is None else text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + " [...]"
    return {"name": name, "answer": shown, "status": status, "correct": correct, "text": cut}


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def verdict_of(probes: Sequence[Mapping[str, Any]]) -> str:
    """The item's verdict from `probes`: "failed" when a call failed, "unanswered" when no probe was read, "wrong"
    when a probe with a gold verdict is wrong, else "right"."""
    if any(p["status"] == "failed" for p in probes):
        return "failed"
    if not any(p["status"] == "answered" for p in probes):
        return "unanswered"
    return "wrong" if any(p["correct"] is False for p in probes) else "right"


def model_view(probes: list[dict[str, Any]], parts: Mapping[str, Any], flags: Iterable[str] = (),
               boxes: Iterable[Mapping[str, Any]] = (), turns: Iterable[Mapping[str, str]] = (),
               judged: Sequence[str] | None = None) -> dict[str, Any]:
    """One model's side of an item view (module docstring); its verdict is that of the probes named in `judged`
    (default: every probe), e.g. the model's own answer and not a replay whose context was altered on purpose."""
    counted = probes if judged is None else [p for p in probes if p["name"] in judged]
    return {"probes": probes, "verdict": verdict_of(counted), "flags": sorted(flags),
            "parts": {key: _number(value) for key, value in parts.items()}, "boxes": list(boxes), "turns": list(turns)}


def _number(value: Any) -> Any:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, float):
        return round(value, 6)
    return value


def option_lines(options: Sequence[Mapping[str, str]]) -> list[str]:
    """Multiple-choice options as "A. text" lines."""
    return [f"{option['label']}. {option['text']}" for option in options]


def gold_option(label: str, options: Sequence[Mapping[str, str]]) -> str:
    """The gold letter with its option's text."""
    text = next((option["text"] for option in options if option["label"] == label), None)
    return label if text is None else f"{label} ({text})"


def responses(predictions: Path | None) -> dict[tuple[str, str], dict[str, Any]]:
    """The last line per (id, probe) of a predictions.jsonl (as a run's resume reads it), held as a scorer holds it
    (its response and meta without the run-only fields: evaluators/predictions.kept_line); empty without one or when
    the file is not JSON lines (a submission in another format shows no raw replies)."""
    from mmfaith.errors import MmfaithError
    from mmfaith.evaluators.predictions import kept_line
    from mmfaith.jsonl import read_jsonl
    from mmfaith.records import Shared

    if predictions is None or not predictions.is_file():
        return {}
    found: dict[tuple[str, str], dict[str, Any]] = {}
    shared = Shared()
    try:
        for _, line in read_jsonl(predictions):
            if isinstance(line.get("id"), str) and isinstance(line.get("probe"), str):
                found[(line["id"], line["probe"])] = kept_line(line, shared, None)
    except MmfaithError:  # a submission in another format: no replies shown
        return {}
    return found


def each_item(units: Mapping[str, Any], items: Sequence[Mapping[str, Any]], predictions: Path | None,
              view: Any) -> list[dict[str, Any]]:
    """`view(unit, item, lines)` of every items.jsonl line, in its order: `unit` the dataset's unit of its id,
    `lines` the predictions by (id, probe) (`responses`)."""
    lines = responses(predictions)
    return [view(units[item["id"]], item, lines) for item in items]


def read_probe(lines: Mapping[tuple[str, str], Mapping[str, Any]], item_id: str, name: str, answer: Any,
               correct: bool | None) -> dict[str, Any]:
    """One probe's view from its predictions line (when there is one) and what the scorer read: its status as
    coverage counts it (evaluators/coverage.py), its verdict (None when unanswered) and the reply."""
    from mmfaith.evaluators.coverage import status_of

    line = lines.get((item_id, name))
    if line is None and lines:
        status = "missing"
    elif line is None:  # no predictions file given: the scorer's read alone
        status = "answered" if answer is not None else "unparsed"
    else:
        status = status_of(dict(line), False, answer)
    text = None if line is None else line.get("response")
    return probe(name, answer, status, correct if status == "answered" else None, text)
