"""Kept for imports written before release became a stage of its own: see mmfaith.release.push."""
from mmfaith.release.push import PushResult, push_release

__all__ = ["PushResult", "push_release"]
