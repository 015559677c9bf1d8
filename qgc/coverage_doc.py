"""Write docs/ptx-coverage.md from the code: `python -m qgc.coverage_doc`.

Four parts: the directives the grammar reads, the instruction forms the `ref`
engine executes (from its dispatch table), a census of the opcodes that the
examples and the shared kernel suite use, with whether `ref` runs them and the
`simt` stage compiles them, and the machine ops of the `simt` level (from the
tables of its dialect).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.utils.exceptions import DiagnosticException

from qgc import driver
from qgc.diagnostics import QgcError
from qgc.dialects import ptx, simt
from qgc.frontend import grammar_lines
from qgc.machine import opcodes
from qgc.pipeline import stage

GRAMMAR = Path(__file__).parent / "frontend" / "ptx.lark"
#: The engines/stages of the census, in column order.
ENGINES = ("ref", "simt", "tensor", "model")
#: Each menu of the `simt` dialect: the op class that reads it (for `MemoryOp`,
#: every op of that kind) and the table that defines it (in the machine's
#: opcode table `qgc.machine.opcodes`, else in the dialect `dialects/simt/`);
#: the op names and the values are read at render time.
MACHINE_MENUS = (
    (simt.AluOp, "ALU_OPCODES"), (simt.SetpOp, "SETP_CONDS"), (simt.PredOp, "PRED_ARITY"),
    (simt.AtomOp, "ATOM_OPS"), (simt.AtomOp, "ATOM_PAIR_OPS"), (simt.WarpOp, "WARP_OPS"), (simt.SpecialOp, "SPECIALS"),
    (simt.MemoryOp, "SPACES"), (simt.KernelOp, "PARAM_TYPES"),
)


def grammar_directives() -> list[str]:
    return sorted(set(re.findall(r'"(\.[a-z_0-9]+)"', GRAMMAR.read_text())))


def kernel_files(folders: list[Path]) -> list[Path]:
    """The PTX files in each folder and its subfolders (examples/<name>/), in order."""
    return [f for d in folders for f in sorted(d.glob("*.ptx")) + sorted(d.glob("*/*.ptx"))]


def ref_accepts(module: builtin.ModuleOp) -> bool:
    """Whether `ref` decodes every instruction of the entry (it only reads the IR)."""
    from qgc.runtime.ref import compile_kernel, find_ptx_module, pick_entry

    pmod = find_ptx_module(module)
    try:
        compile_kernel(pmod, pick_entry(pmod, None), 4)
        return True
    except QgcError:
        return False


def simt_accepts(ctx: Context, module: builtin.ModuleOp) -> bool:
    """Whether the `simt` stage pipeline compiles the module, as `qgc --emit simt`
    does; it rewrites the module, so it runs last."""
    try:
        driver.apply(ctx, module, stage("simt"), verify_each=False)
        return True
    except (QgcError, DiagnosticException):
        return False


def census(files: list[Path]) -> tuple[dict[str, set[str]], dict[str, dict[str, bool]]]:
    """opcode → kernels using it; engine → kernel → whether it accepts the kernel."""
    users: dict[str, set[str]] = defaultdict(set)
    accepted: dict[str, dict[str, bool]] = {e: {} for e in ENGINES}
    for path in files:
        name = f"{path.parent.name}/{path.name}"
        ctx, module = driver.load(str(path))  # parsed once: ref reads it, simt rewrites it
        for op in module.walk():
            if isinstance(op, ptx.InstOp):
                users[op.opcode.data].add(name)
        accepted["ref"][name] = ref_accepts(module)
        accepted["simt"][name] = simt_accepts(ctx, module)
        accepted["tensor"][name] = accepted["model"][name] = \
            accepted["simt"][name] and tensor_lowers(module)
    return users, accepted


def tensor_lowers(module: builtin.ModuleOp) -> bool:
    """Whether `convert-simt-to-tensor` has a circuit for every op of the
    compiled kernels (`LOWERED_OPS`); the weights (`model`) are that tensor
    program's, so the same kernels run there."""
    from qgc.passes.simt_to_tensor.blocks import LOWERED_OPS
    return all(isinstance(op, LOWERED_OPS) for kernel in simt.kernels_of(module)
               for block in kernel.body.blocks for op in block.ops)


def census_lines(files: list[Path]) -> list[str]:
    """The census section: counts per engine, then one row per opcode (`yes` when
    every file using the opcode is accepted)."""
    users, accepted = census(files)
    out = ["## Opcodes used by the examples and the shared kernel suite", "",
           f"{len(users)} distinct opcodes over {len(files)} PTX files: "
           f"{sum(accepted['ref'].values())} accepted whole by `ref`, "
           f"{sum(accepted['simt'].values())} compiled by the `simt` stage "
           "(`stage(\"simt\")` of `qgc/pipeline.py`), "
           f"{sum(accepted['tensor'].values())} of them lowered to `tensor` (every op of the "
           "compiled kernel has a circuit of `convert-simt-to-tensor`) and so run by `model` "
           "(the tensor program's weights: docs/machine.md gives each kernel's layers, and "
           "`make test-full` replays every example there). A level's column says `yes` when "
           "it accepts every file that uses the opcode: a `no` may come from another opcode "
           "of a file.",
           "",
           "| opcode | kernels | " + " | ".join(ENGINES) + " |",
           "|---|---:|" + "---|" * len(ENGINES)]
    for opcode in sorted(users):
        cells = ["yes" if all(accepted[e][k] for k in users[opcode]) else "no" for e in ENGINES]
        out.append(f"| `{opcode}` | {len(users[opcode])} | " + " | ".join(cells) + " |")
    return out


def menu_rows(table: str) -> list[tuple[str, list[str]]]:
    """(table, values) rows of one menu; the ALU menu by number of sources."""
    values = getattr(opcodes, table, None) or getattr(simt, table)
    if table == "ALU_OPCODES":
        arity = {k: v.arity for k, v in values.items()}
        return [(f"`{table}`, {n} source{'s' * (n > 1)}", [k for k, v in arity.items() if v == n])
                for n in sorted(set(arity.values()))]
    return [(f"`{table}`", list(values))]


def machine_lines() -> list[str]:
    """The `simt` section: the dialect's ops and each menu with its values."""
    ops = list(simt.SIMT.operations)
    out = ["## Machine ops of the `simt` level", "",
           "From the machine's tables (`qgc/machine/opcodes.py`, `dialects/simt/`). Ops: "
           + " ".join(f"`{o.name}`" for o in ops) + ".", "",
           "| ops | table | values |", "|---|---|---|"]
    for cls, table in MACHINE_MENUS:
        users = " ".join(f"`{o.name}`" for o in ops if issubclass(o, cls))
        for title, values in menu_rows(table):
            out.append(f"| {users} | {title} | " + " ".join(f"`{v}`" for v in values) + " |")
    return out


def render(files: list[Path]) -> str:
    from qgc.runtime.coverage import coverage_markdown

    out = ["# PTX coverage", "",
           "Generated from the code by `make docs` (`python -m qgc.coverage_doc`); "
           "do not edit by hand. A test checks that this file is current.", "",
           "## Frontend", "",
           f"The grammar (`qgc/frontend/ptx.lark`, {grammar_lines()} lines) reads these "
           "directives:", "",
           " ".join(f"`{d}`" for d in grammar_directives()), "",
           "## Instruction forms executed by the `ref` engine", "",
           coverage_markdown(),
           *census_lines(files), "",
           *machine_lines()]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`python -m qgc.coverage_doc FOLDER...`: the census over the PTX of the
    folders given (`make docs`: the examples and the shared kernel suite)."""
    folders = [Path(a) for a in (sys.argv[1:] if argv is None else argv)]
    if not folders:
        print("usage: python -m qgc.coverage_doc FOLDER... (folders of PTX files)",
              file=sys.stderr)
        return 2
    if missing := [f for f in folders if not f.is_dir()]:   # a census without it would lie
        print(f"error: no folder '{missing[0]}' (make docs reads the examples and the shared "
              "kernel suite: ../shared/kernels beside the clone, or SHARED=DIR)", file=sys.stderr)
        return 2
    sys.stdout.write(render(kernel_files(folders)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
