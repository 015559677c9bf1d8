"""Print the tensor level's resources per kernel as a Markdown table (for
docs/machine.md): the step program (threshold ops, neurons, memory heads,
register ports, record slots), the GPU vocabulary, the launch on the ideal
`tensor` engine (tokens, EXEC steps, whether its buffers equal the `simt`
engine's), the time to lower and schedule, and the layer schedule on the 2B shape or the
limit it exceeds (layers and residual coordinates used). `python scripts/tensor_resources.py [NAME-REGEX]`."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simt_resources import launches  # noqa: E402


def row(name: str, ptx: Path, launch_path: Path) -> str | None:
    from qgc import driver
    from qgc.diagnostics import QgcError
    from qgc.dialects import tensor
    from qgc.machine.abi import pick_kernel
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.pipeline import stage, up_to
    from qgc.runtime.launch import LaunchError, load_launch
    from qgc.runtime.simt_engine import run_simt
    from qgc.runtime.trace import run_trace, tensor_stepper

    lower = up_to(stage("tensor"), "convert-tensor-to-weights")   # as -o: `driver.fit_layers`
    launch = load_launch(launch_path)
    start = time.perf_counter()
    ctx, module = driver.load(str(ptx))
    fit = None
    try:
        driver.apply_for_launch(ctx, module, lower, launch)
    except (QgcError, LaunchError) as err:
        if not tensor.programs_of(module):      # refused before the schedule
            if "not yet supported by the machine'" in str(err) or "f32" in str(err):
                return None
            return f"| {name} | refused: {first_line(err)} |"
        m = re.search(r"needs (\d+ residual coordinates)", str(err))
        fit = f"needs {m[1]}" if m else first_line(err)
    seconds = time.perf_counter() - start
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    ops = [op for op in program.ops() if isinstance(op, tensor.ThresholdOp)]
    neurons = sum(op.neuron_count() for op in ops)
    heads = len(program.memories())
    try:
        result = run_trace(pick_kernel(module, None), vocab, launch,
                           tensor_stepper(program, vocab))
        ctx2, simt_module = driver.load(str(ptx))
        driver.apply(ctx2, simt_module, stage("simt"))
        same = "yes" if result.buffers == run_simt(simt_module, launch).buffers else "**no**"
        run = f"{result.stats['tokens']} | {result.stats['exec_steps']} | {same}"
    except LaunchError as err:
        run = f"launch refused: {first_line(err)} | | "
    if fit is None:
        fit = f"{program.limit('layers')} layers, {coordinates_used(program):,} coordinates"
    return (f"| {name} | {len(ops)} | {neurons:,} | {heads} | {vocab.n_ports} | "
            f"{vocab.records} | {vocab.size:,} | {run} | {seconds:.0f} s | {fit} |")


def coordinates_used(program) -> int:
    from qgc.dialects import tensor
    return 1 + max(c for op in program.ops()
                   if isinstance(op, tensor.InputOp | tensor.KvReadOp | tensor.ThresholdOp)
                   for c in tensor.coords_of(op.coords.get_values()))


def first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0].split("error: ")[-1]


def main() -> int:
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    print("| kernel | thresholds | neurons | heads | register ports | record slots "
          "| vocabulary | tokens | EXEC steps | = simt | lowering + schedule | 2B schedule |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    for name, ptx, launch in launches():
        if not re.search(only, name):
            continue
        line = row(name, ptx, launch)
        if line:
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
