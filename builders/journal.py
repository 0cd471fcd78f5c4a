"""A build dir's journal: the append-only JSON-lines files that say what a build has done, for every family.

Contract
--------
A family's journal subclasses `BuildJournal`, naming its files (`FILES`: the attribute its appender
takes -> the file name, in reading order, e.g. {"records": "records.jsonl", "rejected":
"rejected.jsonl"}), what a line of each needs (`NEEDS`, for the message) and the family's `TITLE`,
and implements `note(kind, line, where)`: take in one line already written (its key done, its
counts; `where` is "FILE:LINE" for the family's own messages), raising KeyError, TypeError or
AttributeError when the line is not one of the family's.

- Constructing it reads every file that exists, line by line, through `note`, and writes nothing;
  a line `note` cannot take is one MmfaithError naming the file and line and the fix (a new --out).
  A torn last line (a crash mid-write) is left to `open`.
- `open()` starts appending: each file's `JsonlAppender` (mmfaith/jsonl.py: a torn last line is cut
  first, every line flushed whole) becomes the attribute `FILES` names; `close()` closes them.
- `path(kind)` is the file of a kind.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from mmfaith.errors import MmfaithError
from mmfaith.jsonl import JsonlAppender, read_jsonl


class BuildJournal(ABC):
    """The journal files of one build dir (module docstring)."""

    TITLE: ClassVar[str]
    FILES: ClassVar[dict[str, str]]
    NEEDS: ClassVar[dict[str, str]]

    def __init__(self, out: Path) -> None:
        self.out = out
        for kind in self.FILES:
            path = self.path(kind)
            if not path.exists():
                continue
            for number, line in read_jsonl(path):
                try:
                    self.note(kind, line, f"{path}:{number}")
                except (KeyError, TypeError, AttributeError) as exc:
                    raise MmfaithError(f"{path}:{number}: not a line of an mmfaith {self.TITLE} build (it needs "
                                       f"{self.NEEDS[kind]}; {exc!r}), so {out} is not a build dir to resume; "
                                       "choose a new --out (or an empty folder).") from exc

    def path(self, kind: str) -> Path:
        """The file of one kind of line."""
        return self.out / self.FILES[kind]

    @abstractmethod
    def note(self, kind: str, line: dict[str, Any], where: str) -> None:
        """Take in one line already written (module docstring)."""

    def open(self) -> None:
        """Start appending (a torn last line left by a crash is cut first)."""
        for kind in self.FILES:
            setattr(self, kind, JsonlAppender(self.path(kind)))

    def close(self) -> None:
        for kind in self.FILES:
            getattr(self, kind).close()
