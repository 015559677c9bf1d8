"""The IR-dump flags `qgc` and `qgc-opt` share (MLIR's `--mlir-print-ir-*`,
without the prefix), and the DumpOptions they ask for."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qgc.pipeline import DumpOptions, check_pass_names


def add_dump_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("IR dumps (to stderr, as MLIR's --mlir-print-ir-*)")
    g.add_argument("--print-ir-after-all", action="store_true")
    g.add_argument("--print-ir-before-all", action="store_true")
    g.add_argument("--print-ir-after", action="append", default=[], metavar="PASS")
    g.add_argument("--print-ir-before", action="append", default=[], metavar="PASS")
    g.add_argument("--print-ir-tree-dir", metavar="DIR",
                   help="write the IR after each pass into DIR, one file per pass")


def dump_options(args: argparse.Namespace) -> DumpOptions:
    """The dumps the flags ask for; a pass name no pass has is an error."""
    check_pass_names(args.print_ir_after, "--print-ir-after")
    check_pass_names(args.print_ir_before, "--print-ir-before")
    return DumpOptions(
        before_all=args.print_ir_before_all, after_all=args.print_ir_after_all,
        before=set(args.print_ir_before), after=set(args.print_ir_after),
        tree_dir=Path(args.print_ir_tree_dir) if args.print_ir_tree_dir else None,
        debuginfo=args.print_debuginfo, stream=sys.stderr)   # the stderr of now, not of import
