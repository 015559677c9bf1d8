"""`qgc run KERNEL.ptx --launch L.json [--engine ref|simt|tensor|model]`: run
one launch on an engine and print the buffers. Each engine's modules load on
its path only: the `ref` engine never imports torch (nor the tensor level)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from qgc import driver
from qgc.cli.common import add_base_flags, say
from qgc.diagnostics import QgcError
from qgc.pipeline import for_kernel, from_pass, stage, step_program, up_to
from qgc.runtime.launch import STEP_LIMITS, blame, check_steps, format_result, load_launch

ENGINES = ("ref", "simt", "tensor", "model", "compact")
#: engine → the stage whose IR it executes; engines missing here do not exist yet.
ENGINE_STAGES = {"ref": "ptx", "simt": "simt", "tensor": "tensor", "model": "tensor",
                 "compact": "weights"}


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("run", prog="qgc run", help="run one kernel launch on an engine",
                            description="Run one kernel launch.")
    p.add_argument("input", help="PTX file (.ptx or .mlir), or - for the standard input")
    p.add_argument("--launch", required=True, action="append", metavar="FILE",
                   help="launch JSON (docs/launch.md); repeated: a batch of launches of "
                        "the kernel (--engine compact), one result line each")
    p.add_argument("--engine", choices=ENGINES, default="ref")
    p.add_argument("--warp-size", type=int, help="lanes per warp, a power of two up to 32 "
                   "(ref engine; default 4, the machine's)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"),
                   help="model engine: the merged model's dtype (default float32; a built "
                        "checkpoint runs in its own)")
    p.add_argument("--max-steps", type=_positive, metavar="N",
                   help="stop a launch past N steps (warp instructions on ref, EXEC steps "
                        "otherwise; default: " + ", ".join(
                            f"{n} on {e}" for e, (_, n) in STEP_LIMITS.items()) + ")")
    p.add_argument("--expect", metavar="FILE",
                   help="compare the buffers with an expected-result file bit for bit "
                        "(docs/launch.md); exit status 1 at the first difference")
    p.add_argument("--stats", nargs="?", const="text", choices=("text", "json"),
                   help="what the launch did (steps, tokens, memory, seconds) on stderr; "
                        "--stats=json: one JSON object")
    add_base_flags(p)
    c = p.add_argument_group("compact engine")
    c.add_argument("--backend", choices=("numba", "torch", "triton"),
                   help="compact engine: the compiled CPU step (numba, the default), the "
                        "readable torch one, or Triton kernels (--device)")
    c.add_argument("--device", choices=("cpu", "cuda"),
                   help="compact engine, triton backend: where the kernels run (default: "
                        "cuda if there is one; on the CPU in Triton's interpreter)")
    c.add_argument("--threads", type=_positive, metavar="N",
                   help="compact engine, numba backend, a batch: split its launches between "
                        "N threads (default: one per core the process may use)")
    c.add_argument("--verify", action="store_true",
                   help="compact engine: then feed each trace to the stock merged model in "
                        "one prefill pass and check every token it names (--dtype)")
    g = p.add_argument_group("model engine")
    g.add_argument("--model", metavar="DIR", help="run on a checkpoint `qgc build` wrote "
                   "(the model and compact engines)")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--generate", action="store_true",
                      help="stock `generate`, one call per step (default: token by token)")
    mode.add_argument("--replay", action="store_true",
                      help="record the trace on the tensor engine, then feed it in one "
                           "prefill pass and check every token the model names")
    g.add_argument("--trace-png", metavar="FILE",
                   help="draw which layers, heads and neuron groups fired on each token")
    p.set_defaults(handler=command)


#: the engines that run a merged model's weights
MODEL_ENGINES = ("model", "compact")
#: flags that only some engines take (dest → the engines); any other flag is every engine's
ENGINE_FLAGS = {"warp_size": ("ref",),
                "dtype": MODEL_ENGINES, "base": MODEL_ENGINES, "base_config": MODEL_ENGINES,
                "model": MODEL_ENGINES,
                "generate": ("model",), "replay": ("model",), "trace_png": ("model",),
                "backend": ("compact",), "device": ("compact",), "verify": ("compact",)}


def command(args: argparse.Namespace) -> int:
    _check_engine_flags(args)
    _check_base(args)
    launches = [load_launch(Path(path)) for path in args.launch]
    step, default_steps = STEP_LIMITS[args.engine]
    args.max_steps = args.max_steps or default_steps
    warp_size = args.warp_size or 4
    if len(launches) > 1:
        return _batch(args, launches, step, warp_size)
    (launch,) = launches
    if args.expect:    # a bad expected file is said before the run
        from qgc.runtime.expected import compare, load_expected
        expected = load_expected(args.expect, launch, warp_size)
    start = time.perf_counter()
    with blame(launch):    # the engines check the launch against the kernel
        check_steps(launch, args.max_steps, step, warp_size)    # before compiling
        result = _run(args, launch, warp_size)
    seconds = time.perf_counter() - start
    print(format_result(result.buffers), flush=True)
    if args.stats:
        _report(args, result.stats, seconds)
    if args.expect:
        count = compare(expected, launch, result.buffers, args.expect)
        say(f"{count} buffer{'s' if count != 1 else ''} equal to {args.expect}")
    return 0


def _check_base(args: argparse.Namespace) -> None:
    """A base config or checkpoint that cannot be read is said at once, not
    after torch, transformers and the compile have loaded."""
    if args.engine in MODEL_ENGINES and not args.model:
        from qgc.base_config import read_config_dict
        read_config_dict(args.base or args.base_config)


def _batch(args: argparse.Namespace, launches, step: str, warp_size: int) -> int:
    """Repeated --launch: the launches as one batch on the compact engine, a
    result line each in order (a launch that fails: its error on stderr, and
    exit status 1)."""
    if args.engine != "compact" or args.expect:
        what = "--expect" if args.engine == "compact" else f"--engine {args.engine}"
        raise QgcError(f"error: a batch of launches (--launch repeated) runs on --engine "
                       f"compact, without --expect; {what} takes one", status=2)
    for launch in launches:
        check_steps(launch, args.max_steps, step, warp_size)
    start = time.perf_counter()
    results, stats = run_compact_batch(args, launches)
    seconds = time.perf_counter() - start
    failed = 0
    for path, launch, result in zip(args.launch, launches, results, strict=True):
        if isinstance(result, Exception):
            failed += 1
            with blame(launch):
                say(f"{path}: {result}")
            print("null", flush=True)
        else:
            print(format_result(result.buffers), flush=True)
    if args.stats:
        _report(args, stats, seconds)
    return 1 if failed else 0


def _check_engine_flags(args: argparse.Namespace) -> None:
    """One rule: a flag given to an engine that does not take it is refused."""
    if args.warp_size is not None and (not 1 <= args.warp_size <= 32
                                       or args.warp_size & (args.warp_size - 1)):
        raise QgcError(f"error: --warp-size must be a power of two in 1..32, got "
                       f"{args.warp_size}", status=2)
    if args.engine == "compact" and args.dtype and not args.verify:
        raise QgcError("error: --dtype on the compact engine is the dtype --verify's model "
                       "runs in; give --verify with it", status=2)
    for dest, engines in ENGINE_FLAGS.items():
        value = getattr(args, dest)
        given = value not in (None, False) and not (dest == "base"
                                                    and value == os.environ.get("QGC_BASE"))
        if given and args.engine not in engines:
            takers = " and ".join(engines)
            raise QgcError(f"error: --{dest.replace('_', '-')} is a flag of the {takers} engine; "
                           f"--engine {args.engine} does not take it", status=2)


def _report(args: argparse.Namespace, stats: dict, seconds: float) -> None:
    """`--stats`: the engine's own counts and the wall time, on stderr."""
    record = {"engine": args.engine, "seconds": round(seconds, 6), **stats}
    if args.stats == "json":
        print(json.dumps(record), file=sys.stderr)
        return
    counts = ", ".join(f"{k.replace('_', ' ')} {_show(v)}" for k, v in stats.items())
    say(f"info: launch on the {args.engine} engine in {seconds:.3f} s: {counts}")


def _show(value) -> str:
    if isinstance(value, dict):
        return "(" + ", ".join(f"{k} {_show(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list | tuple):
        return " ".join(map(str, value))
    return str(value)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def _run(args: argparse.Namespace, launch, warp_size: int):
    if args.engine == "model":    # compiles for its base config (or runs a built checkpoint)
        return run_model(args, launch)
    if args.engine == "compact":
        return run_compact(args, launch)
    ctx, module = driver.load(args.input)
    if args.engine == "simt":
        return _run_simt(ctx, module, launch, args.max_steps)
    if args.engine == "tensor":
        return _run_tensor(ctx, module, launch, args.max_steps)
    from qgc.runtime.ref import run_ref
    driver.apply(ctx, module, stage("ptx"))
    return run_ref(module, launch, warp_size=warp_size, max_steps=args.max_steps)


def _run_simt(ctx, module, launch, max_steps: int):
    from qgc.dialects.simt import kernels_of
    from qgc.runtime.simt_engine import run_simt
    if not kernels_of(module):  # PTX (or ptx IR) in: compile it to the machine first
        driver.apply(ctx, module, for_kernel(stage("simt"), launch.kernel))
    return run_simt(module, launch, max_steps)


def _run_tensor(ctx, module, launch, max_steps: int):
    from qgc.dialects import tensor
    from qgc.dialects.simt import kernels_of
    from qgc.machine.abi import pick_kernel
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.runtime.trace import run_trace, tensor_stepper

    if not tensor.programs_of(module):  # the ideal engine needs no layer schedule
        passes = up_to(stage("tensor"), "tensor-schedule-layers")
        if kernels_of(module):  # a machine listing in: lower it from the simt level on
            passes = from_pass(passes, "convert-simt-to-tensor")
        driver.apply_for_launch(ctx, module, passes, launch)
    kernel = pick_kernel(module, launch.kernel)
    program = step_program(module, kernel)
    vocab = vocabulary_of(program)
    return run_trace(kernel, vocab, launch, tensor_stepper(program, vocab), max_steps)


# ------------------------------------------------------------------ --engine compact
def run_compact(args: argparse.Namespace, launch):
    """The launch on the compiled layers' non-zero weights (`runtime/compact.py`),
    compiled for the base config as `--engine model` compiles them; with
    --verify, then checked by the stock merged model."""
    from qgc.runtime.trace import run_trace
    config, compiled, kernel, vocab, plan, stepper = _compact(args, launch, batch=1)
    start = time.perf_counter()
    with _one_torch_thread():
        result = run_trace(kernel, vocab, launch, stepper, args.max_steps)
    seconds = time.perf_counter() - start
    result.stats.update(_compact_stats(args, plan, stepper, result.stats["tokens"], seconds))
    if args.verify:
        result.stats.update(_verify(args, config, compiled, vocab, [result]))
    return result


def run_compact_batch(args: argparse.Namespace, launches):
    """The launches in lockstep, one batch (`runtime/trace.run_traces`):
    each one's result or error, and the batch's stats."""
    from qgc.runtime.trace import run_traces
    config, compiled, kernel, vocab, plan, stepper = _compact(args, launches[-1], len(launches))
    start = time.perf_counter()
    with _one_torch_thread():
        results = run_traces(kernel, vocab, launches, stepper, args.max_steps)
    seconds = time.perf_counter() - start
    done = [r for r in results if not isinstance(r, Exception)]
    tokens = sum(r.stats["tokens"] for r in done)
    stats = {"launches": len(launches), "failed": len(launches) - len(done), "tokens": tokens,
             **_compact_stats(args, plan, stepper, tokens, seconds)}
    if args.verify and done:
        stats.update(_verify(args, config, compiled, vocab, done))
    return results, stats


def _compact(args: argparse.Namespace, launch, batch: int):
    """(base config, layers, host kernel, vocabulary, plan, stepper) of the compact engine:
    one compile (sized to `launch`; a batch takes the memory of its last), or
    the compiled layers of a `qgc build` directory (--model)."""
    from qgc.runtime.compact import CompactPlan
    from qgc.runtime.model import load_text_config
    if args.model:
        from qgc.merged_model import built_layers
        compiled, kernel, vocab = built_layers(args.model, args.input, launch)
        config = load_text_config(args.model)
    else:
        from qgc.merged_model import compile_with_host
        config = load_text_config(args.base or args.base_config)
        compiled, kernel, _, vocab = compile_with_host(args.input, config, launch)
    plan = CompactPlan.of(compiled, config)
    return config, compiled, kernel, vocab, plan, _compact_stepper(args, plan, batch)


@contextmanager
def _one_torch_thread():
    """A token's ops are small: more threads only wait on each other (the
    --verify prefill after it is large and gets them all)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _compact_stepper(args: argparse.Namespace, plan, batch: int):
    if args.backend == "torch":
        if batch > 1:
            raise QgcError("error: the torch backend steps one launch at a time; a batch "
                           "runs on --backend numba or triton", status=2)
        from qgc.runtime.compact import CompactStepper
        return CompactStepper(plan)
    if args.backend == "triton":
        from qgc.runtime.compact_triton import TritonStepper
        return TritonStepper(plan, batch=batch, device=args.device or _triton_device())
    from qgc.runtime.compact_numba import NumbaStepper, ThreadedStepper
    threads = args.threads or len(os.sched_getaffinity(0))
    if batch > 1 and threads > 1:
        return ThreadedStepper(plan, batch, threads)
    return NumbaStepper(plan, batch=batch)


def _triton_device() -> str:
    """CUDA where there is one; else the CPU, where the stepper runs its kernels
    in Triton's interpreter."""
    import torch
    return "cuda" if torch.cuda.is_available() else "cpu"


def _compact_stats(args: argparse.Namespace, plan, stepper, tokens: int,
                   seconds: float) -> dict:
    nbytes = getattr(stepper, "nbytes", None)
    # without --verify the base layers did not run: nothing bounds their effect
    return {"backend": args.backend or "numba", "layers": len(plan.layers), "heads": plan.heads,
            "weights": plan.weights, **({"memory_bytes": nbytes} if nbytes else {}),
            "tokens_per_second": round(tokens / seconds, 1), "verified": bool(args.verify)}


def _verify(args: argparse.Namespace, config, compiled, vocab, results) -> dict:
    """--verify: each trace through the stock merged model (base layers and
    all) in one prefill pass, every token the compact engine named checked
    against the model's argmax (a trap names the first that differs)."""
    import torch

    from qgc.runtime.model_engine import replay_check
    start = time.perf_counter()
    if args.model:          # the build's own model, in its own dtype unless --dtype
        from qgc.runtime.checkpoint import load_checkpoint
        asked = getattr(torch, args.dtype) if args.dtype else None
        model, info, _ = load_checkpoint(args.model, asked)
        base_vocab, dtype = info["base_vocab"], model.dtype
    else:
        from qgc.runtime.model import load_base
        from qgc.runtime.model_engine import layers_model
        dtype = getattr(torch, args.dtype or "float32")
        base = load_base(args.base, config, dtype=dtype)
        model, base_vocab = layers_model(compiled, base, dtype), base.config.vocab_size
    built = time.perf_counter()
    checked = tokens = 0
    for result in results:
        counts = replay_check(model, vocab, base_vocab, result.tokens, result.predicted)
        checked, tokens = checked + counts["checked"], tokens + counts["tokens"]
    seconds = time.perf_counter() - built
    say(f"verify: the stock model ({str(dtype).removeprefix('torch.')}) names the same "
        f"{checked} tokens the compact engine named, in {tokens} ({tokens / seconds:.1f} "
        f"tokens/s; the model ready in {built - start:.1f} s)")
    return {"verified_tokens": checked, "verify_tokens_per_second": round(tokens / seconds, 1)}


# ------------------------------------------------------------------ --engine model
def run_model(args: argparse.Namespace, launch):
    """The launch through the merged model: decoded token by token (default),
    by stock `generate` one step per call, or recorded on the ideal engine and
    replayed in one prefill pass that checks every named token."""
    import torch  # torch and the model: this path only

    from qgc.merged_model import built_model, compile_machine, merged_model
    from qgc.runtime.checkpoint import describe_layers
    from qgc.runtime.model import load_text_config
    from qgc.runtime.trace import run_trace, tensor_stepper
    asked = getattr(torch, args.dtype) if args.dtype else None
    if args.model:
        model, kernel, program, vocab, base_vocab, counts = \
            built_model(args.model, args.input, launch, asked)
        compiled_layers, mute = sum(counts.values()), bool(counts["text_mute"])
    else:
        dtype = asked or torch.float32
        config = load_text_config(args.base or args.base_config)
        machine, kernel = compile_machine(args.input, config, launch)
        model, base_vocab = merged_model(machine, args.base, config, dtype)
        program, vocab = machine.compiled.program, machine.vocab
        compiled_layers = model.config.num_hidden_layers - config.num_hidden_layers
        mute = model.qgc_text_mute is not None
    recorder = _recorder(args, model, compiled_layers, mute)
    start = time.perf_counter()
    with recorder:
        if args.replay:
            from qgc.runtime.model_engine import replay_check
            result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab),
                               args.max_steps)
            checked = replay_check(model, vocab, base_vocab, result.tokens, result.predicted)
            say(f"replay: checked {checked['checked']} of {checked['tokens']} tokens (every "
                "token the model names) against its argmax")
        else:
            result = run_trace(kernel, vocab, launch, _stepper(args, model, vocab, base_vocab),
                               args.max_steps)
    seconds = time.perf_counter() - start
    st = result.stats
    mode = "replay" if args.replay else "generate" if args.generate else "decode"
    layers = describe_layers(compiled_layers - 1 - mute, mute)
    say(f"model engine ({mode}, {str(model.dtype).removeprefix('torch.')}): {st['tokens']} "
        f"tokens ({st['prompt_tokens']} prompt, {st['trace_tokens']} trace), "
        f"{st['exec_steps']} steps, {layers} in front of "
        f"{model.config.num_hidden_layers - compiled_layers}; "
        f"{st['tokens'] / seconds:.1f} tokens/s")
    if args.trace_png:
        _draw(args, recorder, result)
    return result


def _stepper(args: argparse.Namespace, model, vocab, base_vocab: int):
    from qgc.runtime.model_engine import GenerateMachine, model_stepper
    if args.generate:
        return GenerateMachine(model, vocab, base_vocab)
    return model_stepper(model, vocab, base_vocab)


class _NoRecorder:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _recorder(args: argparse.Namespace, model, compiled_layers: int, text_mute: bool):
    if not args.trace_png:
        return _NoRecorder()
    from qgc.runtime.trace_png import ActivityRecorder
    return ActivityRecorder(model, compiled_layers, text_mute=text_mute)


def _draw(args: argparse.Namespace, recorder, result) -> None:
    from qgc.runtime.trace_png import draw_trace
    summary = draw_trace(recorder.activity, result.tokens, args.trace_png,
                         title=f"{Path(args.input).name}: {len(result.tokens)} tokens")
    say(f"wrote {args.trace_png} ({summary['rows']} rows)")
