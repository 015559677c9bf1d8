"""`qgc run KERNEL.ptx --launch L.json [--engine ref|simt|tensor|model]`: run
one launch on an engine and print the buffers. Each engine's modules load on
its path only: the `ref` engine never imports torch (nor the tensor level)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from qgc import driver
from qgc.cli.common import add_base_flags, say
from qgc.diagnostics import QgcError
from qgc.pipeline import from_pass, stage, step_program, up_to
from qgc.runtime.launch import STEP_LIMITS, blame, check_steps, format_result, load_launch

ENGINES = ("ref", "simt", "tensor", "model")
#: engine → the stage whose IR it executes; engines missing here do not exist yet.
ENGINE_STAGES = {"ref": "ptx", "simt": "simt", "tensor": "tensor", "model": "tensor"}


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("run", prog="qgc run", help="run one kernel launch on an engine",
                            description="Run one kernel launch.")
    p.add_argument("input", help="PTX file")
    p.add_argument("--launch", required=True, help="launch JSON (docs/launch.md)")
    p.add_argument("--engine", choices=ENGINES, default="ref")
    p.add_argument("--warp-size", type=int, default=4, help="lanes per warp (ref engine)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--max-steps", type=_positive, metavar="N",
                   help="stop a launch past N steps (warp instructions on ref, EXEC steps "
                        "otherwise; default: " + ", ".join(
                            f"{n} on {e}" for e, (_, n) in STEP_LIMITS.items()) + ")")
    p.add_argument("--expect", metavar="FILE",
                   help="compare the buffers with an expected-result file bit for bit "
                        "(docs/launch.md); exit status 1 at the first difference")
    add_base_flags(p)
    g = p.add_argument_group("model engine")
    g.add_argument("--model", metavar="DIR", help="run on a checkpoint `qgc build` wrote")
    mode = g.add_mutually_exclusive_group()
    mode.add_argument("--generate", action="store_true",
                      help="stock `generate`, one call per step (default: token by token)")
    mode.add_argument("--replay", action="store_true",
                      help="record the trace on the tensor engine, then feed it in one "
                           "prefill pass and check every token the model names")
    g.add_argument("--trace-png", metavar="FILE",
                   help="draw which layers, heads and neuron groups fired on each token")
    p.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    if args.engine not in ENGINE_STAGES:
        raise QgcError(f"error: engine `{args.engine}` does not exist yet (available: "
                       f"{', '.join(ENGINE_STAGES)})", status=2)
    if not 1 <= args.warp_size <= 32:
        raise QgcError(f"error: --warp-size must be 1..32, got {args.warp_size}", status=2)
    model_flags = [f for f in ("model", "generate", "replay", "trace_png") if getattr(args, f)]
    if model_flags and args.engine != "model":
        raise QgcError(f"error: --{model_flags[0].replace('_', '-')} is a flag of the model "
                       "engine (--engine model)", status=2)
    if args.engine == "simt" and args.warp_size != 4:
        raise QgcError("error: the simt engine runs warps of 4 lanes (--warp-size 4)", status=2)
    launch = load_launch(Path(args.launch))
    step, default_steps = STEP_LIMITS[args.engine]
    args.max_steps = args.max_steps or default_steps
    warp_size = args.warp_size if args.engine == "ref" else 4
    if args.expect:    # a bad expected file is said before the run
        from qgc.runtime.expected import compare, load_expected
        expected = load_expected(args.expect, launch, warp_size)
    with blame(launch):    # the engines check the launch against the kernel
        check_steps(launch, args.max_steps, step, warp_size)    # before compiling
        buffers = _run(args, launch)
    print(format_result(buffers), flush=True)
    if args.expect:
        count = compare(expected, launch, buffers, args.expect)
        say(f"{count} buffer{'s' if count != 1 else ''} equal to {args.expect}")
    return 0


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return int(text)


def _run(args: argparse.Namespace, launch) -> list[list | None]:
    if args.engine == "model":    # compiles for its base config (or runs a built checkpoint)
        return run_model(args, launch).buffers
    ctx, module = driver.load(args.input)
    if args.engine == "simt":
        return _run_simt(ctx, module, launch, args.max_steps).buffers
    if args.engine == "tensor":
        return _run_tensor(ctx, module, launch, args.max_steps).buffers
    from qgc.runtime.ref import run_ref
    driver.apply(ctx, module, stage("ptx"))
    return run_ref(module, launch, warp_size=args.warp_size, max_steps=args.max_steps).buffers


def _run_simt(ctx, module, launch, max_steps: int):
    from qgc.dialects.simt import kernels_of
    from qgc.runtime.simt_engine import run_simt
    if not kernels_of(module):  # PTX (or ptx IR) in: compile it to the machine first
        driver.apply(ctx, module, stage("simt"))
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


# ------------------------------------------------------------------ --engine model
def run_model(args: argparse.Namespace, launch):
    """The launch through the merged model: decoded token by token (default),
    by stock `generate` one step per call, or recorded on the ideal engine and
    replayed in one prefill pass that checks every named token."""
    import torch  # torch and the model: this path only

    from qgc.merged_model import built_model, compile_machine, merged_model
    from qgc.runtime.model import load_text_config
    from qgc.runtime.trace import run_trace, tensor_stepper
    dtype = getattr(torch, args.dtype)
    if args.model:
        model, kernel, program, vocab, base_vocab, compiled_layers = \
            built_model(args.model, args.input, launch, dtype)
    else:
        config = load_text_config(args.base or args.base_config)
        machine, kernel = compile_machine(args.input, config, launch)
        model, base_vocab = merged_model(machine, args.base, config, dtype)
        program, vocab = machine.compiled.program, machine.vocab
        compiled_layers = model.config.num_hidden_layers - config.num_hidden_layers
    recorder = _recorder(args, model, compiled_layers)
    start = time.perf_counter()
    with recorder:
        if args.replay:
            from qgc.runtime.model_engine import replay_check
            result = run_trace(kernel, vocab, launch, tensor_stepper(program, vocab),
                               args.max_steps)
            replay_check(model, vocab, base_vocab, result.tokens, result.predicted)
        else:
            result = run_trace(kernel, vocab, launch, _stepper(args, model, vocab, base_vocab),
                               args.max_steps)
    seconds = time.perf_counter() - start
    st = result.stats
    mode = "replay" if args.replay else "generate" if args.generate else "decode"
    say(f"model engine ({mode}, {args.dtype}): {st['tokens']} tokens ({st['prompt_tokens']} "
        f"prompt, {st['trace_tokens']} trace), {st['exec_steps']} steps, {compiled_layers} "
        f"compiled layers in front of {model.config.num_hidden_layers - compiled_layers}; "
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


def _recorder(args: argparse.Namespace, model, compiled_layers: int):
    if not args.trace_png:
        return _NoRecorder()
    from qgc.runtime.trace_png import ActivityRecorder
    return ActivityRecorder(model, compiled_layers)


def _draw(args: argparse.Namespace, recorder, result) -> None:
    from qgc.runtime.trace_png import draw_trace
    summary = draw_trace(recorder.activity, result.tokens, args.trace_png,
                         title=f"{Path(args.input).name}: {len(result.tokens)} tokens")
    say(f"wrote {args.trace_png} ({summary['rows']} rows)")
