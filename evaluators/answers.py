"""Reading a final answer out of a model's response, for every family: the last \\boxed{...}.

The papers' evaluation prompts ask for the final answer in \\boxed{} (SPD-Faith appendix B,
VFaith section 4.1); a family then reads the boxed text its own way (yes/no, a count, an option).
"""
from __future__ import annotations

import re

_BOXED = re.compile(r"\\boxed\s*\{([^{}]*)\}")


def last_boxed(text: str | None) -> str | None:
    """The content of the last \\boxed{...}, stripped; None if there is none."""
    found = _BOXED.findall(text or "")
    return found[-1].strip() if found else None
