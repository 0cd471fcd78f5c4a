"""CRM's and VFaith's per-family reports have SPD-Faith's shape: `mmfaith quickstart --family F` (a build of the
default suite's recipe, every reference model run over HTTP, scored and compared) writes, for each score dir and
for the comparison, a report.md opening with the key to the metrics shown, every n/a with its reason, every
p-value in the one format, plots that exist and are linked; the comparison holds every pair of models."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mmfaith import families
from mmfaith.cli import main

PAIRS_KEY = {"crm": "pairs", "vfaith": "paired"}
PLOTS = {"crm": ({"metrics_by_variant.png", "sensitivity.png"}, {"compare_by_mode.png"}),
         "vfaith": ({"metrics_by_category.png"}, {"compare_overall.png"})}


def check_report(folder: Path, plots: set[str]) -> str:
    """report.md of a score or report dir in the shared shape; returns its text."""
    text = (folder / "report.md").read_text()
    assert "## Metrics shown" in text and "| key | metric | meaning | better | range | definition |" in text
    bare = [line for line in text.splitlines() if re.search(r"n/a(?! \()", line) and not line.startswith("n/a:")]
    assert not bare, f"{folder / 'report.md'}: an n/a without its reason: {bare[:3]}"
    linked = set(re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text))
    assert plots <= linked, (plots, linked)
    for name in linked:
        assert (folder / name).read_bytes()[:4] == b"\x89PNG", name
    return text


@pytest.mark.parametrize("family", ["crm", "vfaith"])
def test_score_and_comparison_reports_share_the_shape(family: str, tmp_path: Path) -> None:
    assert main(["quickstart", "--family", family, "--out", str(tmp_path), "--no-progress"]) == 0
    score_plots, report_plots = PLOTS[family]
    scores = sorted((tmp_path / "scores").iterdir())
    for score in scores:
        check_report(score, score_plots)
    text = check_report(tmp_path / "report", report_plots)
    comparison = json.loads((tmp_path / "report" / "comparison.json").read_text())
    n = len(comparison["models"])
    assert n >= len(families.get(family).reference_models)
    assert len(comparison[PAIRS_KEY[family]]) == n * (n - 1) // 2  # every pair of models compared
    # p-values in the one format (4 significant digits, evaluators/report_tables.fmt_p), never rounded to 0.000
    assert not re.search(r"McNemar[^\n]*\| 0\.000 ", text)
