"""How a run goes, for every family: the shared flags of `mmfaith run`, one field each.

Kept apart from the engine so that the CLI reads the defaults without importing the client.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunSettings:
    """How to run, shared by every family (the CLI's shared flags, one field each)."""

    dataset: Path | str
    model: str
    base_urls: tuple[str, ...]
    out: Path
    concurrency: int = 16
    limit: int | None = None
    max_tokens: int = 1024
    temperature: float = 0.0
    timeout_s: float = 300.0
    max_attempts: int = 5
    dry_run: bool = False
    api_key_env: str | None = None
    progress: bool = True
    backoff_s: float = 1.0
    """The first retry waits up to this long (full jitter), doubling per attempt; a Retry-After overrides it."""
    sampling_seed: int = 0
    """The run's sampling seed: each request's `seed` is derived from it, the item, the probe and the repeat."""
    repeats: int = 1
    """How many times every item's probes are asked (repeat 0 .. repeats - 1), each with its own seeds."""
    no_image: bool = False
    """--no-image: every image part is removed from every request (evaluators/blind.py)."""
    serve: dict[str, Any] | None = None
    """With --serve: the vLLM servers mmfaith started (model, arguments, replicas, GPU sets), for run.json."""

    def generation(self) -> dict[str, Any]:
        """Every setting that shapes an answer, as run.json's `generation` and each prediction line's
        `meta.generation` record it; a run dir resumes only with the same. Add a key here for a new one."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, "sampling_seed": self.sampling_seed}
