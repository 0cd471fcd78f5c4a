"""Kept for imports written before release became a stage of its own: see mmfaith.release.writer."""
from mmfaith.release.writer import ReleaseRequest, ReleaseSummary, release_spd_faith

__all__ = ["ReleaseRequest", "ReleaseSummary", "release_spd_faith"]
