"""Write docs/ptx-coverage.md from the code: `python -m qgc.coverage_doc`.

Three parts: the directives the grammar reads, the instruction forms the `ref`
engine executes (from its dispatch table), and a census of the opcodes that the
examples and the shared kernel suite use, with the engines that run them.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from qgc.diagnostics import QgcError
from qgc.dialects import ptx
from qgc.frontend import grammar_lines, parse_ptx

REPO = Path(__file__).resolve().parents[1]
GRAMMAR = Path(__file__).parent / "frontend" / "ptx.lark"
ENGINES_LATER = ("simt", "tensor", "model")


def grammar_directives() -> list[str]:
    return sorted(set(re.findall(r'"(\.[a-z_0-9]+)"', GRAMMAR.read_text())))


def kernel_files(shared: Path) -> list[Path]:
    return sorted((REPO / "examples").glob("*/*.ptx")) + sorted((shared / "kernels").glob("*.ptx"))


def census(files: list[Path]) -> tuple[dict[str, set[str]], dict[str, bool]]:
    """opcode → kernels using it; kernel → whether the ref engine accepts it."""
    from qgc.runtime.ref import compile_kernel, find_ptx_module, pick_entry

    users: dict[str, set[str]] = defaultdict(set)
    accepted: dict[str, bool] = {}
    for path in files:
        name = f"{path.parent.name}/{path.name}"
        module = parse_ptx(path.read_text(), str(path))
        for op in module.walk():
            if isinstance(op, ptx.InstOp):
                users[op.opcode.data].add(name)
        pmod = find_ptx_module(module)
        try:
            compile_kernel(pmod, pick_entry(pmod, None), 4)
            accepted[name] = True
        except QgcError:
            accepted[name] = False
    return users, accepted


def render(shared: Path) -> str:
    from qgc.runtime.coverage import coverage_markdown

    files = kernel_files(shared)
    users, accepted = census(files)
    out = ["# PTX coverage", "",
           "Generated from the code by `make docs` (`python -m qgc.coverage_doc`); "
           "do not edit by hand. A test checks that this file is current.", "",
           "## Frontend", "",
           f"The grammar (`qgc/frontend/ptx.lark`, {grammar_lines()} lines) reads these "
           "directives:", "",
           " ".join(f"`{d}`" for d in grammar_directives()), "",
           "## Instruction forms executed by the `ref` engine", "",
           coverage_markdown(),
           "## Opcodes used by the examples and the shared kernel suite", "",
           f"{len(users)} distinct opcodes over {len(files)} PTX files "
           f"({sum(accepted.values())} accepted whole by `ref`). Engines `simt`, "
           "`tensor` and `model` do not exist yet.", "",
           "| opcode | kernels | ref |", "|---|---:|---|"]
    for opcode in sorted(users):
        ok = all(accepted[k] for k in users[opcode])
        out.append(f"| `{opcode}` | {len(users[opcode])} | {'yes' if ok else 'no'} |")
    return "\n".join(out) + "\n"


def main() -> int:
    import os
    shared = Path(os.environ.get("QGC_SHARED", REPO.parent / "shared"))
    sys.stdout.write(render(shared))
    return 0


if __name__ == "__main__":
    sys.exit(main())
