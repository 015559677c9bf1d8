"""Textual IR → a module, every op's position in the file kept for diagnostics
(as MLIR's parser gives each op its file location), parse errors as
`file:LINE:COL: error: message` with the source line and a caret."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from qgc.diagnostics import SourceError, SourcePosition, remember_position


class _LocatingParser(Parser):
    """xDSL's parser, noting where each op starts."""

    def parse_operation(self) -> Operation:
        start = self._current_token.span.get_location()
        op = super().parse_operation()
        remember_position(op, SourcePosition(start.file, start.line, start.col))
        return op


def parse_mlir(ctx: Context, text: str, filename: str = "<stdin>") -> builtin.ModuleOp:
    """Parse textual IR; raises SourceError (status 2)."""
    try:
        return _LocatingParser(ctx, text, filename).parse_module()
    except ParseError as err:
        where = err.span.get_location()
        raise SourceError(filename, where.line, where.col, err.msg, text) from None
