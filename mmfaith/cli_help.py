"""One help style for every verb: examples keep their line breaks and every option shows its default."""
from __future__ import annotations

import argparse


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions and epilogs as written; "(default: X)" after every option's help that has a default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in help_text or not action.option_strings:
            return help_text
        return super()._get_help_string(argparse.Action(action.option_strings, action.dest, default=action.default,
                                                        help=help_text or " "))
