"""The `qgc` command line: compile PTX, print IR after any pass, run a launch.

    qgc KERNEL.ptx -o layers.safetensors       compile
    qgc KERNEL.ptx --emit=ptx|simt|tensor      print the IR after that stage
    qgc KERNEL.ptx -p 'pass-a,pass-b{opt=v}'   run a custom pipeline, print the IR
    qgc run KERNEL.ptx --launch L.json [--engine ref|simt|tensor|model]
    qgc build KERNEL.ptx|layers.safetensors [--base PATH] -o DIR   a stock checkpoint
    qgc drift KERNEL.ptx [--base PATH]          text drift of the merged model

torch and transformers are imported only by the paths that run the model.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from qgc import __version__
from qgc.diagnostics import QgcError
from qgc.protocol import BANK_WORDS, MAX_MEMORY_WORDS

ENGINES = ("ref", "simt", "tensor", "model")


def _compile_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qgc", description="Compile a CUDA kernel (PTX) into Qwen3.5 decoder layers.",
        epilog="Subcommands: `qgc run KERNEL.ptx --launch L.json` runs one launch; "
               "`qgc build KERNEL.ptx -o DIR` writes the merged model as a stock checkpoint; "
               "`qgc drift KERNEL.ptx` measures what the compiled layers do to text "
               "(see `qgc run|build|drift --help`).")
    p.add_argument("input", help="PTX file (.ptx), or textual IR (.mlir)")
    p.add_argument("-o", "--output", help="write the compiled layers (.safetensors)")
    p.add_argument("--emit", choices=("ptx", "simt", "tensor"),
                   help="print the IR after this stage and stop")
    p.add_argument("-p", "--passes", help="custom pass pipeline, xDSL syntax: 'a,b{opt=1}'")
    p.add_argument("--print-pipeline", action="store_true",
                   help="print the pass pipeline that would run, and stop")
    p.add_argument("--stats", action="store_true", help="print resource usage (like ptxas -v)")
    p.add_argument("--launch", metavar="L.json",
                   help="with --stats: also the memory and EXEC steps of this launch")
    p.add_argument("--print-debuginfo", action="store_true",
                   help="print source locations (loc(...)) with the IR")
    p.add_argument("--base-config", metavar="PATH",
                   help="Qwen3.5 text config (JSON, or a checkpoint directory) the layers "
                        "target (default: the 2B config)")
    p.add_argument("--mem-words", type=int, metavar="N",
                   help=f"words of machine memory (default {BANK_WORDS}: one bank; up "
                        f"to {MAX_MEMORY_WORDS} in banks of {BANK_WORDS}, each memory read a head per "
                        "bank); `qgc run` sizes it to the launch")
    _add_dump_flags(p)
    p.add_argument("--version", action="version", version=f"qgc {__version__}")
    return p


def _add_dump_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("IR dumps (to stderr, as MLIR's --mlir-print-ir-*)")
    g.add_argument("--print-ir-after-all", action="store_true")
    g.add_argument("--print-ir-before-all", action="store_true")
    g.add_argument("--print-ir-after", action="append", default=[], metavar="PASS")
    g.add_argument("--print-ir-before", action="append", default=[], metavar="PASS")
    g.add_argument("--print-ir-tree-dir", metavar="DIR",
                   help="write the IR after each pass into DIR, one file per pass")


def _add_base_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", default=os.environ.get("QGC_BASE"),
                   help="local Qwen3.5 checkpoint directory (default: $QGC_BASE, else a "
                        "seeded stand-in)")
    p.add_argument("--base-config", metavar="PATH",
                   help="without --base: the text config of the seeded stand-in (default: "
                        "the 2B config)")


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qgc run", description="Run one kernel launch.")
    p.add_argument("input", help="PTX file")
    p.add_argument("--launch", required=True, help="launch JSON (DESIGN §3)")
    p.add_argument("--engine", choices=ENGINES, default="ref")
    p.add_argument("--warp-size", type=int, default=4, help="lanes per warp (ref engine)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    _add_base_flags(p)
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
    return p


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qgc build", description="Write the merged model (compiled layers in front of "
        "the base) as a stock transformers checkpoint directory.")
    p.add_argument("input", help="PTX file, or a layers file from `qgc K.ptx -o F.safetensors`")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16")
    _add_base_flags(p)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--mem-words", type=int, metavar="N",
                      help=f"words of machine memory (default {BANK_WORDS})")
    size.add_argument("--launch", metavar="L.json", help="size the memory to this launch")
    return p


def _drift_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="qgc drift", description="KL and top-1 agreement of next-token distributions, "
        "base against merged model, on text; the residual's change at the compiled layers' exit.")
    p.add_argument("input", help="PTX file")
    _add_base_flags(p)
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--sequences", type=int, default=4, help="text sequences")
    p.add_argument("--length", type=int, default=32, help="tokens per sequence")
    p.add_argument("--mem-words", type=int, metavar="N")
    p.add_argument("--no-mute", action="store_true",
                   help="merge without the text mute (to see what it removes)")
    return p


SUBCOMMANDS = {"run": (_run_parser, "_run"), "build": (_build_parser, "build"),
               "drift": (_drift_parser, "drift")}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            parser, handler = SUBCOMMANDS[argv[0]]
            args = parser().parse_args(argv[1:])
            if handler == "_run":
                return _run(args)
            from qgc import model_commands
            return getattr(model_commands, handler)(args)
        return _compile(_compile_parser().parse_args(argv))
    except QgcError as err:
        print(str(err), file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # a bug in qgc: say so in one line, no traceback
        if os.environ.get("QGC_DEBUG"):
            raise
        print(f"qgc: internal error: {type(err).__name__}: {err} "
              "(set QGC_DEBUG=1 for a traceback)", file=sys.stderr)
        return 70


def _compile(args: argparse.Namespace) -> int:
    from qgc import driver
    from qgc.pipeline import DumpOptions, deepest_stage, stage_pipeline

    if args.passes is not None:
        spec = args.passes
    elif args.emit:
        spec = stage_pipeline(args.emit)
    else:  # full compilation
        spec = stage_pipeline(deepest_stage())
    if args.mem_words is not None and args.passes is None:
        from qgc.pipeline import with_mem_words
        if not 1 <= args.mem_words <= MAX_MEMORY_WORDS:
            raise QgcError(f"error: --mem-words must be 1..{MAX_MEMORY_WORDS}, got "
                           f"{args.mem_words}", status=2)
        spec = with_mem_words(spec, args.mem_words)
    if args.base_config is not None and args.passes is None:
        from qgc.codegen import read_text_config, schedule_options
        head, sep, _ = spec.partition("tensor-schedule-layers")
        if sep:
            spec = head + schedule_options(read_text_config(args.base_config))
    if args.print_pipeline:
        print(spec)
        return 0
    ctx, module = driver.load(args.input)
    dumps = DumpOptions(
        before_all=args.print_ir_before_all, after_all=args.print_ir_after_all,
        before=set(args.print_ir_before), after=set(args.print_ir_after),
        tree_dir=Path(args.print_ir_tree_dir) if args.print_ir_tree_dir else None,
        debuginfo=args.print_debuginfo)
    if args.stats:
        from qgc.stats import format_stats
        before = format_stats(module, ptx_only=True)
    schedule_note = None
    if args.stats and args.passes is None and args.emit is None:
        # resources of every level that fits: a kernel the tensor level does not
        # take yet, or a schedule that does not fit the layers, is reported, not fatal
        machine, sep, tensor = spec.partition(",convert-simt-to-tensor")
        driver.apply(ctx, module, machine, dumps)
        if sep:
            schedule_note = _try_tensor_level(ctx, module, sep[1:] + tensor, dumps)
    else:
        driver.apply(ctx, module, spec, dumps)
    if args.stats:
        launch = None
        if args.launch:
            from qgc.runtime.launch import load_launch
            launch = load_launch(Path(args.launch))
        print(format_stats(module, launch, before=before, tensor_note=schedule_note))
        return 0
    if args.output is not None:
        if args.passes is not None or args.emit is not None:
            raise QgcError("error: -o writes the compiled layers of a full compilation; drop "
                           "-p/--emit", status=2)
        from qgc.codegen import write_compiled
        size = write_compiled(module, args.output, args.base_config)
        print(f"qgc: wrote {args.output} ({size / 1e6:.2f} MB)", file=sys.stderr)
        return 0
    driver.print_ir(module, sys.stdout, args.print_debuginfo)
    return 0


def _try_tensor_level(ctx, module, spec: str, dumps) -> str | None:
    """Lower the machine program to the tensor level and schedule it; a kernel
    the tensor level does not take yet, or a schedule that does not fit the
    layers, becomes an info line (a failed lowering leaves the module as it was)."""
    from qgc import driver
    convert, sep, schedule = spec.partition(",tensor-schedule-layers")
    try:
        driver.apply(ctx, module, convert, dumps)
    except QgcError as err:     # the machine's stats stand; say why there are no more
        return f"qgc info: no tensor level: {str(err).strip().splitlines()[0]}"
    try:
        driver.apply(ctx, module, (sep + schedule)[1:], dumps)
    except QgcError as err:
        return f"qgc info: no layer schedule: {err}"
    return None


#: engine → the stage whose IR it executes; engines missing here do not exist yet.
ENGINE_STAGES = {"ref": "ptx", "simt": "simt", "tensor": "tensor", "model": "tensor"}


def _run(args: argparse.Namespace) -> int:
    from qgc import driver
    from qgc.pipeline import stage_pipeline
    from qgc.runtime.launch import format_result, load_launch

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
    if args.engine == "model":    # compiles for its base config (or runs a built checkpoint)
        from qgc.model_commands import run_model
        print(format_result(run_model(args, launch).buffers))
        return 0
    ctx, module = driver.load(args.input)
    if args.engine == "simt":
        from qgc.dialects.simt import kernels_of
        from qgc.runtime.simt_engine import run_simt
        if not kernels_of(module):  # PTX (or ptx IR) in: compile it to the machine first
            driver.apply(ctx, module, stage_pipeline("simt"))
        result = run_simt(module, launch)
    elif args.engine == "tensor":
        result = _run_tensor(ctx, module, launch)
    else:
        from qgc.runtime.ref import run_ref
        driver.apply(ctx, module, stage_pipeline("ptx"))
        result = run_ref(module, launch, warp_size=args.warp_size)
    print(format_result(result.buffers))
    return 0


def _run_tensor(ctx, module, launch):
    from qgc import driver
    from qgc.dialects import tensor
    from qgc.dialects.simt import kernels_of
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.pipeline import stage_pipeline
    from qgc.runtime.simt_engine import pick_kernel
    from qgc.runtime.trace import run_trace, tensor_stepper

    if not tensor.programs_of(module):  # the ideal engine needs no layer schedule
        spec = stage_pipeline("tensor").split(",tensor-schedule-layers")[0]
        if kernels_of(module):  # a machine listing in: lower it from the simt level on
            spec = spec[spec.index("convert-simt-to-tensor"):]
        driver.apply_for_launch(ctx, module, spec, launch)
    kernel = pick_kernel(module, launch.kernel)
    (program,) = [p for p in tensor.programs_of(module)
                  if p.program_name == f"{kernel.kernel_name}_step"]
    vocab = vocabulary_of(program)
    return run_trace(kernel, vocab, launch, tensor_stepper(program, vocab))


if __name__ == "__main__":
    sys.exit(main())
