"""Compiler diagnostics: `file:LINE:COL: error: message`, the source line and a caret.

Every user-facing failure is a `QgcError`; the drivers print it and exit with its
status, never with a traceback.
"""

from __future__ import annotations

import re
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from xdsl.ir import Operation

_LOCATED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<rest>.*)$", re.S)
_SEVERITY = re.compile(r"^(?P<severity>error|warning|note|remark): ")

#: Source text by file name, for the snippets of inputs no file holds (stdin).
_SOURCES: dict[str, str] = {}
#: Where each op parsed from textual IR stands in its file: MLIR gives such an op
#: that position as its location; xDSL leaves it unknown, and the printed IR must
#: not change, so the position lives beside the op.
_POSITIONS: weakref.WeakKeyDictionary[Operation, SourcePosition] = weakref.WeakKeyDictionary()


class QgcError(Exception):
    """A diagnostic for the user; `status` is the process exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


class SourceError(QgcError):
    """An error at a position of a source file (1-based line and column)."""

    def __init__(self, filename: str, line: int, column: int, message: str,
                 source: str | None = None, status: int = 2):
        self.filename, self.line, self.column = filename, line, column
        self.message = message
        super().__init__(format_diagnostic(filename, line, column, message, source), status)


def format_diagnostic(filename: str, line: int, column: int, message: str,
                      source: str | None = None, severity: str = "error") -> str:
    text = f"{filename}:{line}:{column}: {severity}: {message}"
    snippet = source_snippet(filename, line, column, source)
    return f"{text}\n{snippet}" if snippet else text


def source_snippet(filename: str, line: int, column: int, source: str | None = None) -> str:
    if source is None:
        source = _SOURCES.get(filename)
    if source is None:
        try:
            source = Path(filename).read_text(errors="replace")
        except OSError:
            return ""
    lines = source.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    src = lines[line - 1].expandtabs(1)
    return f"{src}\n{' ' * max(column - 1, 0)}^"


def with_snippet(message: str, source: str | None = None) -> str:
    """Add the source line and caret to a message that starts `file:L:C: `."""
    m = _LOCATED.match(message)
    if not m:
        return message
    snippet = source_snippet(m["file"], int(m["line"]), int(m["col"]), source)
    if not snippet or snippet in message:    # none to add, or added already
        return message
    return f"{message}\n{snippet}"


class SourcePosition(NamedTuple):
    filename: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}"


def remember_source(filename: str, text: str) -> None:
    """Keep `text` as the source of `filename` for snippets (stdin has no file)."""
    _SOURCES[filename] = text


def remember_position(op: Operation, position: SourcePosition) -> None:
    _POSITIONS[op] = position


def op_position(op: Operation) -> SourcePosition | None:
    """Where `op` comes from: its file location, else where the textual IR
    it was parsed from holds it, else None."""
    from xdsl.dialects.builtin import FileLineColLoc

    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourcePosition(loc.filename.data, loc.line.data, loc.column.data)
    return _POSITIONS.get(op)


def location_prefix(op: Operation) -> str:
    """`file.ptx:L:C: ` for an op that keeps a source position, else nothing."""
    position = op_position(op)
    return f"{position}: " if position else ""


def split_severity(message: str) -> tuple[str, str]:
    """("error", "text") of `error: text`; a message without one is an error."""
    m = _SEVERITY.match(message)
    return (m["severity"], message[m.end():]) if m else ("error", message)


def at_op(op: Operation | None, message: str) -> str:
    """`message` (with or without its `error: `) as a diagnostic at `op`, with
    the source line and a caret where the op has a position, else `error: ...`.
    A message that names its own position keeps it."""
    if _LOCATED.match(message):
        return with_snippet(message)
    severity, text = split_severity(message)
    position = None if op is None else op_position(op)
    if position is None:
        return f"{severity}: {text}"
    return format_diagnostic(*position, text, severity=severity)


class Diagnostic(NamedTuple):
    """The first line of a printed diagnostic, read back (`--verify-diagnostics`)."""

    position: SourcePosition | None
    severity: str
    message: str

    @classmethod
    def parse(cls, text: str) -> Diagnostic:
        first = text.strip().splitlines()[0] if text.strip() else "error: "
        m = _LOCATED.match(first)
        position = None
        if m:
            position = SourcePosition(m["file"], int(m["line"]), int(m["col"]))
            first = m["rest"]
        severity, message = split_severity(first)
        return cls(position, severity, message)
