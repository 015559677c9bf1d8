"""Tokens per second of every engine on the same launches, as ratios to `ref` and to
the merged model's stock decode.

    python bench/tokens.py [KERNEL.ptx LAUNCH.json ...] [--config small|2b ...]
                           [--dtype float32|bfloat16] [--repeat N] [--model-repeat N]
                           [--no-model] [--no-generate] [--no-compact] [--batch N]
                           [--threads N] [--json]

A launch's tokens are the length of the token stream (launch prompt and
trace) of the `tensor` engine's run. `ref` and `simt` name no tokens: their
tokens/s are token-equivalent (the same count over their seconds), so every
engine is compared per launch; launches/s is printed too. The model engine
runs the kernel's layers in front of a stand-in base with `--config`:

- `small`: the 2B text config at hidden 1024, intermediate 3584, two base
  layers (linear, full) and a 512-row vocabulary;
- `2b`: the 2B stand-in itself (24 base layers, 248,320 rows).

Model rows: `decode` (the host loop, token by token with the model's cache),
`generate` (stock `generate`, one call per step) and `replay` (the `tensor`
engine's recorded stream checked in one prefill pass: its tokens/s is the
stream length over the replay's seconds). Build time (lowering, or compiling
the layers and merging the model) is reported apart from run time (the
median of the repeats). Every engine's buffers must equal `ref`'s, else the
mismatch is printed and the exit status is 1. The peak RSS after building
each model is the memory the report names (the process's high-water mark).

Compact rows: the compiled layers' non-zero part (runtime/compact.py) in
its torch form and its numba step, on the same base config (`--config`,
with or without `--no-model`), one thread; numba on a batch of `--batch`
copies of the launch in lockstep (tokens/s: all of theirs), in one thread
and split between `--threads` (`ThreadedStepper`); `compact verified`: the
numba trace plus the model's check of it in one prefill (the replay row). `--json` prints one JSON object {engine:
tokens/s} over every launch instead of the tables.

Defaults: the dot product and vector_add examples, `--config small`, float32.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DEFAULT_LAUNCHES = [EXAMPLES / "dot" / "dot.ptx", EXAMPLES / "dot" / "launch.json",
                    EXAMPLES / "vector_add" / "vector_add.ptx",
                    EXAMPLES / "vector_add" / "launch.json"]


class Mismatch(Exception):
    pass


@dataclass
class Row:
    kernel: str
    engine: str
    build_s: float | None
    run_s: float
    tokens: int


def timed(fn, repeat: int):
    times, out = [], None
    for _ in range(max(repeat, 1)):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20   # KiB on Linux


def rss_gib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**30


def config_path(name: str) -> Path:
    """The base config of `--config`: the shared 2B text config, or a small
    variant of it written to a temporary config.json."""
    from qgc.codegen import default_config_path
    path = default_config_path()
    if name == "2b":
        return path
    data = json.loads(path.read_text())
    data.update(hidden_size=1024, intermediate_size=3584, num_hidden_layers=2,
                layer_types=["linear_attention", "full_attention"], vocab_size=512,
                bos_token_id=None, eos_token_id=None)
    out = Path(tempfile.mkdtemp(prefix="qgc-bench-")) / "config.json"
    out.write_text(json.dumps(data))
    return out


# ------------------------------------------------------------------ engines
def lowered(ptx: Path, passes, launch=None):
    from qgc import driver
    ctx, module = driver.load(str(ptx))
    if launch is None:
        driver.apply(ctx, module, passes)
    else:
        driver.apply_for_launch(ctx, module, passes, launch)
    return module


def tensor_parts(module, launch):
    from qgc.machine.abi import pick_kernel
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.pipeline import step_program
    kernel = pick_kernel(module, launch.kernel)
    program = step_program(module, kernel)
    return kernel, program, vocabulary_of(program)


def check(name: str, kernel: str, buffers, expected) -> None:
    if buffers != expected:
        raise Mismatch(f"{kernel}: {name}: buffers {buffers} differ from ref's {expected}")


def small_engines(ptx: Path, launch, repeat: int):
    """ref, simt and tensor rows of one launch, and the stream's length."""
    from qgc.pipeline import stage, up_to
    from qgc.runtime.ref import run_ref
    from qgc.runtime.simt_engine import run_simt
    from qgc.runtime.trace import run_trace, tensor_stepper
    name = ptx.stem
    rows = []
    b_ref, m_ref = timed(lambda: lowered(ptx, stage("ptx")), 1)
    t_ref, res = timed(lambda: run_ref(m_ref, launch, warp_size=4), repeat)
    expected = res.buffers
    b_simt, m_simt = timed(lambda: lowered(ptx, stage("simt")), 1)
    t_simt, res = timed(lambda: run_simt(m_simt, launch), repeat)
    check("simt", name, res.buffers, expected)
    unscheduled = up_to(stage("tensor"), "tensor-schedule-layers")
    b_tensor, m_tensor = timed(lambda: lowered(ptx, unscheduled, launch), 1)
    kernel, program, vocab = tensor_parts(m_tensor, launch)
    t_tensor, res = timed(lambda: run_trace(kernel, vocab, launch,
                                            tensor_stepper(program, vocab)), repeat)
    check("tensor", name, res.buffers, expected)
    tokens = int(res.stats["tokens"])
    rows += [Row(name, "ref", b_ref, t_ref, tokens), Row(name, "simt", b_simt, t_simt, tokens),
             Row(name, "tensor", b_tensor, t_tensor, tokens)]
    return rows, expected, tokens


def model_engines(ptx: Path, launch, config, dtype_name: str, repeat: int, generate: bool,
                  expected, tokens: int, memory: list):
    """decode, generate and replay rows of the merged model for one launch."""
    import torch

    from qgc.merged_model import compile_machine, merged_model
    from qgc.runtime.model_engine import GenerateMachine, model_stepper, replay_check
    from qgc.runtime.trace import run_trace, tensor_stepper
    name = ptx.stem
    dtype = getattr(torch, dtype_name)
    t0 = time.perf_counter()
    machine, kernel = compile_machine(str(ptx), config, launch)
    t_compile = time.perf_counter() - t0
    t_merge, (model, base_vocab) = timed(lambda: merged_model(machine, None, config, dtype), 1)
    memory.append((name, len(machine.compiled.layers) + 1, config.num_hidden_layers,
                   peak_rss_gib(), rss_gib(), t_compile, t_merge))
    program, vocab = machine.compiled.program, machine.vocab
    rows = []

    def decode():
        return run_trace(kernel, vocab, launch, model_stepper(model, vocab, base_vocab))
    t, res = timed(decode, repeat)
    check("model decode", name, res.buffers, expected)
    rows.append(Row(name, f"model decode ({dtype_name})", t_compile + t_merge, t, tokens))
    if res.stats["tokens"] != tokens:
        raise Mismatch(f"{name}: model decode: {res.stats['tokens']} tokens, the tensor "
                       f"engine's stream has {tokens}")
    if generate:
        t, res = timed(lambda: run_trace(kernel, vocab, launch,
                                         GenerateMachine(model, vocab, base_vocab)), repeat)
        check("model generate", name, res.buffers, expected)
        rows.append(Row(name, f"model generate ({dtype_name})", None, t, tokens))
    # the stream the replay checks: the tensor engine's run on the machine's own program
    recorded = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))
    check("tensor (scheduled program)", name, recorded.buffers, expected)
    t, _ = timed(lambda: replay_check(model, vocab, base_vocab, recorded.tokens,
                                      recorded.predicted), repeat)
    rows.append(Row(name, f"model replay ({dtype_name})", None, t, len(recorded.tokens)))
    return rows      # the model goes with this frame (the caller collects)


def compact_engines(ptx: Path, launch, config, repeat: int, expected, tokens: int,
                    batch: int, threads: int):
    """The compact engine's rows, torch and numba, for one launch (build: the
    compile and the plan), and numba's on a batch of `batch` copies of it, in
    one thread and (`threads` > 1) split between `threads`."""
    import torch

    from qgc.merged_model import compile_with_host
    from qgc.runtime.compact import CompactPlan, CompactStepper
    from qgc.runtime.compact_numba import NumbaStepper, ThreadedStepper
    from qgc.runtime.trace import run_trace, run_traces
    name = ptx.stem
    t0 = time.perf_counter()
    layers, kernel, _, vocab = compile_with_host(str(ptx), config, launch)
    plan = CompactPlan.of(layers, config)
    build = time.perf_counter() - t0
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = []
    for engine, stepper in (("compact (torch)", CompactStepper), ("compact (numba)",
                                                                  NumbaStepper)):
        run_trace(kernel, vocab, launch, stepper(plan))     # numba compiles on its first run
        t, res = timed(lambda s=stepper: run_trace(kernel, vocab, launch, s(plan)), repeat)
        check(engine, name, res.buffers, expected)
        if res.stats["tokens"] != tokens:
            raise Mismatch(f"{name}: {engine}: {res.stats['tokens']} tokens, the tensor "
                           f"engine's stream has {tokens}")
        rows.append(Row(name, engine, build, t, tokens))
    batch_steppers = {f"compact (numba, batch {batch})": lambda: NumbaStepper(plan, batch=batch)}
    if threads > 1:
        batch_steppers[f"compact (numba, batch {batch}, {threads} threads)"] = \
            lambda: ThreadedStepper(plan, batch, threads)
    for engine, make in batch_steppers.items() if batch > 1 else ():
        t, results = timed(lambda m=make: run_traces(kernel, vocab, [launch] * batch, m()),
                           repeat)
        for res in results:
            check(engine, name, res.buffers, expected)
        rows.append(Row(name, engine, build, t, tokens * batch))
    torch.set_num_threads(torch_threads)
    return rows


def verified_row(rows: list[Row], kernel: str, dtype_name: str) -> Row:
    """Verified mode: the compact trace (numba), then the model's check of it
    in one prefill (the replay row's pass over the same stream)."""
    mine = {r.engine: r for r in rows if r.kernel == kernel}
    compact, replay = mine["compact (numba)"], mine[f"model replay ({dtype_name})"]
    return Row(kernel, f"compact verified ({dtype_name})", None,
               compact.run_s + replay.run_s, compact.tokens)


def per_engine(rows: list[Row]) -> dict[str, float]:
    """Tokens per second of each engine over every launch (`--json`)."""
    out: dict[str, list[float]] = {}
    for r in rows:
        tokens, seconds = out.get(r.engine, [0, 0.0])
        out[r.engine] = [tokens + r.tokens, seconds + r.run_s]
    return {engine: round(tokens / seconds, 3) for engine, (tokens, seconds) in out.items()}


# ------------------------------------------------------------------ report
def print_table(title: str, rows: list[Row]) -> None:
    """Each row's rate and its ratios to `ref` and, where the model ran, to
    its stock decode (the issue's baseline) in the same run."""
    print(f"\n{title}")
    width = max(26, *(len(r.engine) for r in rows))
    head = (f"{'kernel':<12} {'engine':<{width}} {'build s':>8} {'tokens':>7} {'s/launch':>10} "
            f"{'launch/s':>10} {'tokens/s':>11} {'/ ref':>9} {'/ decode':>9}")
    print(head)
    print("-" * len(head))
    ref = {r.kernel: r.tokens / r.run_s for r in rows if r.engine == "ref"}
    decode = {r.kernel: r.tokens / r.run_s for r in rows if r.engine.startswith("model decode")}
    for r in rows:
        tps = r.tokens / r.run_s
        build = f"{r.build_s:8.3f}" if r.build_s is not None else f"{'':>8}"
        to_decode = f"{tps / decode[r.kernel]:>9.3g}" if r.kernel in decode else f"{'':>9}"
        print(f"{r.kernel:<12} {r.engine:<{width}} {build} {r.tokens:>7} {r.run_s:>10.4g} "
              f"{1 / r.run_s:>10.4g} {tps:>11.4g} {tps / ref[r.kernel]:>9.3g} {to_decode}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    p.add_argument("pairs", nargs="*", metavar="KERNEL.ptx LAUNCH.json",
                   help="launches (default: the dot and vector_add examples)")
    p.add_argument("--config", action="append", choices=["small", "2b"],
                   help="base config of the model engine (repeatable; default small)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    p.add_argument("--repeat", type=int, default=5, help="runs of ref/simt/tensor (median)")
    p.add_argument("--model-repeat", type=int, default=1, help="runs of each model engine")
    p.add_argument("--no-model", action="store_true", help="leave out the merged model's rows")
    p.add_argument("--no-generate", action="store_true", help="leave out model generate")
    p.add_argument("--no-compact", action="store_true", help="leave out the compact engine")
    p.add_argument("--batch", type=int, default=64,
                   help="launches in the compact engine's batch row (copies of each launch)")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="threads of the compact engine's threaded batch row (default: the "
                        "cores this process may use; 1 leaves the row out)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object {engine: tokens/s} (over every launch)")
    args = p.parse_args(argv)
    pairs = [Path(x) for x in args.pairs] or DEFAULT_LAUNCHES
    if len(pairs) % 2:
        p.error("launches come in pairs: KERNEL.ptx LAUNCH.json")
    from qgc.diagnostics import QgcError
    from qgc.runtime.launch import load_launch
    from qgc.runtime.memory import Trap
    try:
        launches = [(pairs[i], load_launch(pairs[i + 1])) for i in range(0, len(pairs), 2)]
    except QgcError as err:
        print(err, file=sys.stderr)
        return 2
    configs = args.config or ["small"]
    status = 0
    for config_name in configs:
        rows, memory = [], []
        try:
            from qgc.runtime.model import load_text_config
            config = load_text_config(config_path(config_name))
            for ptx, launch in launches:
                base_rows, expected, tokens = small_engines(ptx, launch, args.repeat)
                rows += base_rows
                if not args.no_compact:
                    rows += compact_engines(ptx, launch, config, args.repeat, expected, tokens,
                                            args.batch, args.threads)
                if not args.no_model:
                    rows += model_engines(ptx, launch, config, args.dtype, args.model_repeat,
                                          not args.no_generate, expected, tokens, memory)
                    if not args.no_compact:
                        rows.append(verified_row(rows, ptx.stem, args.dtype))
                    gc.collect()
        except (Mismatch, Trap, QgcError) as err:
            print(f"error: {err}", file=sys.stderr)
            status = 1
        title = (f"config {config_name} ({args.dtype}): hidden {config.hidden_size}, "
                 f"{config.num_hidden_layers} base layers, vocabulary {config.vocab_size}")
        if rows and args.json:
            print(json.dumps(per_engine(rows)))
        elif rows:
            print_table(title, rows)
        for name, compiled, base_layers, peak, now, t_compile, t_merge in \
                ([] if args.json else memory):
            print(f"{name}: {compiled} compiled layers + {base_layers} base; compile "
                  f"{t_compile:.1f} s, merge {t_merge:.1f} s; peak RSS after building "
                  f"{peak:.2f} GiB (RSS {now:.2f} GiB)")
        sys.stdout.flush()
        if status:
            return status
    return status


if __name__ == "__main__":
    sys.exit(main())
