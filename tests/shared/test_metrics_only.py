"""evaluators/score_dir.py's `metrics_only()`: a score published inside it holds items.jsonl and metrics.json and
no report (evaluate's reference ends, read for their metrics only); outside it, the report is written as always."""
from __future__ import annotations

import json
from pathlib import Path

from mmfaith.evaluators.score_dir import metrics_only, publish_scores


def _report(metrics: dict, folder: Path) -> None:
    (folder / "report.md").write_text(f"# {metrics['n']} items\n")
    (folder / "plot.png").write_bytes(b"\x89PNG")


def test_a_score_published_inside_metrics_only_has_no_report_and_the_same_metrics(tmp_path: Path) -> None:
    for name in ("whole", "scratch", "after"):
        (tmp_path / name).mkdir()
    items = [{"id": f"item-{k}", "correct": k % 2 == 0} for k in range(4)]
    publish_scores(tmp_path / "whole", items, {"n": 4}, _report)
    with metrics_only():
        publish_scores(tmp_path / "scratch", items, {"n": 4}, _report)
    publish_scores(tmp_path / "after", items, {"n": 4}, _report)  # the block's end restores reports

    assert sorted(p.name for p in (tmp_path / "scratch").iterdir()) == ["items.jsonl", "metrics.json"]
    for name in ("items.jsonl", "metrics.json"):
        assert (tmp_path / "scratch" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    assert json.loads((tmp_path / "scratch" / "metrics.json").read_text()) == {"n": 4}
    assert sorted(p.name for p in (tmp_path / "after").iterdir()) == ["items.jsonl", "metrics.json", "plot.png",
                                                                      "report.md"]
