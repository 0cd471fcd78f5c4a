"""The SPD-Faith builder: COCO images and instance masks -> gated image pairs (build dir).

`build_spd_faith(BuildRequest)` is the entry (`build.py`); `cli.py` declares its CLI options for
the family registry. Everything else in this folder is SPD-Faith's own (difficulty rule, planners,
quotas, preview); image operations, inpainters, gates and the COCO adapter are shared
(`mmfaith.builders`).
"""
from mmfaith.builders.spd_faith.build import BuildRequest, BuildSummary, build_spd_faith

__all__ = ["BuildRequest", "BuildSummary", "build_spd_faith"]
