"""The one exception users see: a sentence that names the file, line or field, and the fix."""
from __future__ import annotations


class MmfaithError(Exception):
    """A problem with the user's input or environment; the CLI prints it without a traceback."""
