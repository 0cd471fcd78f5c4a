"""One help style for every verb: examples keep their line breaks and every option shows its default."""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mmfaith.families import Family


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Descriptions and epilogs as written; "(default: X)" after every option's help that has a default."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        help_text = action.help or ""
        unset = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if unset or action.default == [] or "default" in help_text or not action.option_strings:
            return help_text
        return super()._get_help_string(argparse.Action(action.option_strings, action.dest, default=action.default,
                                                        help=help_text or " "))


class HelpParser(argparse.ArgumentParser):
    """The root parser's class: every subparser made from it (argparse reuses the class) uses HelpFormatter."""

    def __init__(self, *args: object, formatter_class: type[argparse.HelpFormatter] = HelpFormatter,
                 **kwargs: object) -> None:
        super().__init__(*args, formatter_class=formatter_class, **kwargs)  # type: ignore[arg-type]


def family_parsers(subparsers: argparse._SubParsersAction, verb: str, help_text: str, description: str,
                   families: list[Family], help_of: Callable[[Family], str],
                   epilog_of: Callable[[Family], str | None] = lambda family: None,
                   ) -> Iterator[tuple[Family, argparse.ArgumentParser]]:
    """Add `verb` with one subcommand per family (its first word, FAMILY); yield each family's parser."""
    names = ", ".join(family.name for family in families)
    verb_parser = subparsers.add_parser(verb, help=help_text, description=f"{description} Families: {names}.")
    by_family = verb_parser.add_subparsers(dest="family", required=True, metavar="FAMILY")
    for family in families:
        yield family, by_family.add_parser(family.name, help=help_of(family), epilog=epilog_of(family),
                                           formatter_class=HelpFormatter)
