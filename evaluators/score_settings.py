"""What every family's score takes: the settings of `mmfaith score FAMILY`'s shared options, one base for the
families' score requests (each adds its dataset and its own settings: a judge, thresholds...)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.evaluators.coverage import COVERAGE_THRESHOLD


@dataclass(frozen=True, kw_only=True)
class ScoreSettings:
    """`predictions` (a run's predictions.jsonl or a submission) scored into `out`: `from_run` (the last line
    of an (id, probe) wins; else a second answer is an error), `n_bootstrap` replicates of the 95% CIs drawn
    with `seed`, `overwrite` (replace another score in `out`), `drop_stale` (drop lines that showed other
    images), `repeat` (which repeat of a `run --repeats N`), and the answer-coverage warning threshold."""

    predictions: Path
    out: Path
    from_run: bool = False
    n_bootstrap: int = 1000
    seed: int = 0
    overwrite: bool = False
    drop_stale: bool = False
    repeat: int = 0
    """Which repeat of a `run --repeats N` to score."""
    coverage_threshold: float = COVERAGE_THRESHOLD


def shared_score_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The `ScoreSettings` fields from the options score_cli adds for every family."""
    return {"predictions": args.predictions, "out": args.out, "from_run": args.from_run, "n_bootstrap": args.bootstrap,
            "seed": args.seed, "overwrite": args.overwrite, "drop_stale": args.drop_stale, "repeat": args.repeat,
            "coverage_threshold": args.coverage_threshold}
