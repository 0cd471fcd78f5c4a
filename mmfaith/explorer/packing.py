"""The explorer's items packed for data.js: arrays instead of objects, repeated strings once (issue 31, item 5).

A 10,000-item page must be usable in under 2 s, and parsing data.js is most of that time, so the
items (after their replies went to texts/, see `page`) are written as arrays in a fixed field order,
every repeated string (titles, labels, statuses, answers, facet values, kinds) as an index into
`strings`, each image's sha256 and size once in `images`, and the metric keys of `parts` once in
`part_keys`. `unpack` is the inverse (`unpack(pack(items)) == items`); app.js's `unpack` is the same in
JavaScript. Packed item:

    [id, title, [option], gold, [[image, label, [[x, y, w, h, label, kind]]]], [facet value by facet_keys],
     [null | [verdict, [flag], [part by part_keys], [[name, answer, status, correct, text]],
              [[image index, x, y, w, h, label, kind]], turns] by model]]

where every string but the id is an index into `strings`, and `image` an index into `images` ([sha256, width, height]).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class _Table:
    """Values in order of first use, each with its index."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.index: dict[Any, int] = {}

    def __call__(self, value: Any) -> int | None:
        if value is None:
            return None
        key = tuple(value) if isinstance(value, list) else value
        if key not in self.index:
            self.index[key] = len(self.values)
            self.values.append(value)
        return self.index[key]


def pack(items: Sequence[dict[str, Any]], models: Sequence[str]) -> dict[str, Any]:
    """{"strings", "images", "facet_keys", "part_keys", "packed"} of `items` (module docstring)."""
    s, images = _Table(), _Table()
    facet_keys = sorted({key for item in items for key in item.get("facets", {})})
    part_keys = sorted({key for item in items for view in item["models"].values() for key in view["parts"]})

    def boxes(found: Sequence[dict[str, Any]], with_image: bool) -> list[list[Any]]:
        return [([b["image"]] if with_image else []) + list(b["b"]) + [s(b["label"]), s(b["kind"])] for b in found]

    def model(view: dict[str, Any] | None) -> list[Any] | None:
        if view is None:
            return None
        return [s(view["verdict"]), [s(f) for f in view["flags"]], [view["parts"].get(k, None) for k in part_keys],
                [[s(p["name"]), s(p["answer"]), s(p["status"]), p["correct"], p["text"]] for p in view["probes"]],
                boxes(view["boxes"], True), view["turns"]]

    packed = [[item["id"], s(item["title"]), [s(o) for o in item["options"]], s(item["gold"]),
               [[images([shown["sha256"], shown["width"], shown["height"]]), s(shown["label"]),
                 boxes(shown["boxes"], False)] for shown in item["images"]],
               [s(item.get("facets", {}).get(key)) for key in facet_keys],
               [model(item["models"].get(label)) for label in models]] for item in items]
    return {"strings": s.values, "images": images.values, "facet_keys": facet_keys, "part_keys": part_keys,
            "packed": packed}


def unpack(table: dict[str, Any], models: Sequence[str]) -> list[dict[str, Any]]:
    """The items `pack` packed (a part a model's view did not hold comes back as null)."""
    strings, images, part_keys = table["strings"], table["images"], table["part_keys"]

    def s(index: int | None) -> Any:
        return None if index is None else strings[index]

    def box(row: list[Any]) -> dict[str, Any]:
        return {"b": row[-6:-2], "label": s(row[-2]), "kind": s(row[-1])}

    def model(row: list[Any]) -> dict[str, Any]:
        verdict, flags, parts, probes, found, turns = row
        return {"verdict": s(verdict), "flags": [s(f) for f in flags], "parts": dict(zip(part_keys, parts)),
                "probes": [{"name": s(p[0]), "answer": s(p[1]), "status": s(p[2]), "correct": p[3], "text": p[4]}
                           for p in probes],
                "boxes": [{"image": b[0], **box(b)} for b in found], "turns": turns}

    items = []
    for row in table["packed"]:
        item_id, title, options, gold, shown, facets, views = row
        items.append({
            "id": item_id, "title": s(title), "options": [s(o) for o in options], "gold": s(gold),
            "images": [{"sha256": images[i][0], "width": images[i][1], "height": images[i][2], "label": s(label),
                        "boxes": [box(b) for b in found]} for i, label, found in shown],
            "facets": {key: s(v) for key, v in zip(table["facet_keys"], facets) if v is not None},
            "models": {label: model(view) for label, view in zip(models, views) if view is not None}})
    return items
