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


def ptx_lines(module: builtin.ModuleOp) -> list[str]:
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
    return lines


def simt_kernel_stats(kernel) -> dict[str, object]:
    """Blocks, ops per block, registers used (distinct physical or virtual),
    virtual registers spilled and spill words per thread (allocation's)."""
    from qgc.dialects import simt
    blocks = list(kernel.body.blocks)
    ops = [len(b.ops) - 1 for b in blocks]
    regs = simt.all_registers(blocks)
    return {"blocks": len(blocks), "ops": sum(ops), "max_ops": max(ops, default=0),
            "mean_ops": sum(ops) / len(ops) if ops else 0.0,
            "registers": sum(1 for r in regs if not r.is_pred),
            "predicates": sum(1 for r in regs if r.is_pred),
            "spilled": kernel.limit("spilled") or 0, "spill_words": kernel.spill_size}


def simt_lines(module: builtin.ModuleOp, launch=None) -> list[str]:
    from qgc.dialects import simt
    lines = []
    kernels = simt.kernels_of(module)
    for k in kernels:
        s = simt_kernel_stats(k)

        def of(prop: str, k=k) -> str:
            limit = k.limit(prop)
            return f" of {limit}" if limit is not None else ""
        spills = (f", registers spilled {s['spilled']} (spill words {s['spill_words']} per "
                  "thread)") if k.regs is not None else ""
        lines.append(
            f"qgc info: kernel '{k.kernel_name}' (simt level): {s['blocks']} blocks"
            f"{of('max_blocks')}, {s['ops']} ops, ops per block max {s['max_ops']}"
            f"{of('max_ops')} mean {s['mean_ops']:.2f}, registers {s['registers']}"
            f"{of('regs')} per lane{spills}, predicates {s['predicates']}{of('preds')}, "
            f"parameter area {k.param_area_words} words of {k.mem_words.value.data}")
    if launch is not None and kernels:
        from qgc.runtime.simt_engine import run_simt
        result = run_simt(module, launch)
        st = result.stats
        regions = ", ".join(f"{name} {n}" for name, n in st["memory"].items())
        kernel = [k for k in kernels if launch.kernel in (None, k.kernel_name)][0]
        per_warp = " ".join(str(n) for n in st["per_warp_steps"])
        lines.append(
            f"qgc info: launch of '{kernel.kernel_name}': memory {st['memory_words']} of "
            f"{kernel.mem_words.value.data} words ({regions}); {st['exec_steps']} EXEC steps "
            f"over {simt.plural(st['warps'], 'warp')} in {simt.plural(st['ctas'], 'CTA')} "
            f"(per warp: {per_warp}), "
            f"{st['ops']} machine ops")
    return lines


def tensor_lines(module: builtin.ModuleOp) -> list[str]:
    from qgc.dialects import tensor
    lines = []
    for p in tensor.programs_of(module):
        ops = p.ops()
        rows = [op for op in ops if isinstance(op, tensor.ThresholdOp)]
        bits = sum(tensor.width_of(op.result) for op in rows)
        neurons = sum(op.neuron_count() for op in rows)
        memories = p.memories()
        line = (f"qgc info: step program '{p.program_name}' (tensor level): {len(rows)} "
                f"threshold ops ({bits} bits, {neurons} neurons), {len(memories)} memory heads")
        layers = p.limit("layers")
        if layers is not None:
            per_layer = [0] * layers
            heads = [0] * layers
            for op in rows:
                per_layer[op.placed_layer] += op.neuron_count()
            for m in memories.values():
                heads[m.placed_layer] += 1
            line += (f"; {layers} layers of hidden {p.limit('hidden')}: MLP neurons per layer "
                     f"{' '.join(map(str, per_layer))}; heads per layer "
                     f"{' '.join(map(str, heads))}; smallest gate margin per layer "
                     f"{' '.join(_margins(p, layers))} (|G| in units, exact from 1/2 "
                     "in float32 and bfloat16; - for no MLP)")
        lines.append(line)
    return lines


def _margins(program, layers: int) -> list[str]:
    from qgc.passes.tensor_to_weights import gate_margin, margins
    out = []
    for i in range(layers):
        m = gate_margin(margins(program, i))
        out.append("-" if m is None else str(m))
    return out


def format_stats(module: builtin.ModuleOp, launch=None, before: str | None = None,
                 ptx_only: bool = False, tensor_note: str | None = None) -> str:
    """Resources at every level the module has been through: `before` holds the
    ptx-level lines taken before the pipeline ran; `launch` adds the memory map
    and EXEC steps of one launch on the simt engine; `tensor_note` says why the
    tensor level is missing or unscheduled, when the compile tried it."""
    lines = ptx_lines(module) if before is None else (before.splitlines() if before else [])
    if ptx_only:
        return "\n".join(lines)
    sl = simt_lines(module, launch)
    if before is not None and not sl:  # pipeline stayed at the ptx level
        lines = ptx_lines(module) or lines
    lines += sl
    if not sl:
        lines.append("qgc info: machine-level resources (blocks, registers, memory words) "
                     "need the simt stage (--emit=simt or a full compile)")
    tl = tensor_lines(module)
    if not tl and tensor_note is None:
        tl = ["qgc info: layers, heads and MLP neurons need the tensor stage "
              "(--emit=tensor or a full compile)"]
    lines += tl + ([tensor_note] if tensor_note else [])
    return "\n".join(lines)
