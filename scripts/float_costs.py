"""What each f32 operation costs the machine (for docs/machine.md): a
one-warp kernel that loads its operands, runs the op once and stores the
result, compiled through the tensor stage, against the same kernel with a
`mov` in the op's place. Per op: the integer machine ops of its program
(`simt-expand-float`), the machine blocks and EXEC steps it adds, and the
step program's layers, MLP neurons and residual coordinates it adds on the
2B shape. `python scripts/float_costs.py [OPCODE-REGEX] [--json]`."""

from __future__ import annotations

import json
import re
import sys

#: the ops measured: the ones compilers emit for everyday code
OPS = ("add.rn.f32", "mul.rn.f32", "fma.rn.f32", "div.rn.f32", "sqrt.rn.f32", "lt.f32",
       "max.f32", "abs.f32", "cvt.rn.f32.s32", "cvt.rzi.s32.f32", "cvt.rmi.f32.f32",
       "ex2.approx.f32", "lg2.approx.f32", "sin.approx.f32", "rsqrt.approx.f32",
       "div.approx.f32", "atom add.f32")


def kernel(op: str | None) -> str:
    """The kernel: three loads, the op (or a move), a store."""
    from qgc.machine.opcodes import ALU_OPCODES
    if op is None:
        body = 'simt.alu "mov" v6, v3'
    elif op.startswith("atom "):
        body = 'simt.atom "add.f32" v6, global[v0 + 3], v3 buffer 0'
    elif op in ALU_OPCODES:
        srcs = ", ".join(("v3", "v4", "v5")[:ALU_OPCODES[op].arity])
        body = f'simt.alu "{op}" v6, {srcs}'
    else:                       # a compare
        body = f'simt.setp "{op}" vp0, v3, v4\n    simt.alu "selp" v6, v3, v4, vp0'
    return f"""builtin.module {{
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {{
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.alu "add" v2, v0, v1
    simt.ld v3, global[v2 + 4] buffer 0
    simt.ld v4, global[v2 + 8] buffer 0
    simt.ld v5, global[v2 + 12] buffer 0
    {body}
    simt.st global[v2 + 16], v6 buffer 0
    simt.exit
  }}
}}
"""


def measure(op: str | None) -> dict[str, int]:
    from tensor_resources import coordinates_used

    from qgc import driver
    from qgc.context import make_context
    from qgc.dialects import simt, tensor
    from qgc.pipeline import from_pass, stage, up_to
    from qgc.runtime.launch import load_launch
    from qgc.runtime.simt_engine import run_simt

    passes = from_pass(up_to(stage("tensor"), "convert-tensor-to-weights"),
                       "simt-expand-float")
    module = driver.parse_ir(make_context(), kernel(op), "op.mlir")
    ops = sum(1 for k in simt.kernels_of(module) for _ in k.walk())
    driver.apply(make_context(), module, up_to(passes, "simt-cse"))
    expanded = sum(1 for k in simt.kernels_of(module) for _ in k.walk())
    driver.apply(make_context(), module,
                 up_to(from_pass(passes, "simt-cse"), "convert-simt-to-tensor"))
    (k,) = simt.kernels_of(module)
    launch = load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1],
                          "args": [{"type": "f32*", "data": [1.5] * 24}]})
    steps = run_simt(module.clone(), launch).stats["exec_steps"]     # the machine program
    blocks = len(list(k.body.blocks))
    driver.apply(make_context(), module, from_pass(passes, "convert-simt-to-tensor"))
    (program,) = tensor.programs_of(module)
    rows = [o for o in program.ops() if isinstance(o, tensor.ThresholdOp)]
    return {"integer_ops": expanded - ops, "blocks": blocks, "steps": steps,
            "layers": program.limit("layers"),
            "neurons": sum(o.neuron_count() for o in rows),
            "coordinates": coordinates_used(program)}


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--json"]
    only = args[0] if args else ""
    base = measure(None)
    rows = {}
    for op in OPS:
        if re.search(only, op):
            m = measure(op)
            rows[op] = {key: m[key] - (0 if key == "integer_ops" else base[key]) for key in m}
    if "--json" in sys.argv:
        print(json.dumps({"baseline": base, "ops": rows}, indent=1))
        return 0
    print(f"baseline (a mov): {base['blocks']} blocks, {base['steps']} EXEC steps, "
          f"{base['layers']} layers, {base['neurons']:,} neurons, "
          f"{base['coordinates']:,} coordinates")
    print("| op | integer ops | + blocks | + EXEC steps | + layers | + neurons | + coordinates |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for op, r in rows.items():
        print(f"| `{op}` | {r['integer_ops']} | {r['blocks']} | {r['steps']} | {r['layers']} | "
              f"{r['neurons']:,} | {r['coordinates']:,} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
