"""The one exception users see: a sentence that names the file, line or field, and the fix."""
from __future__ import annotations

from collections.abc import Sequence


class MmfaithError(Exception):
    """A problem with the user's input or environment; the CLI prints it without a traceback."""


SHOWN = 10
"""How many entries of a long list of problems an error message shows (`first_few`)."""


def first_few(problems: Sequence[str], limit: int = SHOWN, sep: str = "; ") -> str:
    """The first `limit` problems joined with `sep`, then 'and N more' where there are more: an error about
    thousands of bad lines stays one short line (the count is the caller's to say)."""
    shown = sep.join(problems[:limit])
    return shown + (f"{sep}and {len(problems) - limit} more" if len(problems) > limit else "")
