"""Tokens per second of the `tensor` engine: the compiled plan (`run_tensor`,
and `tensor_runner` without the per-token program check) against the
reference interpreter (op by op), on one kernel's step program.

    python bench/tensor_engine.py [KERNEL.ptx LAUNCH.json] [--repeat N]

The token stream is the launch's own (recorded once through the engine); both
engines then run it from empty memories and must agree token by token. Also
reported: the lowering to the `tensor` level and the plan's compile time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOT = ROOT / "examples" / "dot"


def step_program(ptx: Path, launch_path: Path):
    """(program, token inputs of the launch, seconds the lowering took)."""
    from qgc import driver
    from qgc.machine.abi import pick_kernel
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.pipeline import from_pass, stage, step_program, up_to
    from qgc.runtime.launch import load_launch
    from qgc.runtime.trace import run_trace, tensor_stepper

    launch = load_launch(launch_path)
    ctx, module = driver.load(str(ptx))
    passes = up_to(stage("tensor"), "tensor-schedule-layers")
    driver.apply(ctx, module, up_to(passes, "convert-simt-to-tensor"))
    t = time.perf_counter()
    driver.apply(ctx, module, from_pass(passes, "convert-simt-to-tensor"))
    lowering = time.perf_counter() - t
    kernel = pick_kernel(module, launch.kernel)
    program = step_program(module, kernel)
    vocab = vocabulary_of(program)
    record: list = []
    run_trace(kernel, vocab, launch, tensor_stepper(program, vocab, record))
    return program, [vocab.inputs(t) for t, _ in record], lowering


def main(argv: list[str] | None = None) -> int:
    from qgc.dialects import tensor
    from qgc.runtime import tensor_engine as E

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ptx", nargs="?", default=str(DOT / "dot.ptx"))
    p.add_argument("launch", nargs="?", default=str(DOT / "launch.json"))
    p.add_argument("--repeat", type=int, default=3, help="runs of the stream (median)")
    args = p.parse_args(argv)
    program, tokens, lowering = step_program(Path(args.ptx), Path(args.launch))
    rows = sum(len(op.row_list()) for op in program.ops() if isinstance(op, tensor.ThresholdOp))
    print(f"{program.program_name}: {len(program.ops())} ops, {rows} threshold rows, "
          f"{len(tokens)} tokens; lowering {lowering:.2f} s")
    t = time.perf_counter()
    E.CompiledProgram(program)
    print(f"plan compile {time.perf_counter() - t:.3f} s")

    def stream(run):
        state, outs = None, []
        for inputs in tokens:
            out, state = run(program, inputs, state)
            outs.append(out)
        return outs, state

    runner = E.tensor_runner(program)
    engines = (("compiled", E.run_tensor),                       # checks the plan every token
               ("runner", lambda _program, inputs, state: runner(inputs, state)),
               ("reference", E._interpret))
    results, seconds = {}, {}
    for name, run in engines:
        times = []
        for _ in range(max(1, args.repeat // 3) if name == "reference" else args.repeat):
            t = time.perf_counter()
            results[name] = stream(run)
            times.append(time.perf_counter() - t)
        seconds[name] = statistics.median(times)
    for name in results:
        if results[name] != results["reference"]:
            print(f"{name} and the reference disagree", file=sys.stderr)
            return 1
    print(f"{'engine':<12} {'tokens/s':>10} {'ms/token':>10} {'speedup':>8}")
    for name, sec in seconds.items():
        print(f"{name:<12} {len(tokens) / sec:>10.1f} {1000 * sec / len(tokens):>10.3f} "
              f"{seconds['reference'] / sec:>7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
