"""Compiler diagnostics: `file:LINE:COL: error: message`, the source line and a caret.

Every user-facing failure is a `QgcError`; the drivers print it and exit with its
status, never with a traceback.
"""

from __future__ import annotations

import re
from pathlib import Path

_LOCATED = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?P<rest>.*)$", re.S)


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
    return f"{message}\n{snippet}" if snippet else message


def location_prefix(op) -> str:
    """`file.ptx:L:C: ` for an op that keeps a source location, else nothing."""
    from xdsl.dialects.builtin import FileLineColLoc

    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}: "
    return ""
