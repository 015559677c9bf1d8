"""Seconds per launch on each engine, and the ratio to `ref`, in one run.

    python bench/engines.py [KERNEL.ptx LAUNCH.json] [--model] [--repeat N]

Compile time (lowering to the engine's level) and run time are measured
apart: the run is what a launch costs once the kernel is compiled. `--model`
adds the model engine on a stand-in with the 2B layer shape and two base
layers (building it is reported as its compile time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOT = ROOT / "examples" / "dot"


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def engines(ptx: Path, launch_path: Path, model: bool):
    from qgc import driver
    from qgc.dialects import tensor
    from qgc.machine.abi import pick_kernel
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.pipeline import stage, up_to
    from qgc.runtime.launch import load_launch
    from qgc.runtime.ref import run_ref
    from qgc.runtime.simt_engine import run_simt
    from qgc.runtime.trace import run_trace, tensor_stepper

    launch = load_launch(launch_path)

    def lowered(spec):
        ctx, module = driver.load(str(ptx))
        driver.apply(ctx, module, spec)
        return module

    yield "ref", lambda: lowered(stage("ptx")), \
        lambda m: run_ref(m, launch, warp_size=4).buffers
    yield "simt", lambda: lowered(stage("simt")), lambda m: run_simt(m, launch).buffers

    def tensor_run(m):
        (program,) = tensor.programs_of(m)
        vocab = vocabulary_of(program)
        return run_trace(pick_kernel(m, None), vocab, launch,
                         tensor_stepper(program, vocab)).buffers
    yield "tensor", lambda: lowered(up_to(stage("tensor"), "tensor-schedule-layers")), \
        tensor_run
    if model:
        yield "model (float32)", lambda: build_model(ptx), \
            lambda built: run_model(built, launch)


def build_model(ptx: Path):
    import torch

    from qgc import driver
    from qgc.codegen import compiled_machine, read_text_config
    from qgc.pipeline import stage
    from qgc.runtime import model as M
    from qgc.runtime.model_engine import CompiledMachine
    from qgc.runtime.model_engine import build_model as merge
    data = json.loads(M.default_config_path().read_text())
    data.update(num_hidden_layers=2, layer_types=["linear_attention", "full_attention"],
                vocab_size=512, bos_token_id=None, eos_token_id=None)
    path = Path(tempfile.mkdtemp()) / "config.json"
    path.write_text(json.dumps(data))
    config = read_text_config(path)
    ctx, module = driver.load(str(ptx))
    driver.apply(ctx, module, stage("tensor", schedule=config))
    compiled, _, vocab, kernel = compiled_machine(module, config)
    base = M.load_base(None, M.load_text_config(path))
    return merge(CompiledMachine(compiled, vocab), base, torch.float32), vocab, kernel


def run_model(built, launch):
    from qgc.runtime.model_engine import model_stepper
    from qgc.runtime.trace import run_trace
    model, vocab, kernel = built
    return run_trace(kernel, vocab, launch, model_stepper(model, vocab, 512)).buffers


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ptx", nargs="?", default=str(DOT / "dot.ptx"))
    p.add_argument("launch", nargs="?", default=str(DOT / "launch.json"))
    p.add_argument("--model", action="store_true", help="also the model engine (slow)")
    p.add_argument("--repeat", type=int, default=3, help="runs per engine (median)")
    args = p.parse_args(argv)
    rows, base, expected = [], None, None
    for name, compile_fn, run_fn in engines(Path(args.ptx), Path(args.launch), args.model):
        t_compile, built = timed(compile_fn, 1)
        t_run, buffers = timed(lambda run=run_fn, b=built: run(b), args.repeat)
        expected = buffers if expected is None else expected
        if buffers != expected:
            print(f"{name}: buffers differ from ref: {buffers}", file=sys.stderr)
            return 1
        base = base or t_run
        rows.append((name, t_compile, t_run, t_run / base))
    print(f"{'engine':<16} {'compile s':>10} {'run s':>10} {'run / ref':>10}")
    for name, tc, tr, ratio in rows:
        print(f"{name:<16} {tc:>10.3f} {tr:>10.3f} {ratio:>10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
