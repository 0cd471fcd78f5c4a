"""Asking without the image (`mmfaith run FAMILY --no-image`, MMStar's "w/o image" setting).

Contract
--------
`without_images(turns)` returns the conversation with every image part removed and, as the first
text of the first user turn that showed an image, `NO_IMAGE_NOTE`: the one sentence that tells the
model no image is given. A turn left with no content at all (a tool result that was only a crop)
says "(no image)". The text of every probe is otherwise unchanged, so the answers of a no-image run
pair item by item with a with-image run of the same model: `mmfaith report` writes MMStar's
multimodal gain (with minus without) and leakage (without minus the `prior` reference model)
from the two score dirs (evaluators/blind_gain.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

NO_IMAGE_NOTE = "No image is given with this question: answer it from the text alone."
EMPTY_TURN = "(no image)"


def without_images(turns: Sequence[Any]) -> list[Any]:
    """The turns (run_engine.Turn) with their images removed and the note added (module docstring)."""
    result, noted = [], False
    for turn in turns:
        texts = tuple(piece for piece in turn.content if isinstance(piece, str))
        if not noted and turn.role == "user" and len(texts) != len(turn.content):
            texts, noted = (NO_IMAGE_NOTE, *texts), True
        result.append(replace(turn, content=texts or (EMPTY_TURN,)))
    return result
