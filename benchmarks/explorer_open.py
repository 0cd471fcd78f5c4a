"""The explorer at scale: how fast a 10,000-item page becomes usable in headless Chromium, and how fast
thumbnails are made (issue 31, item 5).

Page: the items of a real score dir's explorer (`--from SCORE_DIR`, else a small quickstart is run
into a temporary folder) are replicated to `--items` views with fresh ids (their images shared), the
page is written (`mmfaith.explorer.page.write_page`) and opened from disk in Debian's Chromium
(Playwright, no browser download). Printed: the data file's size, the seconds from navigation to a
usable page (the app has indexed the items and drawn the first page of cards: body[data-ready]),
to every image of the first page loaded, and the seconds a filter (verdict) and a metric link take
to redraw, each the median of `--repeat` openings.

Thumbnails: `--images` distinct images (the embedded sample's photos, each copy with one pixel
changed so its content hash differs) go through `publish_images` with `--workers` threads, once
with a cold cache and once warm (a second score dir of the same dataset): images per second and CPU
milliseconds per image each.

    python benchmarks/explorer_open.py                      # 10,000 items, 1,000 thumbnails
    python benchmarks/explorer_open.py --from out/quickstart/scores/oracle --images 200
"""
from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def replicated_page(source: Path, items: int, folder: Path) -> Path:
    """A page of `items` views copied from `source`'s explorer (fresh ids), written into `folder`."""
    from mmfaith.explorer.page import read_page_data, write_page

    data = read_page_data(source)
    if data is None:
        raise SystemExit(f"{source}: has no explorer; pass a score dir written by `mmfaith score`.")
    base = data["items"]
    data["items"] = [{**base[k % len(base)], "id": f"{base[k % len(base)]['id'][:5]}-"
                      f"{hashlib.sha256(f'{k}'.encode()).hexdigest()[:16]}"} for k in range(items)]
    images = {}
    for item in base:
        for shown in item["images"]:
            images[shown["sha256"]] = source / "explorer" / "f" / f"{shown['sha256']}.jpg"
    write_page(folder, data, images, progress=False)
    return folder / "index.html"


def time_page(index: Path, repeat: int) -> dict[str, float]:
    """Median seconds to usable, to the first page's images, to a filter's and a metric link's redraw."""
    from playwright.sync_api import sync_playwright

    runs: dict[str, list[float]] = {"usable": [], "usable, page clock": [], "data.js parsed": [], "unpack": [], "images": [], "filter": [], "metric link": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            start = time.perf_counter()
            page.goto(index.resolve().as_uri(), wait_until="commit")
            page.wait_for_selector("body[data-ready='1']", timeout=120_000)
            runs["usable"].append(time.perf_counter() - start)
            runs["usable, page clock"].append(page.evaluate("window.MMFAITH_READY_MS") / 1000)
            times = page.evaluate("window.MMFAITH_TIMES")
            runs["data.js parsed"].append(times["data_parsed"] / 1000)
            runs["unpack"].append((times["unpacked"] - times["data_parsed"]) / 1000)
            page.wait_for_function("Array.from(document.querySelectorAll('#items img')).slice(0, 8)"
                                   ".every(img => img.complete && img.naturalWidth > 0)", timeout=120_000)
            runs["images"].append(time.perf_counter() - start)
            for name, act in (("filter", lambda page=page: page.select_option("select[name=verdict]", "wrong")),
                              ("metric link", lambda page=page: page.locator("a.metric").first.click())):
                renders = page.get_attribute("body", "data-renders")
                start = time.perf_counter()
                act()
                page.wait_for_function(f"document.body.dataset.renders !== '{renders}'", timeout=60_000)
                runs[name].append(time.perf_counter() - start)
            page.close()
        browser.close()
    return {name: statistics.median(values) for name, values in runs.items()}


def time_thumbnails(count: int, workers: int, scratch: Path) -> tuple[tuple[float, float], tuple[float, float]]:
    """((images/s, CPU ms per image) cold, the same warm) of `publish_images` over `count` distinct images; CPU time
    is what a loaded, shared machine changes least."""
    import numpy as np
    from PIL import Image

    from mmfaith.explorer.thumbs import publish_images

    photos = sorted((resources.files("mmfaith.data.coco_sample") / "train2017").iterdir(), key=lambda p: p.name)
    sources = {}
    folder = scratch / "sources"
    folder.mkdir()
    for k in range(count):
        with Image.open(photos[k % len(photos)]) as opened:
            pixels = np.asarray(opened.convert("RGB")).copy()
        pixels[0, 0] = [k % 256, (k // 256) % 256, 7]
        path = folder / f"{k}.png"
        Image.fromarray(pixels).save(path, compress_level=1)
        sources[hashlib.sha256(path.read_bytes()).hexdigest()] = path
    os.environ["MMFAITH_CACHE"] = str(scratch / "cache")
    rates = []
    for name in ("cold", "warm"):
        start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        publish_images(sources, scratch / name, workers, progress=True)
        used = resource.getrusage(resource.RUSAGE_SELF)
        rates.append((count / (time.perf_counter() - start),
                      1000 * (used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime) / count))
    return rates[0], rates[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--from", dest="source", type=Path, help="a score dir with an explorer (default: a quickstart)")
    parser.add_argument("--images", type=int, default=1000, help="distinct images for the thumbnail timing (0: skip)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="explorer-bench-") as scratch_name:
        scratch = Path(scratch_name)
        source = args.source
        if source is None:
            from mmfaith.cli import main as mmfaith

            assert mmfaith(["quickstart", "--out", str(scratch / "qs"), "--per-tier", "1", "--multi", "1",
                            "--controls", "1", "--no-progress"]) == 0
            source = scratch / "qs" / "scores" / "blind"
        index = replicated_page(source, args.items, scratch / "page")
        size = (scratch / "page" / "explorer" / "data.js").stat().st_size
        timings = time_page(index, args.repeat)
        print(f"explorer page, {args.items} items (data.js {size / 1e6:.1f} MB), median of {args.repeat} in headless "
              f"Chromium on {os.cpu_count()} cores:")
        for name, seconds in timings.items():
            print(f"  {name:<18} {seconds:6.2f} s" + ("  (goal < 2 s)" if name.startswith("usable") else ""))
        print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: the machine is shared)")
        if args.images:
            cold, warm = time_thumbnails(args.images, args.workers, scratch)
            print(f"thumbnails, {args.images} distinct images, {args.workers} workers: {cold[0]:.0f} images/s cold "
                  f"({cold[1]:.0f} CPU ms each), {warm[0]:.0f} images/s warm ({warm[1]:.1f} CPU ms each; cached: hard links)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
