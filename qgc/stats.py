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


def ptx_records(module: builtin.ModuleOp) -> list[dict[str, object]]:
    """Each entry kernel at the ptx level (static shared includes the module's)."""
    out = []
    for op in module.walk():
        if isinstance(op, ptx.ModuleOp):
            shared_module = sum(v.size_bytes for v in op.body.ops
                                if isinstance(v, ptx.VarOp) and v.space.data == "shared")
            for fn in op.body.ops:
                if isinstance(fn, ptx.EntryOp):
                    s = kernel_stats(fn)
                    s["shared_bytes"] += shared_module
                    out.append({"kernel": fn.kernel_name, **s})
    return out


def ptx_line(r: dict) -> str:
    regs = ", ".join(f"{n} .{t}" for t, n in r["registers"].items())
    return (f"qgc info: kernel '{r['kernel']}' (ptx level): {r['instructions']} instructions, "
            f"{r['basic_blocks']} basic blocks, registers declared: {regs or 'none'}, "
            f"{r['param_bytes']} bytes params, {r['shared_bytes']} bytes static shared")


def ptx_lines(module: builtin.ModuleOp) -> list[str]:
    return [ptx_line(r) for r in ptx_records(module)]


def simt_kernel_stats(kernel) -> dict[str, object]:
    """Blocks, ops per block, registers used (distinct physical or virtual),
    virtual registers spilled and spill words per thread (allocation's), the
    words of each thread's `.local` frame."""
    from qgc.dialects import simt
    blocks = list(kernel.body.blocks)
    ops = [len(b.ops) - 1 for b in blocks]
    regs = simt.all_registers(blocks)
    return {"blocks": len(blocks), "ops": sum(ops), "max_ops": max(ops, default=0),
            "mean_ops": sum(ops) / len(ops) if ops else 0.0,
            "registers": sum(1 for r in regs if not r.is_pred),
            "predicates": sum(1 for r in regs if r.is_pred),
            "spilled": kernel.limit("spilled") or 0, "spill_words": kernel.spill_size,
            "local_words": kernel.local_size}


#: the machine limits a simt kernel's stats are read against
SIMT_LIMITS = ("max_blocks", "max_ops", "regs", "preds")


def simt_records(module: builtin.ModuleOp) -> list[dict[str, object]]:
    from qgc.dialects import simt
    return [{"kernel": k.kernel_name, **simt_kernel_stats(k),
             "allocated": k.regs is not None, "param_area_words": k.param_area_words,
             "mem_words": k.mem_words.value.data,
             "limits": {name: k.limit(name) for name in SIMT_LIMITS}}
            for k in simt.kernels_of(module)]


def simt_line(r: dict) -> str:
    def of(prop: str) -> str:
        limit = r["limits"][prop]
        return f" of {limit}" if limit is not None else ""
    spills = (f", registers spilled {r['spilled']} (spill words {r['spill_words']} per "
              "thread)") if r["allocated"] else ""
    if r["local_words"]:
        spills += f", local frame {r['local_words']} words per thread"
    return (f"qgc info: kernel '{r['kernel']}' (simt level): {r['blocks']} blocks"
            f"{of('max_blocks')}, {r['ops']} ops, ops per block max {r['max_ops']}"
            f"{of('max_ops')} mean {r['mean_ops']:.2f}, registers {r['registers']}"
            f"{of('regs')} per lane{spills}, predicates {r['predicates']}{of('preds')}, "
            f"parameter area {r['param_area_words']} words of {r['mem_words']}")


def launch_record(module: builtin.ModuleOp, launch) -> dict[str, object] | None:
    """The memory map and EXEC steps of `launch` on the simt engine."""
    from qgc.dialects import simt
    from qgc.machine.abi import pick_kernel
    from qgc.runtime.simt_engine import run_simt
    if not simt.kernels_of(module):
        return None
    st = run_simt(module, launch).stats
    kernel = pick_kernel(module, launch.kernel)
    return {"kernel": kernel.kernel_name, "mem_words": kernel.mem_words.value.data,
            **{k: st[k] for k in ("memory_words", "memory", "exec_steps", "warps", "ctas",
                                  "per_warp_steps", "ops")}}


def launch_line(r: dict) -> str:
    from qgc.dialects import simt
    regions = ", ".join(f"{name} {n}" for name, n in r["memory"].items())
    per_warp = " ".join(str(n) for n in r["per_warp_steps"])
    return (f"qgc info: launch of '{r['kernel']}': memory {r['memory_words']} of "
            f"{r['mem_words']} words ({regions}); {r['exec_steps']} EXEC steps "
            f"over {simt.plural(r['warps'], 'warp')} in {simt.plural(r['ctas'], 'CTA')} "
            f"(per warp: {per_warp}), {r['ops']} machine ops")


def simt_lines(module: builtin.ModuleOp, launch=None) -> list[str]:
    lines = [simt_line(r) for r in simt_records(module)]
    if launch is not None and (r := launch_record(module, launch)) is not None:
        lines.append(launch_line(r))
    return lines


def tensor_records(module: builtin.ModuleOp) -> list[dict[str, object]]:
    from qgc.dialects import tensor
    out = []
    for p in tensor.programs_of(module):
        rows = [op for op in p.ops() if isinstance(op, tensor.ThresholdOp)]
        memories = p.memories()
        record: dict[str, object] = {
            "program": p.program_name, "threshold_ops": len(rows),
            "bits": sum(tensor.width_of(op.result) for op in rows),
            "neurons": sum(op.neuron_count() for op in rows), "memory_heads": len(memories)}
        layers = p.limit("layers")
        if layers is not None:
            per_layer, heads = [0] * layers, [0] * layers
            for op in rows:
                per_layer[op.placed_layer] += op.neuron_count()
            for m in memories.values():
                heads[m.placed_layer] += 1
            from qgc.runtime.checkpoint import describe_layers
            record.update(layers=layers, compiled_layers=describe_layers(layers, None),
                          hidden=p.limit("hidden"),
                          neurons_per_layer=per_layer, heads_per_layer=heads,
                          gate_margins=_margins(p, layers))
        out.append(record)
    return out


def tensor_line(r: dict) -> str:
    line = (f"qgc info: step program '{r['program']}' (tensor level): {r['threshold_ops']} "
            f"threshold ops ({r['bits']} bits, {r['neurons']} neurons), {r['memory_heads']} "
            "memory heads")
    if "layers" in r:
        line += (f"; {r['compiled_layers']}, the {r['layers']} step layers of hidden "
                 f"{r['hidden']}: MLP neurons per layer "
                 f"{' '.join(map(str, r['neurons_per_layer']))}; heads per layer "
                 f"{' '.join(map(str, r['heads_per_layer']))}; smallest gate margin per layer "
                 f"{' '.join(r['gate_margins'])} (|G| in units, exact from 1/2 "
                 "in float32 and bfloat16; - for no MLP)")
    return line


def tensor_lines(module: builtin.ModuleOp) -> list[str]:
    return [tensor_line(r) for r in tensor_records(module)]


def _margins(program, layers: int) -> list[str]:
    from qgc.passes.tensor_to_weights.margins import gate_margin, margins_by_layer
    found = [gate_margin(m) for m in margins_by_layer(program, layers)]
    return ["-" if m is None else str(m) for m in found]


def collect_stats(module: builtin.ModuleOp, launch=None,
                  before: list[dict] | None = None,
                  tensor_note: str | None = None) -> dict[str, object]:
    """Resources at every level the module has been through: `before` holds the
    ptx-level records taken before the pipeline ran; `launch` adds the memory
    map and EXEC steps of one launch on the simt engine; `notes` say what is
    missing (a level not reached, or `tensor_note`: why the tensor level the
    compile tried is missing or unscheduled)."""
    simt_level = simt_records(module)
    ptx_level = ptx_records(module) if before is None or not simt_level else before
    ptx_level = ptx_level or (before or [])
    notes = []
    if not simt_level:
        notes.append("machine-level resources (blocks, registers, memory words) need the "
                     "simt stage (--emit=simt or a full compile)")
    tensor_level = tensor_records(module)
    if not tensor_level and tensor_note is None:
        notes.append("layers, heads and MLP neurons need the tensor stage (--emit=tensor or "
                     "a full compile)")
    return {"ptx": ptx_level, "simt": simt_level,
            "launch": launch_record(module, launch) if launch is not None else None,
            "tensor": tensor_level, "notes": notes + ([tensor_note] if tensor_note else [])}


def format_stats(stats: dict[str, object]) -> str:
    """`collect_stats`'s record as `qgc info:` lines, like ptxas -v."""
    lines = [ptx_line(r) for r in stats["ptx"]] + [simt_line(r) for r in stats["simt"]]
    if stats["launch"] is not None:
        lines.append(launch_line(stats["launch"]))
    lines += [tensor_line(r) for r in stats["tensor"]]
    lines += [f"qgc info: {note}" for note in stats["notes"]]
    return "\n".join(lines)
