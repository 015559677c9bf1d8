"""The PTX frontend: a lark grammar and the builder of the `ptx` dialect."""

from qgc.frontend.ptx_parser import grammar_lines, parse_ptx

__all__ = ["grammar_lines", "parse_ptx"]
