"""items.jsonl spooled while a scorer makes its items, and score dirs read back with only the fields a report uses
(evaluators/score_dir.py, issue 34): the same bytes as writing the items whole, and small items in memory."""
from __future__ import annotations

import json
from pathlib import Path

from mmfaith.evaluators.score_dir import ItemSpool, load_metrics, load_score_dir, publish_scores, spooled

SECRET = "sk-" + "a1B2c3D4" * 5
"""A key-shaped string: redacted in items.jsonl whichever way it is written."""


def _items(n: int) -> list[dict]:
    return [{"id": f"item-{k}", "cluster": f"image-{k % 3}", "scores": {"DS": 1.0, "DQR": float(k % 2)},
             "answers": {"count": {"status": "ok", "value": 1}}, "claims": [{"note": f"claim {k} {SECRET}"}] * 4}
            for k in range(n)]


def _no_report(metrics: dict, folder: Path) -> None:
    (folder / "report.md").write_text("# scores\n")


def test_a_spooled_items_jsonl_has_the_bytes_of_one_written_whole_and_keeps_only_the_fields(tmp_path: Path) -> None:
    items = _items(10)
    for out in ("whole", "spooled"):
        (tmp_path / out).mkdir()  # a score dir's --out exists before it is written (prepare_out_dir)
    publish_scores(tmp_path / "whole", items, {"n": 10}, _no_report)
    spool = ItemSpool(tmp_path / "spooled", ("id", "cluster", "answers", "scores.DS"), batch=3)  # batches of 3 lines
    kept = [spool.keep(item) for item in items]
    publish_scores(tmp_path / "spooled", spool, {"n": 10}, _no_report)

    written = (tmp_path / "spooled" / "items.jsonl").read_bytes()
    assert written == (tmp_path / "whole" / "items.jsonl").read_bytes()
    assert SECRET not in written.decode() and "claim 9" in written.decode()
    assert kept[4] == {"id": "item-4", "cluster": "image-1", "answers": {"count": {"status": "ok", "value": 1}},
                       "scores": {"DS": 1.0}}
    assert kept[0]["answers"] is kept[9]["answers"]  # equal kept objects are held once
    assert not spool.path.exists()  # moved into the score dir, nothing left beside it
    assert sorted(p.name for p in (tmp_path / "spooled").iterdir()) == ["items.jsonl", "metrics.json", "report.md"]


def test_a_score_dir_is_read_with_only_the_fields_asked_and_metrics_alone(tmp_path: Path) -> None:
    (tmp_path / "score").mkdir()
    publish_scores(tmp_path / "score", _items(4), {"provenance": {"model": "m"}}, _no_report)
    metrics, items = load_score_dir(tmp_path / "score", ("id", "scores"))
    assert metrics == {"provenance": {"model": "m"}}
    assert items[3] == {"id": "item-3", "scores": {"DS": 1.0, "DQR": 1.0}}
    assert load_score_dir(tmp_path / "score")[1][0]["claims"][0]["note"].startswith("claim 0")  # whole without fields
    (tmp_path / "score" / "items.jsonl").write_text("not json\n")  # metrics alone never reads the items
    assert load_metrics(tmp_path / "score") == json.loads((tmp_path / "score" / "metrics.json").read_text())


def test_chunks_rendered_apart_and_added_in_order_give_the_bytes_of_items_kept_one_by_one(tmp_path: Path) -> None:
    """A scorer's workers render chunks (`spooled`) and the spool adds them in order: the same items.jsonl (redacted)
    and the same kept items as `keep` item by item."""
    items, fields = _items(10), ("id", "answers", "scores.DQR")
    for out in ("one-by-one", "chunks"):
        (tmp_path / out).mkdir()
    spool = ItemSpool(tmp_path / "one-by-one", fields, batch=4)
    kept = [spool.keep(item) for item in items]
    publish_scores(tmp_path / "one-by-one", spool, {"n": 10}, _no_report)
    spool = ItemSpool(tmp_path / "chunks", fields)
    chunks = [spooled(items[start:start + 3], fields) for start in range(0, 10, 3)]
    kept_chunks = [kept for chunk in chunks for kept in spool.add(chunk)]
    publish_scores(tmp_path / "chunks", spool, {"n": 10}, _no_report)
    written = (tmp_path / "chunks" / "items.jsonl").read_bytes()
    assert written == (tmp_path / "one-by-one" / "items.jsonl").read_bytes() and SECRET not in written.decode()
    assert kept_chunks == kept
    assert chunks[0].kept[0]["answers"] is chunks[0].kept[2]["answers"]  # held once within a chunk
