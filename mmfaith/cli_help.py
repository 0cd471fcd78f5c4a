"""One help style for every verb: examples keep their line breaks and every option shows its default."""
from __future__ import annotations

import argparse
from collections.abc import Callable
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


class FamilyParser(HelpParser):
    """A family's subcommand parser (`mmfaith run FAMILY`) whose options are added only when it parses or shows its
    help: `populate(parser)` imports the family's code, so `mmfaith --help` and another family's verb never pay
    for it."""

    def __init__(self, *args: object, populate: Callable[[argparse.ArgumentParser], None] | None = None,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self._populate = populate

    def _populated(self) -> None:
        if self._populate is not None:
            populate, self._populate = self._populate, None
            populate(self)

    def parse_known_args(self, args: object = None, namespace: object = None) -> tuple[argparse.Namespace, list[str]]:
        self._populated()
        return super().parse_known_args(args, namespace)  # type: ignore[arg-type]

    def format_help(self) -> str:
        self._populated()
        return super().format_help()

    def format_usage(self) -> str:
        self._populated()
        return super().format_usage()


def family_parsers(subparsers: argparse._SubParsersAction, verb: str, help_text: str, description: str,
                   families: list[Family], help_of: Callable[[Family], str],
                   populate: Callable[[Family, argparse.ArgumentParser], None],
                   epilog_of: Callable[[Family], str | None] = lambda family: None) -> None:
    """Add `verb` with one subcommand per family (its first word, FAMILY); `populate(family, parser)` adds the
    family's options when that subcommand is used (`FamilyParser`)."""
    names = ", ".join(family.name for family in families)
    verb_parser = subparsers.add_parser(verb, help=help_text, description=f"{description} Families: {names}.")
    by_family = verb_parser.add_subparsers(dest="family", required=True, metavar="FAMILY", parser_class=FamilyParser)
    for family in families:
        by_family.add_parser(family.name, help=help_of(family), epilog=epilog_of(family), formatter_class=HelpFormatter,
                             populate=lambda parser, family=family: populate(family, parser))
