"""Errors that count (issue 34): a predictions file of thousands of bad lines is refused with one short line
giving the count, the first few bad lines with their numbers and the fix, never the whole list."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmfaith.errors import SHOWN, MmfaithError, first_few
from mmfaith.evaluators.predictions import read_predictions


def test_first_few_counts_what_it_leaves_out() -> None:
    assert first_few(["a", "b"]) == "a; b"
    assert first_few([str(i) for i in range(SHOWN + 3)]) == "; ".join(str(i) for i in range(SHOWN)) + "; and 3 more"
    assert first_few(["1", "2", "3"], limit=2, sep=", ") == "1, 2, and 1 more"


def test_ten_thousand_unknown_ids_give_a_short_counted_error(tmp_path: Path) -> None:
    path = tmp_path / "predictions.jsonl"
    lines = [{"id": f"vf-{i:016x}", "probe": "original", "response": "A", "model": "m", "meta": {}} for i in range(10_400)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(MmfaithError) as caught:
        read_predictions(path, {"vf-known": ("original", "edited")}, from_run=False)
    message = str(caught.value)
    assert len(message) < 1500 and "\n" not in message, len(message)
    assert message.startswith(f"{path}: 10400 bad line(s), fix them and score again (the first {SHOWN} shown): ")
    assert f"line 1: unknown id 'vf-{0:016x}' (not in the dataset)" in message
    assert f"line {SHOWN}: " in message and f"line {SHOWN + 1}: " not in message
    assert message.endswith(f"and {10_400 - SHOWN} more")
