"""The `qgc` command line, one module per command:

    qgc [compile] KERNEL.ptx -o layers.safetensors       compile
    qgc [compile] KERNEL.ptx --emit=ptx|simt|tensor      print the IR after that stage
    qgc [compile] KERNEL.ptx -p 'pass-a,pass-b{opt=v}'   run a custom pipeline, print the IR
    qgc run KERNEL.ptx --launch L.json [--engine ref|simt|tensor|model]
    qgc build KERNEL.ptx|layers.safetensors [--base PATH] -o DIR   a stock checkpoint
    qgc drift KERNEL.ptx [--base PATH]          text drift of the merged model

Without a command word the arguments are `compile`'s, as before commands
existed. torch and transformers are imported only by the paths that run the
model.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from qgc import __version__
from qgc.cli import build, compile, drift, run
from qgc.diagnostics import QgcError

COMMANDS = {"compile": compile, "run": run, "build": build, "drift": drift}
#: what `qgc` itself answers; any other first argument starts `compile`'s
OWN_FLAGS = ("-h", "--help", "--version")


def parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """`qgc`'s parser and each command's."""
    top = argparse.ArgumentParser(
        prog="qgc", allow_abbrev=False,
        description="Compile a CUDA kernel (PTX) into Qwen3.5 decoder layers, and run it.",
        epilog="Without a command, `qgc ARGS` is `qgc compile ARGS` "
               "(see `qgc COMMAND --help`).")
    top.add_argument("--version", action="version", version=f"qgc {__version__}")
    commands = top.add_subparsers(title="commands", dest="name", metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(commands)
    return top, commands.choices


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*COMMANDS, *OWN_FLAGS):
        argv.insert(0, "compile")
    top, commands = parser()
    try:
        args, extra = top.parse_known_args(argv)
        if extra:   # as the command's own parser says it
            commands[args.name].error(f"unrecognized arguments: {' '.join(extra)}")
        return args.handler(args)
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
