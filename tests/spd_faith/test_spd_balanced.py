"""SPD-Faith's headline beside DS and DQR (issue 27 item 1): balanced same/different accuracy and the
false-alarm rate, computed by hand from the definition in evaluators/spd_faith/metrics.py."""
from __future__ import annotations

import numpy as np

from mmfaith.evaluators.spd_faith.metrics import _same_different, headline_beside_from_sums


def _answers(same: bool | None, different: bool | None) -> dict:
    return {"same": {"value": same}, "different": {"value": different}}


def _sum(parts: list[dict[str, float]], extra: dict[str, float]) -> dict[str, np.ndarray]:
    keys = {key for part in parts for key in part} | set(extra)
    return {key: np.array([sum(p.get(key, 0.0) for p in parts) + extra.get(key, 0.0)]) for key in keys}


def test_a_model_that_always_reports_a_difference_scores_half() -> None:
    # Blind stub: same? no, different? yes on every pair. Three differing pairs: 6 of 6 answers right;
    # one control pair: 0 of 2 right (and a false alarm). Balanced: (1 + 0) / 2 = 0.5.
    parts = [_same_different(_answers(False, True), differs=True) for _ in range(3)]
    parts.append(_same_different(_answers(False, True), differs=False))
    result = headline_beside_from_sums(_sum(parts, {"false_alarm": 1.0, "false_alarm_n": 1.0}))
    assert result["same_different_accuracy_differing"][0] == 1.0
    assert result["same_different_accuracy_control"][0] == 0.0
    assert result["same_different_balanced_accuracy"][0] == 0.5 and result["false_alarm_rate"][0] == 1.0


def test_unparsed_answers_are_left_out_and_a_missing_kind_is_undefined() -> None:
    # Differing pair: same unparsed, different yes (right): 1 of 1. Control pair: same yes (right),
    # different yes (wrong): 1 of 2. Balanced (1 + 0.5) / 2 = 0.75.
    parts = [_same_different(_answers(None, True), differs=True), _same_different(_answers(True, True), differs=False)]
    result = headline_beside_from_sums(_sum(parts, {"false_alarm": 1.0, "false_alarm_n": 1.0}))
    assert result["same_different_balanced_accuracy"][0] == 0.75
    only_differing = headline_beside_from_sums(_sum(parts[:1], {}))
    assert np.isnan(only_differing["same_different_balanced_accuracy"][0])
    assert np.isnan(only_differing["false_alarm_rate"][0])
