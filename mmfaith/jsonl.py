"""Append-only JSON Lines files: the journal every stage writes and resumes from.

Writers append one complete line per record and hand it to the operating system at once, so a crashed
process loses at most the line being written; they make the file durable (fsync) when a line comes
SYNC_SECONDS or more after the last time and when closed, so a machine that loses power loses at most the
lines since then, which a resumed build or run makes again (a build that rejects thousands of candidates
paid an fsync per line). Every line and every text file written here passes `mmfaith.redact.redact`
(the API key in use, bearer and basic credentials, URL credentials), so no secret a server echoed
or a URL carried reaches the disk. Readers drop a torn last line (no trailing newline) and report any other bad
line with the file name and line number. A file read on several processes is cut into `LineBlock`s
(`line_blocks`), each parsed on its own (`read_block`) with the same rules and errors as `read_jsonl`.
"""
from __future__ import annotations

import io
import json
import os
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from mmfaith.errors import MmfaithError
from mmfaith.redact import redact, redact_record


def canonical_json(value: Any) -> str:
    """The one serialisation used for hashing and for files: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def read_json_object(path: Path, missing_hint: str) -> dict[str, Any]:
    """A file holding one JSON object. MmfaithError naming the file (and the line) when it is
    missing (the message ends with `missing_hint`, the fix), not UTF-8, not JSON, or not an object."""
    if not path.is_file():
        raise MmfaithError(f"{path}: not found; {missing_hint}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise MmfaithError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}).") from exc
    except UnicodeDecodeError as exc:
        raise MmfaithError(f"{path}: not UTF-8 text ({exc.reason}).") from exc
    if not isinstance(value, dict):
        raise MmfaithError(f"{path}: expected a JSON object, found {type(value).__name__}.")
    return value


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, object) for each complete line; a torn last line is ignored.

    Raises MmfaithError naming the file and line for a line that is not a JSON object. The file is read
    one line at a time (memory: one line).
    """
    with open(path, "rb") as handle:
        yield from _objects(path, enumerate(handle, start=1))


@dataclass(frozen=True)
class LineBlock:
    """Bytes [start, end) of a file: whole lines (the file's last one may lack its newline), the first of them
    numbered `first_line_number` (from 1). Small to pickle: a worker process reads the bytes itself from a
    regular file; a block of a pipe or device, which cannot be read twice, carries its `data`."""

    path: Path
    start: int
    end: int
    first_line_number: int
    data: bytes | None = None


def line_blocks(path: Path, size: int, max_line: int | None = None, digest: Any = None) -> Iterator[LineBlock]:
    """`path` cut into blocks of `size` bytes each carried on to the end of the line it stops in, in file order.

    The file is opened by the call (OSError then) and read as the blocks are taken, one block at a time, each
    byte once: `digest` (a hashlib object), when given, is updated with every byte, so it holds the file's hash
    once the last block is taken. With `max_line`, a line longer than `max_line` bytes (its newline included)
    is a MmfaithError naming the file and line, raised after reading at most `max_line` bytes of it (a file of
    one endless line, /dev/zero, is never read whole).
    """
    handle = open(path, "rb")
    return _blocks(path, handle, size if max_line is None else min(size, max_line), max_line, digest)


def _blocks(path: Path, handle: BinaryIO, size: int, max_line: int | None, digest: Any) -> Iterator[LineBlock]:
    """`line_blocks` on the open `handle` (closed at the end). Lines wholly inside a read of `size` <= `max_line`
    bytes are short enough; the one a read stops in is measured whole."""
    with handle:
        start, number = 0, 1
        regular = stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
        while data := handle.read(size):
            tail = b"" if data.endswith(b"\n") else handle.readline(-1 if max_line is None else max_line + 1)
            ends = data.count(b"\n")
            if max_line is not None and len(data) - data.rfind(b"\n") - 1 + len(tail) > max_line:
                raise MmfaithError(f"{path}: line {number + ends} is longer than {max_line} bytes; not a JSON Lines "
                                   "file (one JSON object per line).")
            if digest is not None:
                digest.update(data)
                digest.update(tail)
            end = start + len(data) + len(tail)
            yield LineBlock(path, start, end, number, None if regular else data + tail)
            number += ends + tail.endswith(b"\n")
            start = end


def block_lines(block: LineBlock) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line with its newline) of every line of `block`, read from its file now (or its `data`)."""
    data = block.data
    if data is None:
        with open(block.path, "rb") as handle:
            handle.seek(block.start)
            data = handle.read(block.end - block.start)
    return enumerate(io.BytesIO(data), start=block.first_line_number)


def read_block(block: LineBlock) -> Iterator[tuple[int, dict[str, Any]]]:
    """`read_jsonl` of the lines of one block: the same (line number, object) pairs, skips and errors."""
    return _objects(block.path, block_lines(block))


def _objects(path: Path, lines: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(number, object) of each complete, non-blank numbered raw line of `path` (`read_jsonl`'s rules)."""
    for number, raw in lines:
        if not raw.endswith(b"\n") or not raw.strip():  # a torn last write, or a blank line
            continue
        yield number, _object(path, number, raw)


def _object(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MmfaithError(f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno}).") from exc
    if not isinstance(value, dict):
        raise MmfaithError(f"{path}:{number}: expected a JSON object, found {type(value).__name__}.")
    return value


def repair_torn_tail(path: Path) -> None:
    """Cut a torn last line left by a crash, so appends start on a fresh line."""
    if not path.exists():
        return
    with open(path, "rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


SYNC_SECONDS = 1.0
"""How long appended lines may go without an fsync while more lines come (module docstring)."""


class JsonlAppender:
    """Appends canonical JSON lines to a file: each line handed to the operating system before returning, the file
    made durable by a line SYNC_SECONDS or more after the last fsync and when closed (module docstring)."""

    def __init__(self, path: Path) -> None:
        repair_torn_tail(path)
        self.path = path
        self._handle = open(path, "ab")
        self._synced = time.monotonic()

    def append(self, record: dict[str, Any]) -> None:
        self._handle.write((canonical_json(redact_record(record)) + "\n").encode("utf-8"))
        self._handle.flush()
        if time.monotonic() - self._synced >= SYNC_SECONDS:
            self._sync()

    def _sync(self) -> None:
        os.fsync(self._handle.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        if not self._handle.closed:
            self._sync()
            self._handle.close()

    def __enter__(self) -> "JsonlAppender":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_text_atomic(path: Path, text: str) -> None:
    """`write_atomic` of a text file, redacted first (module docstring)."""
    write_atomic(path, redact(text).encode("utf-8"))


def write_lines_atomic(path: Path, lines: Iterable[str], batch: int = 4096) -> None:
    """`write_text_atomic` of the concatenated `lines` (each ending with a newline), written `batch` lines at a
    time: memory is that of a batch, not of the file (redaction never spans lines: a secret has no newline)."""
    remaining = iter(lines)
    with _atomic(path) as handle:
        for chunk in iter(lambda: list(islice(remaining, batch)), []):
            handle.write(redact("".join(chunk)).encode("utf-8"))


def write_atomic(path: Path, data: bytes) -> None:
    """Write a whole file so that readers see either the old or the new content, never a mix.

    The temporary file is named per process and thread, so concurrent writers of one path (two
    threads caching the same judge answer) each replace it whole and never collide."""
    with _atomic(path) as handle:
        handle.write(data)


@contextmanager
def _atomic(path: Path) -> Iterator[BinaryIO]:
    """A handle on a temporary file that replaces `path` once written and flushed to disk (`write_atomic`)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
