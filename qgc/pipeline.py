"""Pass pipelines, the stages of `--emit`, and MLIR-style IR dumps.

A stage is a named prefix of the compilation: `ptx` is the frontend plus the
ptx-level clean-up; `simt` and `tensor` come with their lowering passes.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError

from qgc.diagnostics import QgcError
from qgc.passes import get_all_passes
from qgc.protocol import BANK_WORDS

#: Pipeline of each stage, cumulative; a stage missing here does not exist yet.
#: Registers are allocated before blocks are formed: spill code lengthens blocks.
STAGE_PIPELINES: dict[str, str] = {
    "ptx": "ptx-remove-dead-functions",
    "simt": "ptx-remove-dead-functions,convert-ptx-to-simt{mem-words=1024},simt-if-convert,"
            "simt-rename-webs,simt-cse,simt-layout-memory,simt-allocate-registers{regs=15 preds=8},"
            "simt-form-blocks{max-ops=16 max-blocks=64}",
}
#: The tensor level keeps machine memory in one memory head per port and bank
#: (127 rows; one bank unless asked for more, `qgc --mem-words`, or a launch
#: needs more, `driver.apply_for_launch`) and divides in loops of machine
#: blocks (a 32-bit divider is too deep for one step).
TENSOR_MEM_WORDS = BANK_WORDS
STAGE_PIPELINES["tensor"] = (STAGE_PIPELINES["simt"].replace("mem-words=1024",
                                                             f"mem-words={TENSOR_MEM_WORDS}")
                             .replace("simt-rename-webs,",
                                      "simt-rename-webs,simt-expand-divrem{max-ops=16 regs=15},")
                             + ",convert-simt-to-tensor{max-warps=8},"
                             "tensor-schedule-layers{hidden=2048 intermediate=6144 heads=16}")
ALL_STAGES = ("ptx", "simt", "tensor")


def with_mem_words(spec: str, words: int) -> str:
    """`spec` with `convert-ptx-to-simt`'s machine memory set to `words`."""
    return re.sub(r"mem-words=\d+", f"mem-words={words}", spec)


def deepest_stage() -> str:
    return [s for s in ALL_STAGES if s in STAGE_PIPELINES][-1]


def stage_pipeline(stage: str) -> str:
    if stage not in STAGE_PIPELINES:
        raise QgcError(f"error: the `{stage}` stage does not exist yet "
                       f"(available: {', '.join(STAGE_PIPELINES)})", status=2)
    return STAGE_PIPELINES[stage]


@dataclass
class DumpOptions:
    """MLIR's `--mlir-print-ir-*` flags, without the prefix."""

    before_all: bool = False
    after_all: bool = False
    before: set[str] = field(default_factory=set)
    after: set[str] = field(default_factory=set)
    tree_dir: Path | None = None
    debuginfo: bool = False
    stream: IO[str] = sys.stderr

    def wants_before(self, name: str) -> bool:
        return self.before_all or name in self.before

    def wants_after(self, name: str) -> bool:
        return self.after_all or name in self.after or self.tree_dir is not None


def pass_title(p: ModulePass) -> str:
    return f"{type(p).__name__} ({p.name})"


def print_module(module: builtin.ModuleOp, stream: IO[str], debuginfo: bool = False) -> None:
    Printer(stream=stream, print_debuginfo=debuginfo).print_op(module)
    stream.write("\n\n")  # as xdsl-opt ends its output, so the two print identically


def parse_pipeline(spec: str) -> PassPipeline:
    try:
        return PassPipeline.parse_spec(get_all_passes(), spec)
    except ValueError as err:
        raise QgcError(f"error: {err} (known passes: {', '.join(get_all_passes())})",
                       status=2) from None
    except (Exception, ArgSpecParseError) as err:  # malformed spec text, bad option values
        # xDSL's spec parse error derives from BaseException, not Exception
        raise QgcError(f"error: invalid pass pipeline '{spec}': {err}", status=2) from None


def run_pipeline(ctx: Context, module: builtin.ModuleOp, pipeline: PassPipeline,
                 dumps: DumpOptions | None = None) -> None:
    """Apply the passes in order, verifying after each and dumping as asked."""
    dumps = dumps or DumpOptions()
    for index, p in enumerate(pipeline.passes):
        if dumps.wants_before(p.name):
            _dump(module, f"IR Dump Before {pass_title(p)}", dumps)
        p.apply(ctx, module)
        module.verify()
        if dumps.wants_after(p.name):
            if dumps.tree_dir is not None:
                _dump_tree(module, index, p, dumps)
            if dumps.after_all or p.name in dumps.after:
                _dump(module, f"IR Dump After {pass_title(p)}", dumps)


def _dump(module: builtin.ModuleOp, title: str, dumps: DumpOptions) -> None:
    dumps.stream.write(f"// -----// {title} //----- //\n")
    print_module(module, dumps.stream, dumps.debuginfo)


def _dump_tree(module: builtin.ModuleOp, index: int, p: ModulePass, dumps: DumpOptions) -> None:
    assert dumps.tree_dir is not None
    directory = dumps.tree_dir / "builtin_module_no-symbol-name"
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{index}_{p.name}.mlir", "w") as out:
        print_module(module, out, dumps.debuginfo)

