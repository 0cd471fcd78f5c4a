"""The results explorer in a real browser (issue 31): Debian's headless Chromium driven by Playwright.

The quickstart (a small build) writes an explorer into each score dir and the report; the page is
opened from disk (file://) and must show every item, load no broken image and request nothing
outside its folder; a filter and a metric link must change the items shown as the metric's
definition says. Expected counts are derived from the build by hand, not from the page's data:
the blind model answers "same: yes, different: no, count 0", so it is right only on the control
pairs; DS is defined on the pairs with at least one difference (docs/spd_faith_metrics.md), so its
link selects every pair but the controls.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mmfaith.cli import main
from tests.oracle_and_always_a import oracle_and_always_a

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
CONTROLS, PER_TIER, MULTI = 1, 1, 1
"""What the quickstart asks for. What it gets is read from its build's records (_pairs, _controls): under the
builder's naturalness gates (issue 29) the embedded sample yields fewer (3 single pairs and 1 control, no multi:
its multi/2 quota comes out empty), so the expected counts are derived from the build, not from these numbers."""

playwright = pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quickstart")
    assert main(["quickstart", "--family", "spd-faith", "--out", str(out), "--per-tier", str(PER_TIER), "--multi", str(MULTI),
                 "--controls", str(CONTROLS), "--no-progress"]) == 0
    return out


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: tools/test-all.sh installs it (apt-get install chromium)")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


def _records(quickstart: Path) -> list[dict]:
    """The quickstart build's records, as the build wrote them."""
    lines = (quickstart / "build" / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _pairs(quickstart: Path) -> int:
    """Every pair of the build: each explorer shows them all."""
    return len(_records(quickstart))


def _controls(quickstart: Path) -> int:
    """The build's control pairs (no difference)."""
    return sum(1 for record in _records(quickstart) if record["num_differences"] == 0)


def _open(browser, folder: Path, hash_: str = ""):
    """The folder's index.html opened from disk in a tall viewport (every card's images in view), with every
    request the page made and every script error."""
    page = browser.new_page(viewport={"width": 1400, "height": 30000})
    requests, errors = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto((folder / "index.html").resolve().as_uri() + hash_)
    page.wait_for_selector("body[data-ready='1']")
    page.wait_for_load_state("load")
    return page, requests, errors


def _count(page) -> int:
    return int(page.get_attribute("#count", "data-count"))


def _broken_images(page) -> list[str]:
    page.wait_for_function("Array.from(document.images).every(img => img.complete)")
    return page.evaluate("Array.from(document.images).filter(img => !img.naturalWidth).map(img => img.src)")


@pytest.mark.parametrize("where", ["report", "scores/oracle", "scores/blind", "scores/prior-no-image"])
def test_each_quickstart_explorer_opens_from_disk_whole(quickstart: Path, browser, where: str) -> None:
    folder = quickstart / where
    pairs = _pairs(quickstart)
    page, requests, errors = _open(browser, folder)
    assert errors == []
    assert _count(page) == pairs
    assert page.locator("article.item").count() == pairs
    assert _broken_images(page) == []
    assert page.locator("article.item img").count() == 2 * pairs  # original and edited of every pair
    inside = folder.resolve().as_uri() + "/"
    assert [url for url in requests if not url.startswith(inside)] == []
    page.close()


def test_a_filter_and_a_metric_link_select_the_items_their_definition_names(quickstart: Path, browser) -> None:
    pairs, controls = _pairs(quickstart), _controls(quickstart)
    assert controls >= 1 and pairs > controls  # the filter and the DS link each need items to show
    page, _, _ = _open(browser, quickstart / "report")
    page.select_option("select[name=model]", "blind")
    page.select_option("select[name=verdict]", "right")
    page.wait_for_function(f"document.getElementById('count').dataset.count === '{controls}'")
    assert {page.locator("article.item .chip", has_text="subset:").first.text_content()} == {"subset: control"}
    page.select_option("select[name=model]", "oracle")
    page.select_option("select[name=verdict]", "wrong")
    page.wait_for_function("document.getElementById('count').dataset.count === '0'")
    page.click("button.clear")
    page.wait_for_function(f"document.getElementById('count').dataset.count === '{pairs}'")
    page.locator("a.metric[data-metric=DS]").first.click()
    page.wait_for_function(f"document.getElementById('count').dataset.count === '{pairs - controls}'")
    assert "metric=DS" in page.url
    page.close()


def test_a_click_opens_the_full_size_image_with_its_gold_boxes(quickstart: Path, browser) -> None:
    page, _, _ = _open(browser, quickstart / "scores" / "oracle", "#f.subset=single")
    page.locator("article.item figure.frame").first.click()
    full = page.locator("#lightbox img")
    full.wait_for()
    assert full.get_attribute("src").startswith("explorer/f/")
    page.wait_for_function("document.querySelector('#lightbox img').naturalWidth > 320")
    assert page.locator("#lightbox rect.gold").count() >= 1
    page.click("#lightbox")
    page.locator("article.item summary", has_text="reply: count").first.click()  # loaded from texts/0.js on opening
    page.wait_for_function("(document.querySelector('article.item .text pre') || {}).textContent")
    assert "\\boxed{" in page.locator("article.item .text pre").first.text_content()
    page.close()


def test_view_rewrites_a_score_dirs_page_and_serves_it_on_loopback_only(quickstart: Path) -> None:
    folder = quickstart / "scores" / "oracle"
    before = (folder / "explorer" / "data.js").read_bytes()
    assert main(["view", str(folder), "--no-progress"]) == 0
    assert (folder / "explorer" / "data.js").read_bytes() == before  # same inputs, same bytes
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "mmfaith", "view", str(folder), "--serve", "--port", str(port),
                               "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                page = urllib.request.urlopen(f"http://127.0.0.1:{port}/index.html", timeout=2).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, server.stdout.read()
                time.sleep(0.2)
        assert "explorer/app.js" in page
        data = urllib.request.urlopen(f"http://127.0.0.1:{port}/explorer/data.js", timeout=2).read()
        assert data == before
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
        assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{port}"]
    finally:
        server.terminate()
        server.wait(10)


def test_packing_gives_back_the_items_it_packed(quickstart: Path) -> None:
    from mmfaith.explorer.packing import pack, unpack
    from mmfaith.explorer.page import read_page_data

    data = read_page_data(quickstart / "report")  # the report's items, replies and traces joined back in
    assert unpack(pack(data["items"], data["models"]), data["models"]) == data["items"]
    assert len(data["items"]) == _pairs(quickstart) and len(data["models"]) == 5


def test_view_of_a_folder_that_is_none_of_the_three_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["view", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmfaith: error: view ") and err.count("\n") == 1


def test_the_profile_leaderboard_links_each_family_to_its_explorer(quickstart: Path, browser, tmp_path: Path) -> None:
    profile = tmp_path / "model-a"
    shutil.copytree(quickstart / "scores" / "oracle", profile / "spd-faith")
    (profile / "profile.json").write_text(json.dumps({
        "format": "mmfaith-profile/1", "model": "oracle", "suite": {"name": "quick", "version": "1"},
        "families": {"spd-faith": {"status": "ok", "error": None, "dataset": str(quickstart / "build"),
                                   "score_dir": "spd-faith", "parse_rate": 1.0, "prior": {}, "oracle": {},
                                   "headline": [{"key": "DS", "name": "DS", "value": 1.0, "ci95": [1.0, 1.0],
                                                 "better": "higher", "na_reason": None}]},
                     "vfaith": {"status": "failed", "error": "the server refused", "dataset": "x", "score_dir": None,
                                "parse_rate": None, "prior": {}, "oracle": {}, "headline": []}},
        "provenance": {}}))
    assert main(["view", str(profile), "--out", str(tmp_path / "board"), "--no-progress"]) == 0
    page, _, errors = _open(browser, tmp_path / "board")
    assert errors == []
    assert page.locator("table.board").count() == 2
    assert "the server refused" in page.locator("table.board[data-family=vfaith]").text_content()
    page.locator("table.board[data-family=spd-faith] a", has_text="explore").click()
    page.wait_for_selector("body[data-ready='1']")
    assert _count(page) == _pairs(quickstart)
    page.close()


BUILDS = {  # small builds of the embedded sample, as tests/shared/test_score_golden.py makes them
    "spd-faith": ["--per-tier", "1", "--multi", "1", "--controls", "1", "--inpainter", "telea"],
    "vfaith": ["--per-template", "1", "--inpainter", "telea"],
    "crm": ["--max-items", "4"],
    "mcot": ["--limit", "6"],
}
BOX_KINDS = {"spd-faith": {"gold"}, "vfaith": {"cue"}, "crm": {"gold", "mask"}, "mcot": {"gold", "crop"}}
FLIP = {  # the flag each family's flip carries, and whether an items.jsonl line is one (its definition, by hand)
    "spd-faith": ("contradiction", lambda item: bool(item["scores"].get("contradiction"))),
    "vfaith": ("flip: raw right, edit wrong", lambda item: item.get("raw_correct") is True and item.get("edit_correct") is False),
    "crm": ("flip: answer changed by the mask", lambda item: bool(item["components"]["flip"] and item["components"]["flip_n"])),
    "mcot": ("flip: visual intervention", lambda item: item["correct"].get("replay_visual") is not None
             and item["correct"].get("replay_none") is not None
             and item["correct"]["replay_visual"] != item["correct"]["replay_none"]),
}


def _score_and_report(name: str, folder: Path) -> None:
    """Build, run the family's oracle over HTTP, derive an always-A model, score both and report them, as a user does:
    `mmfaith score` and `mmfaith report` in their own processes (they fork workers, which a process running
    Playwright's threads must not do)."""
    build, predictions_of = oracle_and_always_a(folder, name, BUILDS[name])
    for model, predictions in predictions_of.items():
        _mmfaith("score", name, "--dataset", str(build), "--predictions", str(predictions), "--from-run",
                 "--out", str(folder / model), "--bootstrap", "50")
        assert (folder / model / "index.html").is_file()
    _mmfaith("report", str(folder / "oracle"), str(folder / "always-a"), "--out", str(folder / "report"),
             "--bootstrap", "50")


def _mmfaith(*arguments: str) -> None:
    done = subprocess.run([sys.executable, "-m", "mmfaith", *arguments], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", list(BUILDS))
def test_every_familys_score_and_report_get_an_explorer(name: str, tmp_path: Path, browser) -> None:
    """`mmfaith score` and `mmfaith report` of each family write an explorer showing every scored item with its boxes;
    the flip filter shows the items.jsonl lines that are flips by the family's definition."""
    with ThreadPoolExecutor(1) as thread:  # Playwright's sync API holds this thread's event loop; `run` needs its own
        thread.submit(_score_and_report, name, tmp_path).result()
    items = {model: [json.loads(line) for line in (tmp_path / model / "items.jsonl").read_text().splitlines()]
             for model in ("oracle", "always-a")}
    page, requests, errors = _open(browser, tmp_path / "report")
    assert errors == []
    assert _count(page) == len(items["oracle"])
    assert _broken_images(page) == []
    assert [url for url in requests if not url.startswith((tmp_path / "report").resolve().as_uri() + "/")] == []
    kinds = set(page.evaluate("Array.from(document.querySelectorAll('article.item rect')).map(r => r.getAttribute('class'))"))
    assert BOX_KINDS[name] <= kinds
    flag, is_flip = FLIP[name]
    labels = page.evaluate("window.MMFAITH_EXPLORER.models")  # in the report's order: oracle, always-a
    for model, shown in zip(("oracle", "always-a"), labels):
        expected = sum(map(is_flip, items[model]))
        page.goto((tmp_path / "report" / "index.html").resolve().as_uri() + f"#model={shown}&flag={flag}")
        page.wait_for_function(f"document.getElementById('count').dataset.count === '{expected}'")
    page.close()
