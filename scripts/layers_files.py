"""Print, per kernel, what `qgc K.ptx -o layers.safetensors` makes (for
docs/machine.md): the compile time (PTX to file, memory sized to the kernel's
launch as `qgc run` does), the layers (+ the readout), heads and MLP neurons
used, the smallest gate margin (the same bound holds in float32 and bfloat16:
the gadgets keep every gate exactly 0 or |G| ≥ margin, every weight
bf16-exact) and the file's size, or why it does not compile.
`python scripts/layers_files.py [NAME-FILTER]`."""

from __future__ import annotations

import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from simt_resources import launches  # noqa: E402


def row(name: str, ptx: Path, launch_path: Path, out: Path) -> str | None:
    from qgc import driver
    from qgc.codegen import write_compiled
    from qgc.diagnostics import QgcError
    from qgc.dialects import tensor
    from qgc.passes.tensor_to_weights import gate_margin
    from qgc.passes.tensor_to_weights.margins import margins_by_layer
    from qgc.pipeline import from_pass, stage
    from qgc.runtime.launch import LaunchError, load_launch

    start = time.perf_counter()
    ctx, module = driver.load(str(ptx))
    try:
        driver.apply_for_launch(ctx, module, stage("tensor"), load_launch(launch_path))
        (program,) = tensor.programs_of(module)
        weights = module.clone()                # codegen replaces the program
        driver.apply(ctx, weights, from_pass(stage("weights"), "convert-tensor-to-weights"))
        write_compiled(weights, out)
    except (QgcError, LaunchError) as err:
        if "not yet supported by the machine" in str(err):
            return None        # floating point: not at this level yet
        return f"| {name} | {first_line(err)} | | | | | |"
    seconds = time.perf_counter() - start
    layers = program.limit("layers")
    found = [gate_margin(m) for m in margins_by_layer(program, layers)]
    smallest = min((m for m in found if m is not None), default=None)
    heads = len(program.memories())
    neurons = sum(op.neuron_count() for op in program.ops() if isinstance(op, tensor.ThresholdOp))
    return (f"| {name} | {seconds:.1f} s | {layers} + 1 | {heads} | {neurons:,} | "
            f"{Fraction(smallest) if smallest is not None else '-'} | "
            f"{out.stat().st_size / 1e6:.1f} MB |")


def first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0].split("error: ")[-1]


def main() -> int:
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    print("| kernel | compile | layers | heads | neurons | smallest margin | file |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, ptx, launch in launches():
            line = row(name, ptx, launch, Path(tmp) / "layers.safetensors") \
                if only in name else None
            if line:
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
