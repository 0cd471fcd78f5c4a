"""The `utils.py` of an lmms-eval task exported by `mmfaith export lmms-eval` (copied verbatim).

It imports mmfaith (install it in lmms-eval's environment: `pip install mmfaith`) so that the
prompts are rendered and the answers parsed by the family's own code, the bytes `mmfaith run`
sends. Rows are those of evaluators/harness/rows.py.

- `doc_to_visual`: the row's stored images, decoded (lmms-eval re-encodes them as PNG; keep
  LMMS_IMAGE_ENCODE_FORMAT unset or PNG: JPEG and WEBP are lossy).
- `doc_to_text`: the first round's text; for a dependent group (`generate_until_agentic`) each
  later call gets the earlier rounds' answers and returns the next round, then a terminal step
  whose response is the rounds record (runtime.rounds_record) carrying every round's text.
- `process_results`: `mmfaith_answered`, the share of the row's probes that got an answer (the
  metrics themselves are `mmfaith score`'s, after `mmfaith import lmms-eval`).
"""
from __future__ import annotations

import io
import os
from typing import Any

from PIL import Image

from mmfaith.evaluators.harness import runtime

LOSSY_FORMATS = ("JPEG", "JPG", "WEBP")


def _check_encode_format() -> None:
    image_format = os.environ.get("LMMS_IMAGE_ENCODE_FORMAT", "PNG").upper()
    if image_format in LOSSY_FORMATS:
        raise RuntimeError(f"LMMS_IMAGE_ENCODE_FORMAT={image_format} sends lossy images; mmfaith's benchmarks "
                           "need the stored pixels (subtle edits): unset it or set it to PNG.")


def doc_to_visual(doc: dict[str, Any]) -> list[Image.Image]:
    """The row's stored images, in the order shown."""
    _check_encode_format()
    return [Image.open(io.BytesIO(doc[f"image_{number}"]))
            for number in range(1, len(doc["image_sha256"]) + 1)]


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: Any = None, previous_output: list[str] | None = None,
                round_idx: int | None = None, previous_round_info: Any = None) -> Any:
    """The first round's text; with `round_idx`, the next step of a dependent group (module docstring)."""
    if round_idx is None:
        return doc["prompt"]
    answers = list(previous_output or [])
    earlier: list[str | None] = [None if runtime.failure_of(text) else text for text in answers]
    rounds = [{"probe": doc["probes"][0], "prompt": doc["prompt"], "response": earlier[0],
               "error": runtime.failure_of(answers[0]) if answers else "no response"}]
    for index in range(1, len(answers)):
        asked = runtime.round_of(doc, index, earlier[:index])
        rounds.append({"probe": doc["probes"][index], "prompt": asked.text, "response": earlier[index],
                       "error": runtime.failure_of(answers[index])})
    if len(answers) < len(doc["probes"]):
        following = runtime.round_of(doc, len(answers), earlier)
        if following.text is not None:
            return None, following.text, False, answers, {"rounds": len(answers)}
        for probe in doc["probes"][len(answers):]:
            rounds.append({"probe": probe, "prompt": None, "response": None, "error": following.not_asked})
    return None, None, True, [runtime.rounds_record(rounds)], None


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, float]:
    """`mmfaith_answered`: the share of the row's probes answered (failed calls count 0)."""
    text = results[0] if results else None
    rounds = runtime.read_rounds_record(text) if len(doc["probes"]) > 1 else None
    if rounds is not None:
        return {"mmfaith_answered": sum(entry["response"] is not None for entry in rounds) / len(doc["probes"])}
    return {"mmfaith_answered": 0.0 if runtime.failure_of(text) else 1.0}
