"""Write the explorer page into a folder, and read back the data of one written before.

`write_page(folder, data, images, workers, progress)` writes `folder/index.html` and
`folder/explorer/` whole: the app (app.js, style.css, copied from the package), `data.js`
(`window.MMFAITH_EXPLORER = {...};`, so the page opens from file:// where fetch() of a JSON
file is refused) and the images' JPEGs (`explorer/t/`, `explorer/f/`, see `thumbs`). Every path the
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
from mmfaith.explorer.thumbs import publish_images
from mmfaith.jsonl import write_text_atomic

FORMAT = "mmfaith-explorer/1"
PREFIX = "window.MMFAITH_EXPLORER = "
ASSETS = ("app.js", "style.css")


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
    payload = json.dumps({"format": FORMAT, **data}, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    write_text_atomic(staging / "data.js", PREFIX + payload.replace("</", "<\\/") + ";\n")
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
    if not text.startswith(PREFIX):
        raise MmfaithError(f"{path}: not an explorer data file; rewrite it with `mmfaith view {folder}`.")
    data = json.loads(text[len(PREFIX):].rstrip().rstrip(";").replace("<\\/", "</"))
    return data if data.get("format") == FORMAT else None
