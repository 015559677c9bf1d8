"""`qgc [compile] KERNEL.ptx`: compile to layers, print the IR after a stage or
any pass, print the pipeline, or report resources (the default command)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from qgc import __version__, driver
from qgc.base_config import CHOICES, read_text_config
from qgc.cli.common import say
from qgc.diagnostics import QgcError
from qgc.dump_flags import add_dump_flags, dump_options
from qgc.pipeline import (
    ALL_STAGES,
    DumpOptions,
    Passes,
    deepest_stage,
    from_pass,
    pipeline_text,
    stage,
    up_to,
)
from qgc.protocol import BANK_WORDS, MAX_MEMORY_WORDS
from qgc.runtime.launch import blame, load_launch
from qgc.stats import collect_stats, format_stats, ptx_records
from qgc.timing import NoTiming, Timing


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "compile", prog="qgc", help="compile a kernel, or print its IR (the default command)",
        description="Compile a CUDA kernel (PTX) into Qwen3.5 decoder layers.",
        epilog="Subcommands: `qgc run KERNEL.ptx --launch L.json` runs one launch; "
               "`qgc build KERNEL.ptx -o DIR` writes the merged model as a stock checkpoint; "
               "`qgc drift KERNEL.ptx` measures what the compiled layers do to text "
               "(see `qgc run|build|drift --help`).")
    p.add_argument("input", help="PTX file (.ptx), textual IR (.mlir), or - for the standard input")
    p.add_argument("-o", "--output", help="write the compiled layers (.safetensors)")
    p.add_argument("--emit", choices=ALL_STAGES, help="print the IR after this stage and stop")
    p.add_argument("-p", "--passes", help="custom pass pipeline, xDSL syntax: 'a,b{opt=1}'")
    p.add_argument("--print-pipeline", action="store_true",
                   help="print the pass pipeline that would run, and stop")
    p.add_argument("--stats", nargs="?", const="text", choices=("text", "json"),
                   help="resource usage at every level reached, on stderr (like ptxas -v); "
                        "--stats=json: one JSON object, for scripts")
    p.add_argument("--timing", action="store_true",
                   help="wall time of each pass on stderr (like -mlir-timing)")
    p.add_argument("--print-debuginfo", action="store_true",
                   help="print source locations (loc(...)) with the IR")
    p.add_argument("--base-config", metavar=CHOICES,
                   help="the Qwen3.5 text config the layers target: a shipped one by name "
                        "(2b, the default; 0.8b; small) or a JSON file or checkpoint directory")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--mem-words", type=int, metavar="N",
                      help=f"words of machine memory (default {BANK_WORDS}: one bank; up "
                           f"to {MAX_MEMORY_WORDS} in banks of {BANK_WORDS}, each memory read a "
                           "head per bank); `qgc run` sizes it to the launch")
    size.add_argument("--launch", metavar="L.json",
                      help="size the machine memory to this launch (as `qgc run` does); with "
                           "--stats, also report its memory map and EXEC steps")
    p.add_argument("--verify-each", action="store_true",
                   help="verify the IR after every pass, as mlir-opt does (for pass writers; "
                        "by default the input and the last pass's result are verified)")
    add_dump_flags(p)
    p.add_argument("--version", action="version", version=f"qgc {__version__}")
    p.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    dumps = dump_options(args)
    passes = None if args.passes is not None else _stage(args)   # -p: the text as given
    if args.print_pipeline:
        print(args.passes if passes is None else pipeline_text(passes))
        return 0
    if args.output is not None:
        _check_output(args)
    if args.launch and passes is None and not args.stats:
        raise QgcError("error: --launch sizes the memory of qgc's own pipeline; with -p the "
                       "pipeline is as given (--launch then only feeds --stats)", status=2)
    launch = load_launch(Path(args.launch)) if args.launch else None
    timing = Timing() if args.timing else NoTiming()
    with timing.scope("Parse"):
        ctx, module = driver.load(args.input)
    before = ptx_records(module) if args.stats else None
    stats_only = args.stats and args.output is None and args.emit is None and passes is not None
    with blame(launch):   # a launch error names its file
        note = _compile(args, ctx, module, passes, dumps, timing, launch, stats_only)
    if args.output is not None:
        from qgc.codegen import write_compiled  # numpy and the weights: the -o path only
        with timing.scope("Output"):
            size = write_compiled(module, args.output, args.base_config)
        say(f"wrote {args.output} ({size / 1e6:.2f} MB)")
    elif not stats_only:
        with timing.scope("Output"):
            driver.print_ir(module, sys.stdout, args.print_debuginfo)
    if args.stats:
        with blame(launch):
            stats = collect_stats(module, launch, before, note)
        report_stats(stats, args.stats)
    if args.timing:
        timing.report(sys.stderr)
    return 0


def _compile(args, ctx, module, passes: Passes | None, dumps: DumpOptions, timing: Timing,
             launch, stats_only: bool) -> str | None:
    """Run the pipeline; for `--stats` alone, as far as the levels go (the
    note says why a level is missing)."""
    if stats_only:
        return _stats_compile(ctx, module, passes, dumps, timing, launch, args.verify_each)
    if launch is not None and passes is not None:
        driver.apply_for_launch(ctx, module, passes, launch, dumps, timing, args.verify_each)
    else:
        driver.apply(ctx, module, args.passes if passes is None else passes, dumps, timing,
                     args.verify_each)
    return None


def report_stats(stats: dict, form: str) -> None:
    """`--stats` on stderr: `qgc info:` lines, or one JSON object."""
    if form == "json":
        print(json.dumps(stats), file=sys.stderr)
    else:
        print(format_stats(stats), file=sys.stderr)


def _check_output(args: argparse.Namespace) -> None:
    """-o takes a full compilation, to a file that can be written: said
    before compiling, not after."""
    if args.passes is not None or args.emit is not None:
        raise QgcError("error: -o writes the compiled layers of a full compilation; drop "
                       "-p/--emit", status=2)
    from qgc.runtime.layers_file import check_output_file
    check_output_file(args.output)


def _stage(args: argparse.Namespace) -> Passes:
    """The passes of `--emit`'s stage (else of a full compilation), with the
    machine memory and the base config asked for."""
    if args.mem_words is not None and not 1 <= args.mem_words <= MAX_MEMORY_WORDS:
        raise QgcError(f"error: --mem-words must be 1..{MAX_MEMORY_WORDS}, got "
                       f"{args.mem_words}", status=2)
    config = None
    if args.base_config is not None:
        config = read_text_config(args.base_config)
    return stage(args.emit or deepest_stage(), mem_words=args.mem_words, schedule=config)


def _stats_compile(ctx, module, passes: Passes, dumps: DumpOptions, timing: Timing,
                   launch, verify_each: bool) -> str | None:
    """Compile as far as the levels go for `--stats`: through the machine
    level (fatal if it fails), then the tensor level and its schedule, where
    a kernel the tensor level does not take yet, or a schedule that does not
    fit the layers, becomes a note; the stats read the scheduled program, not
    its weights."""
    passes = up_to(passes, "convert-tensor-to-weights")
    attempt = module.clone()    # all of it at once, as -o compiles it (`driver.fit_layers`)
    try:
        if launch is not None:
            driver.apply_for_launch(ctx, attempt, passes, launch, dumps, timing, verify_each)
        else:
            driver.apply(ctx, attempt, passes, dumps, timing, verify_each)
        driver.replace_contents(module, attempt)
        return None
    except QgcError:
        pass                    # level by level: which level stops, and why
    machine = up_to(passes, "convert-simt-to-tensor")
    if launch is not None:
        driver.apply_for_launch(ctx, module, machine, launch, dumps, timing, verify_each)
    else:
        driver.apply(ctx, module, machine, dumps, timing, verify_each)
    tensor = from_pass(passes, "convert-simt-to-tensor")
    if not tensor:
        return None
    try:
        driver.apply(ctx, module, up_to(tensor, "tensor-schedule-layers"), dumps, timing,
                     verify_each)
    except QgcError as err:     # the machine's stats stand; say why there are no more
        return f"no tensor level: {str(err).strip().splitlines()[0]}"
    try:
        driver.apply(ctx, module, from_pass(tensor, "tensor-schedule-layers"), dumps, timing,
                     verify_each)
    except QgcError as err:
        return f"no layer schedule: {err}"
    return None
