"""`qgc [compile] KERNEL.ptx`: compile to layers, print the IR after a stage or
any pass, print the pipeline, or report resources (the default command)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qgc import __version__, driver
from qgc.diagnostics import QgcError
from qgc.pipeline import (
    ALL_STAGES,
    DumpOptions,
    Passes,
    check_pass_names,
    deepest_stage,
    from_pass,
    pipeline_text,
    stage,
    up_to,
)
from qgc.protocol import BANK_WORDS, MAX_MEMORY_WORDS
from qgc.runtime.launch import load_launch
from qgc.stats import format_stats


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "compile", prog="qgc", help="compile a kernel, or print its IR (the default command)",
        description="Compile a CUDA kernel (PTX) into Qwen3.5 decoder layers.",
        epilog="Subcommands: `qgc run KERNEL.ptx --launch L.json` runs one launch; "
               "`qgc build KERNEL.ptx -o DIR` writes the merged model as a stock checkpoint; "
               "`qgc drift KERNEL.ptx` measures what the compiled layers do to text "
               "(see `qgc run|build|drift --help`).")
    p.add_argument("input", help="PTX file (.ptx), or textual IR (.mlir)")
    p.add_argument("-o", "--output", help="write the compiled layers (.safetensors)")
    p.add_argument("--emit", choices=ALL_STAGES, help="print the IR after this stage and stop")
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
    p.set_defaults(handler=command)


def _add_dump_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("IR dumps (to stderr, as MLIR's --mlir-print-ir-*)")
    g.add_argument("--print-ir-after-all", action="store_true")
    g.add_argument("--print-ir-before-all", action="store_true")
    g.add_argument("--print-ir-after", action="append", default=[], metavar="PASS")
    g.add_argument("--print-ir-before", action="append", default=[], metavar="PASS")
    g.add_argument("--print-ir-tree-dir", metavar="DIR",
                   help="write the IR after each pass into DIR, one file per pass")


def command(args: argparse.Namespace) -> int:
    check_pass_names(args.print_ir_after, "--print-ir-after")
    check_pass_names(args.print_ir_before, "--print-ir-before")
    passes = None if args.passes is not None else _stage(args)   # -p: the text as given
    if args.print_pipeline:
        print(args.passes if passes is None else pipeline_text(passes))
        return 0
    ctx, module = driver.load(args.input)
    dumps = DumpOptions(
        before_all=args.print_ir_before_all, after_all=args.print_ir_after_all,
        before=set(args.print_ir_before), after=set(args.print_ir_after),
        tree_dir=Path(args.print_ir_tree_dir) if args.print_ir_tree_dir else None,
        debuginfo=args.print_debuginfo)
    if args.stats:
        before = format_stats(module, ptx_only=True)
    schedule_note = None
    if args.stats and passes is not None and args.emit is None:
        # resources of every level that fits: a kernel the tensor level does not
        # take yet, or a schedule that does not fit the layers, is reported, not
        # fatal; the stats read the scheduled program, not its weights
        passes = up_to(passes, "convert-tensor-to-weights")
        driver.apply(ctx, module, up_to(passes, "convert-simt-to-tensor"), dumps)
        if tensor := from_pass(passes, "convert-simt-to-tensor"):
            schedule_note = _try_tensor_level(ctx, module, tensor, dumps)
    else:
        driver.apply(ctx, module, args.passes if passes is None else passes, dumps)
    if args.stats:
        launch = load_launch(Path(args.launch)) if args.launch else None
        print(format_stats(module, launch, before=before, tensor_note=schedule_note))
        return 0
    if args.output is not None:
        if args.passes is not None or args.emit is not None:
            raise QgcError("error: -o writes the compiled layers of a full compilation; drop "
                           "-p/--emit", status=2)
        from qgc.codegen import write_compiled  # numpy and the weights: the -o path only
        size = write_compiled(module, args.output, args.base_config)
        print(f"qgc: wrote {args.output} ({size / 1e6:.2f} MB)", file=sys.stderr)
        return 0
    driver.print_ir(module, sys.stdout, args.print_debuginfo)
    return 0


def _stage(args: argparse.Namespace) -> Passes:
    """The passes of `--emit`'s stage (else of a full compilation), with the
    machine memory and the base config asked for."""
    if args.mem_words is not None and not 1 <= args.mem_words <= MAX_MEMORY_WORDS:
        raise QgcError(f"error: --mem-words must be 1..{MAX_MEMORY_WORDS}, got "
                       f"{args.mem_words}", status=2)
    config = None
    if args.base_config is not None:
        from qgc.codegen import read_text_config  # codegen loads numpy: not for --emit=ptx
        config = read_text_config(args.base_config)
    return stage(args.emit or deepest_stage(), mem_words=args.mem_words, schedule=config)


def _try_tensor_level(ctx, module, passes: Passes, dumps: DumpOptions) -> str | None:
    """Lower the machine program to the tensor level and schedule it; a kernel
    the tensor level does not take yet, or a schedule that does not fit the
    layers, becomes an info line (a failed lowering leaves the module as it was)."""
    try:
        driver.apply(ctx, module, up_to(passes, "tensor-schedule-layers"), dumps)
    except QgcError as err:     # the machine's stats stand; say why there are no more
        return f"qgc info: no tensor level: {str(err).strip().splitlines()[0]}"
    try:
        driver.apply(ctx, module, from_pass(passes, "tensor-schedule-layers"), dumps)
    except QgcError as err:
        return f"qgc info: no layer schedule: {err}"
    return None
