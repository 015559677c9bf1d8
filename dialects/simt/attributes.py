"""The `simt` attributes: registers (`r3`, `v3`, `p0`, `vp0`) and guards (`!p0`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind

_REG_RE = re.compile(r"^(vp|v|r|p)(\d+)$")


@irdl_attr_definition
class RegAttr(ParametrizedAttribute):
    """A register: `r3` (physical), `v3` (virtual), `p0` (predicate), `vp0`
    (virtual predicate). In an op's custom syntax it prints bare."""

    name = "simt.reg"
    kind: StringAttr
    index: IntAttr

    def __init__(self, kind: str, index: int):
        super().__init__(StringAttr(kind), IntAttr(index))

    @property
    def is_pred(self) -> bool:
        return self.kind.data in ("p", "vp")

    @property
    def is_virtual(self) -> bool:
        return self.kind.data in ("v", "vp")

    @property
    def spelled(self) -> str:
        return f"{self.kind.data}{self.index.data}"

    @classmethod
    def parse_bare(cls, parser: AttrParser) -> RegAttr:
        """`r0`, `v3`, `p1`, `vp2` (the form inside ops)."""
        pos = parser.pos
        ident = parser.parse_identifier(context_msg=" register (r0, v3, p1, vp2)")
        m = _REG_RE.match(ident)
        if not m:
            parser.raise_error(f"expected a register (r0, v3, p1, vp2), got '{ident}'", pos)
        return RegAttr(m[1], int(m[2]))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            r = cls.parse_bare(parser)
        return [r.kind, r.index]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.spelled}>")

    def verify(self) -> None:
        if self.kind.data not in ("r", "v", "p", "vp"):
            raise VerifyException(f"unknown register kind '{self.kind.data}'")
        if self.index.data < 0:
            raise VerifyException("register index must be non-negative")


def reg(kind: str, index: int) -> RegAttr:
    return RegAttr(kind, index)


@irdl_attr_definition
class GuardAttr(ParametrizedAttribute):
    """A per-lane condition: a predicate register, or its negation `!p0`."""

    name = "simt.guard"
    pred: RegAttr
    negated: IntAttr

    def __init__(self, pred: RegAttr, negated: bool = False):
        super().__init__(pred, IntAttr(int(negated)))

    @property
    def is_negated(self) -> bool:
        return bool(self.negated.data)

    def inverted(self) -> GuardAttr:
        return GuardAttr(self.pred, not self.is_negated)

    @property
    def spelled(self) -> str:
        return ("!" if self.is_negated else "") + self.pred.spelled

    @classmethod
    def parse_bare(cls, parser: AttrParser) -> GuardAttr:
        """`p0`, `!p0`, `vp1`, `!vp1` (the form inside ops)."""
        pos = parser.pos
        token = parser._parse_optional_token(MLIRTokenKind.EXCLAMATION_IDENT)
        text = token.text[1:] if token is not None else \
            parser.parse_identifier(context_msg=" predicate")
        m = _REG_RE.match(text)
        if not m or m[1] not in ("p", "vp"):
            parser.raise_error(f"expected a predicate (p0, !p0, vp1), got '{text}'", pos)
        return GuardAttr(RegAttr(m[1], int(m[2])), token is not None)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            g = cls.parse_bare(parser)
        return [g.pred, g.negated]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.spelled}>")

    def verify(self) -> None:
        if not self.pred.is_pred:
            raise VerifyException(f"guard '{self.pred.spelled}' is not a predicate register")


Src = RegAttr | IntAttr


def i64_attr(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)
