"""Write the explorer page into a folder, and read back the data of one written before.

`write_page(folder, data, images, workers, progress)` writes `folder/index.html` and
`folder/explorer/` whole: the app (app.js, style.css, copied from the package), `data.js`
(`window.MMFAITH_EXPLORER = JSON.parse("...");`: a script, so the page opens from file:// where
fetch() of a JSON file is refused, holding a JSON string, which browsers parse several times faster
than an object literal), the models' replies and traces apart in `texts/<k>.js` (TEXT_CHUNK items
each, loaded when a reply is opened: the data the page reads first stays small; in data.js a
probe's `text` is then true where it has one and a model's `turns` their count; the items are packed
by `packing`) and the images' JPEGs (`explorer/t/`, `explorer/f/`, see `thumbs`). Every path the
page loads is inside `folder`: no server, network or CDN. `images` maps each source image's sha256
to its file; each item image's width and height are filled in from it.
`read_page_data(folder)` is the data a page holds (for `report`, which merges its score dirs' pages).
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from mmfaith.errors import MmfaithError
from mmfaith.explorer.packing import pack, unpack
from mmfaith.explorer.thumbs import publish_images
from mmfaith.jsonl import write_text_atomic

FORMAT = "mmfaith-explorer/1"
PREFIX = "window.MMFAITH_EXPLORER = JSON.parse("
ASSETS = ("app.js", "style.css")
TEXT_CHUNK = 100


def _split_texts(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Take the replies and traces out of `items` (module docstring); the chunks of `texts/<k>.js`, by item index."""
    chunks: list[dict[str, Any]] = []
    for n, item in enumerate(items):
        if n % TEXT_CHUNK == 0:
            chunks.append({})
        held = {}
        for label, view in item["models"].items():
            replies = {probe["name"]: probe["text"] for probe in view["probes"] if isinstance(probe.get("text"), str)}
            for probe in view["probes"]:
                probe["text"] = probe["name"] in replies
            turns, view["turns"] = view.get("turns") or [], len(view.get("turns") or [])
            if replies or turns:
                held[label] = {"probes": replies, "turns": turns}
        if held:
            chunks[-1][str(n)] = held
    return chunks


def _join_texts(items: list[dict[str, Any]], chunks: list[dict[str, Any]]) -> None:
    """Put the replies and traces of `chunks` back into `items` (the inverse of `_split_texts`)."""
    for n, item in enumerate(items):
        held = chunks[n // TEXT_CHUNK].get(str(n), {})
        for label, view in item["models"].items():
            texts = held.get(label, {"probes": {}, "turns": []})
            for probe in view["probes"]:
                probe["text"] = texts["probes"].get(probe["name"])
            view["turns"] = texts["turns"]


def _script(opening: str, value: Any, closing: str) -> str:
    """`value` as a JSON string literal (JSON text dumped again is a valid JS string) between `opening` and `closing`."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return opening + json.dumps(text, ensure_ascii=False) + closing


def _unscript(text: str, opening: str, closing: str, path: Path) -> Any:
    """The value `_script` wrote."""
    if not text.startswith(opening) or not text.endswith(closing):
        raise MmfaithError(f"{path}: not an explorer data file; rewrite it with `mmfaith view`.")
    return json.loads(json.loads(text[len(opening):-len(closing)]))


def _chunk_call(k: int) -> str:
    return f"MMFAITH_TEXTS({k}, JSON.parse("


def write_page(folder: Path, data: Mapping[str, Any], images: Mapping[str, Path], workers: int = 4,
               progress: bool = True) -> Path:
    """Write index.html and explorer/ into `folder` (module docstring); the index.html path."""
    assets = folder / "explorer"
    staging = folder / ".explorer.writing"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    sizes = publish_images(images, staging, workers, progress)
    for item in data["items"]:
        for shown in item["images"]:
            if shown["sha256"] in sizes and shown["width"] is None:
                shown["width"], shown["height"] = sizes[shown["sha256"]]
    static = resources.files("mmfaith.explorer") / "static"
    for name in ASSETS:
        (staging / name).write_bytes((static / name).read_bytes())
    chunks = _split_texts(data["items"])
    (staging / "texts").mkdir()
    for k, chunk in enumerate(chunks):
        write_text_atomic(staging / "texts" / f"{k}.js", _script(_chunk_call(k), chunk, "));\n"))
    written = {"format": FORMAT, **{k: v for k, v in data.items() if k != "items"}, "text_chunk": TEXT_CHUNK,
               "n_items": len(data["items"]), **pack(data["items"], data["models"])}
    write_text_atomic(staging / "data.js", _script(PREFIX, written, ");\n"))
    _join_texts(data["items"], chunks)
    shutil.rmtree(assets, ignore_errors=True)
    staging.rename(assets)
    write_text_atomic(folder / "index.html", (static / "index.html").read_text(encoding="utf-8"))
    return folder / "index.html"


def read_page_data(folder: Path) -> dict[str, Any] | None:
    """The data of the page written into `folder`, None when it has none (or one of another format)."""
    path = folder / "explorer" / "data.js"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        data = _unscript(text, PREFIX, ");\n", path)
        if data.get("format") != FORMAT:
            return None
        data["items"] = unpack(data, data["models"])
        for key in ("strings", "images", "facet_keys", "part_keys", "packed", "n_items", "text_chunk"):
            data.pop(key)
        chunks = []
        for k in range((len(data["items"]) + TEXT_CHUNK - 1) // TEXT_CHUNK):
            chunk_path = folder / "explorer" / "texts" / f"{k}.js"
            chunks.append(_unscript(chunk_path.read_text(encoding="utf-8"), _chunk_call(k), "));\n", chunk_path))
        _join_texts(data["items"], chunks)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise MmfaithError(f"{path}: an explorer page this version cannot read ({type(exc).__name__}: {exc}); write it "
                           f"again from its inputs (`mmfaith view {folder} --dataset SOURCE` for a score dir).") from exc
    return data
