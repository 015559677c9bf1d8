"""MLIR's `-verify-diagnostics` and `-split-input-file`, for `qgc-opt`.

A chunk of the input (the text between `// -----` lines) announces the
diagnostics it must produce in comments, as MLIR's tests do:

    // expected-error {{substring of the message}}       on this line
    // expected-error@+1 {{...}}                         N lines below (@-N above)
    // expected-error@12 {{...}}                         on line 12 of the file
    // expected-error@unknown {{...}}                    with no position in this file

A diagnostic nobody expected, or an expectation no diagnostic met, is an
error at its position: `unexpected error: ...`, `expected error "..." was not
produced`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qgc.diagnostics import Diagnostic, SourcePosition, format_diagnostic

_SPLIT_MARKER = re.compile(r"^// -----")
_EXPECTED = re.compile(r"expected-(?P<severity>error|warning|note|remark)"
                       r"(?:@(?P<where>[+-]?\d+|unknown))?\s*\{\{(?P<message>.*?)\}\}")


@dataclass
class Expected:
    """One `expected-*` comment: at `comment`, for a diagnostic on `line`
    (None: one with no position in this file)."""

    comment: SourcePosition
    line: int | None
    severity: str
    message: str
    seen: bool = False

    def matches(self, diagnostic: Diagnostic, filename: str) -> bool:
        position = diagnostic.position
        line = position.line if position and position.filename == filename else None
        return (not self.seen and self.line == line and self.severity == diagnostic.severity
                and self.message in diagnostic.message)


def split_input(text: str) -> list[tuple[int, str]]:
    """The chunks between `// -----` lines, each with the number of lines before it."""
    chunks: list[tuple[int, str]] = []
    start, lines = 0, text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if _SPLIT_MARKER.match(line):
            chunks.append((start, "".join(lines[start:index])))
            start = index + 1
    chunks.append((start, "".join(lines[start:])))
    return chunks


def expected_diagnostics(text: str, filename: str) -> list[Expected]:
    """The `expected-*` comments of `text` (lines numbered as in the file)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        comment = line.find("//")
        for m in _EXPECTED.finditer(line, comment) if comment >= 0 else ():
            where = m["where"]
            if where is None:
                target = number
            elif where == "unknown":
                target = None
            elif where[0] in "+-":
                target = number + int(where)
            else:
                target = int(where)
            found.append(Expected(SourcePosition(filename, number, m.start() + 1), target,
                                  m["severity"], m["message"]))
    return found


def check_expected(expected: list[Expected], produced: list[str], filename: str) -> list[str]:
    """The mismatches between the diagnostics `produced` (as printed) and the
    `expected` ones, each as a printed diagnostic; none when they agree."""
    mismatches = []
    for text in produced:
        diagnostic = Diagnostic.parse(text)
        match = next((e for e in expected if e.matches(diagnostic, filename)), None)
        if match is not None:
            match.seen = True
        else:
            mismatches.append(_at(diagnostic.position, f"unexpected {diagnostic.severity}: "
                                                       f"{diagnostic.message}"))
    for e in expected:
        if not e.seen:
            mismatches.append(_at(e.comment, f'expected {e.severity} "{e.message}" was not '
                                             "produced"))
    return mismatches


def _at(position: SourcePosition | None, message: str) -> str:
    if position is None:
        return f"error: {message}"
    return format_diagnostic(*position, message)
