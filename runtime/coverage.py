"""What the reference engine supports, generated from its own dispatch table.

`supported_opcodes()` maps every accepted opcode form (PTX syntax, with
`{a,b}` for alternatives and `{.x}` for optional modifiers) to a short
description; it feeds the generated docs/ptx-coverage.md.
"""

from __future__ import annotations

from qgc.runtime.ref_ops import TABLE


def supported_opcodes() -> dict[str, str]:
    """Opcode form → description, for every instruction family the engine decodes."""
    out: dict[str, str] = {}
    for name in sorted(TABLE):
        entry = TABLE[name]
        for form in entry.forms:
            out[form] = entry.desc
    return out


def supported_families() -> list[str]:
    """The opcode families (the part of an opcode before its first dot)."""
    return sorted(TABLE)


def coverage_markdown() -> str:
    """A Markdown table of `supported_opcodes()`."""
    lines = ["| form | semantics |", "|---|---|"]
    for form, desc in supported_opcodes().items():
        lines.append(f"| `{form}` | {desc} |")
    return "\n".join(lines) + "\n"
