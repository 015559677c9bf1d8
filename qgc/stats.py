"""`--stats`: what a kernel uses, like `ptxas -v`, at the deepest level that exists."""

from __future__ import annotations

from collections import Counter

from xdsl.dialects import builtin

from qgc.dialects import ptx


def basic_blocks(fn: ptx.EntryOp | ptx.FuncOp) -> int:
    """Leaders: the first instruction, every label that starts code, every
    instruction after a branch or return."""
    count, at_leader = 0, True
    for op in fn.body.ops:
        if isinstance(op, ptx.LabelOp):
            at_leader = True
        elif isinstance(op, ptx.InstOp):
            if at_leader:
                count += 1
                at_leader = False
            if op.op.base in ("bra", "ret", "exit", "brx"):
                at_leader = True
    return count


def kernel_stats(fn: ptx.EntryOp | ptx.FuncOp) -> dict[str, object]:
    regs: Counter[str] = Counter()
    shared = 0
    insts = 0
    for op in fn.body.ops:
        if isinstance(op, ptx.RegOp):
            regs[op.type.data] += sum(1 for _ in op.names())
        elif isinstance(op, ptx.VarOp) and op.space.data == "shared":
            shared += op.size_bytes
        elif isinstance(op, ptx.InstOp):
            insts += 1
    params = sum(p.size_bytes for p in fn.params())
    return {"instructions": insts, "basic_blocks": basic_blocks(fn),
            "registers": dict(sorted(regs.items())), "param_bytes": params,
            "shared_bytes": shared}


def format_stats(module: builtin.ModuleOp) -> str:
    lines = []
    for op in module.walk():
        if isinstance(op, ptx.ModuleOp):
            shared_module = sum(v.size_bytes for v in op.body.ops
                                if isinstance(v, ptx.VarOp) and v.space.data == "shared")
            for fn in op.body.ops:
                if isinstance(fn, ptx.EntryOp):
                    s = kernel_stats(fn)
                    regs = ", ".join(f"{n} .{t}" for t, n in s["registers"].items())
                    lines.append(
                        f"qgc info: kernel '{fn.kernel_name}' (ptx level): "
                        f"{s['instructions']} instructions, {s['basic_blocks']} basic blocks, "
                        f"registers declared: {regs or 'none'}, "
                        f"{s['param_bytes']} bytes params, "
                        f"{s['shared_bytes'] + shared_module} bytes static shared")
    lines.append("qgc info: machine-level resources (blocks, registers, memory words, layers, "
                 "heads, neurons) need the simt and tensor stages, which do not exist yet")
    return "\n".join(lines)
