"""Shared pieces of qgc's custom assembly-format directives."""

from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
)


def end_print(state: PrintingState) -> None:
    """After printing a bare word: the next element gets a space before it."""
    state.should_emit_space = True
    state.last_was_punctuation = False


class OptionalDirective(CustomDirective):
    """A directive that anchors an optional group: present when its `anchor`
    attribute is set, nothing to reset when absent."""

    def anchor(self) -> AttributeVariable:
        raise NotImplementedError

    def is_anchorable(self) -> bool:
        return True

    def is_present(self, op: IRDLOperation) -> bool:
        return self.anchor().get(op) is not None

    def set_empty(self, state: ParsingState) -> None:
        pass
