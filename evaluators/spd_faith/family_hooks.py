"""Placeholder hooks: filled in by the run-engine change (in progress)."""
from __future__ import annotations


def _pending(*_args: object) -> None:
    raise NotImplementedError("being written")


open_dataset = add_run_options = probe_plan = add_score_options = score = reference_model = _pending
