"""Kept for imports written before release became a stage of its own: see mmfaith.release.manifest."""
from mmfaith.release.manifest import VerifyReport, read_manifest, verify_release

__all__ = ["VerifyReport", "read_manifest", "verify_release"]
