"""The family-specific part of annotation, as one value: a labeling config and a record <-> task mapping.

The push/pull machinery (label_studio.py) and the merge (merge.py) take a Family and never look
inside records except through it and the fields every family shares (`id`, `verification`).
A new family (VFaith pairs, CRM variants) adds an XML config and a module that builds one Family.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmfaith.annotation.votes import Vote

HELPER_PNG_LEVEL = 1
"""zlib level of the helper PNGs a family's `prepare` draws at push (MCoT's outlined copies): a push draws them
for every new record, and level 1 encodes a 640 px copy about 3x faster than PIL's default 6 for a somewhat
larger file (they are views for people, never released). A family whose boxes Label Studio can draw from
pre-filled regions (`task_predictions`, annotation/regions.py) needs no helper image at all."""


@dataclass(frozen=True)
class Family:
    """name: the family's CLI name. schema: the record schema (schemas/<schema>.schema.json) merged
    records must still satisfy. label_config(): the XML. image_fields: record field holding an
    image path (relative to the build dir) -> field holding its sha256; a changed hash flags the task.
    task_data(record, url, helper_paths): the task's data without the keys the machinery adds (`url`
    maps a path relative to the build dir to the URL Label Studio serves it from). read_vote(result,
    record, annotation_id, annotator, time): a Vote, or raises annotation.votes.Misfit.
    prepare(build_dir, record): optional, writes helper files (MCoT's outlined copies) and returns
    their paths relative to the build dir (the helper_paths; {} without it).
    task_predictions(build_dir, record): optional, the result of a pre-filled annotation a new task
    is imported with (annotation/regions.py: CRM's evidence boxes as editable rectangles, SPD-Faith's
    edited regions as read-only outlines that Label Studio draws, so its push renders no image)."""

    name: str
    schema: str
    label_config: Callable[[], str]
    image_fields: dict[str, str]
    task_data: Callable[[dict[str, Any], Callable[[str], str], dict[str, str]], dict[str, Any]]
    read_vote: Callable[[list[dict[str, Any]], dict[str, Any], int, str, str | None], Vote]
    prepare: Callable[[Path, dict[str, Any]], dict[str, str]] | None = None
    task_predictions: Callable[[Path, dict[str, Any]], list[dict[str, Any]]] | None = None
    after_pull: Callable[[Path, list[dict[str, Any]], str], None] | None = None
