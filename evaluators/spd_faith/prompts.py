"""SPD-Faith probes and their prompt templates (versioned; the run records their hash).

Probes (SPD-Faith section 3.2 and appendix B.2): `same` ("Are the two pictures the same?") and
`different` ("Are the two pictures different?") for the Contradiction and Consistency Ratio;
`count` (how many differences) for DQR and DS; then `describe`, asked with the model's own count,
as the paper's two-phase DRF protocol does ("There are {n} differences in the picture. Can you
find them?"; with a count below 1 or none readable, the model is asked to describe any
differences). Every prompt asks for reasoning, a fenced ```json list of the differences seen
(`same`, `different`, `describe`), and the final answer in \\boxed{}.
"""
from __future__ import annotations

import hashlib

from mmfaith.jsonl import canonical_json

PROBES = ("same", "different", "count", "describe")
TEMPLATE_VERSION = "spd-faith-prompts/1"
LAYOUTS = ("separate", "side-by-side")
ORDERS = ("original-first", "edited-first")
ORDER_CHOICES = (*ORDERS, "random")

_PICTURES = {
    "separate": "You are shown two pictures, the first and then the second.",
    "side-by-side": "You are shown one image that holds two pictures side by side: the left half and the right half.",
}
_CLAIMS = (
    "List every difference you see in a fenced ```json block, as a JSON list of objects "
    '{{"type": "color" | "remove" | "position", "object": "<what object>", "detail": "<what changed>"}} '
    '("color": the object changed color; "remove": the object is in one picture only; '
    '"position": the object moved). Use an empty list [] if you see none.'
)
TEMPLATES = {
    "same": "{pictures}\nAre the two pictures the same? Think step by step about what you see. " + _CLAIMS
            + "\nFinally, answer with \\boxed{{yes}} or \\boxed{{no}}.",
    "different": "{pictures}\nAre the two pictures different? Think step by step about what you see. " + _CLAIMS
                 + "\nFinally, answer with \\boxed{{yes}} or \\boxed{{no}}.",
    "count": "{pictures}\nHow many differences are there between the two pictures? Think step by step, "
             "then give the number of differences as \\boxed{{N}}.",
    "describe": "{pictures}\nThere are {count} differences in the picture. Can you find them? "
                "Think step by step. " + _CLAIMS + "\nFinally, give the number of differences you found as \\boxed{{N}}.",
    "describe_open": "{pictures}\nDescribe any differences between the two pictures. Think step by step. " + _CLAIMS
                     + "\nFinally, give the number of differences you found as \\boxed{{N}}.",
}
TEMPLATES_SHA256 = hashlib.sha256(canonical_json({"version": TEMPLATE_VERSION, "pictures": _PICTURES,
                                                  "templates": TEMPLATES}).encode("utf-8")).hexdigest()


def prompt_text(probe: str, layout: str, count: int | None = None) -> str:
    """The user text of one probe. `count` is the model's own count, used by `describe` only."""
    if probe not in PROBES:
        raise ValueError(f"unknown probe {probe!r}")
    pictures = _PICTURES[layout]
    if probe == "describe":
        if count is None or count < 1:
            return TEMPLATES["describe_open"].format(pictures=pictures)
        return TEMPLATES["describe"].format(pictures=pictures, count=count)
    return TEMPLATES[probe].format(pictures=pictures)


def probe_of_prompt(text: str) -> str | None:
    """Which probe a prompt text is (for servers that answer probes, such as the reference models)."""
    if "Are the two pictures the same?" in text:
        return "same"
    if "Are the two pictures different?" in text:
        return "different"
    if "How many differences are there" in text:
        return "count"
    if "Can you find them?" in text or "Describe any differences" in text:
        return "describe"
    return None
