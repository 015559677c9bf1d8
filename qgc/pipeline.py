"""Pass pipelines, the stages of `--emit`, and MLIR-style IR dumps.

A pipeline is a tuple of xDSL pass instances (frozen dataclasses). A stage is
a named prefix of the compilation: `ptx` is the frontend plus the ptx-level
clean-up; `simt` and `tensor` come with their lowering passes, `weights`
with codegen (`convert-tensor-to-weights`). Callers cut a
pipeline by pass name (`up_to`, `from_pass`) and set a pass's options
(`with_options`); the text form (`--print-pipeline`, `-p`) is xDSL's pipeline
syntax, printed by `pipeline_text` and read by `parse_pipeline`.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import ModulePass, PassPipeline
from xdsl.printer import Printer
from xdsl.utils.arg_spec import ArgSpec
from xdsl.utils.exceptions import ArgSpecParseError

from qgc.diagnostics import QgcError
from qgc.passes import get_all_passes
from qgc.protocol import BANK_WORDS, BLOCK_BITS
from qgc.timing import NoTiming, Timing

if TYPE_CHECKING:
    from qgc.base_config import TextConfig
    from qgc.dialects import simt, tensor

#: A pass pipeline: the passes in the order they run.
Passes = tuple[ModulePass, ...]

#: The stages, shallowest first; `--emit` names one, a compilation runs the last.
ALL_STAGES = ("ptx", "simt", "tensor", "weights")
#: The tensor level keeps machine memory in one memory head per port and bank
#: (127 rows; one bank unless asked for more, `qgc --mem-words`, or a launch
#: needs more, `driver.apply_for_launch`) and divides in loops of machine
#: blocks (a 32-bit divider is too deep for one step).
TENSOR_MEM_WORDS = BANK_WORDS


#: Passes whose options are the base text config's (each has `options_of(config)`).
FOLLOW_THE_BASE = ("tensor-split-thresholds", "tensor-schedule-layers",
                   "convert-tensor-to-weights")


def _new(name: str, **options: Any) -> ModulePass:
    """The registered pass `name` with `options` (its module loads only now)."""
    return get_all_passes()[name]()(**options)


def _stage_passes(name: str) -> Passes:
    """Each stage's passes, cumulative. Registers are allocated before blocks
    are formed: spill code lengthens blocks."""
    ptx = (_new("ptx-remove-dead-functions"),)
    if name == "ptx":
        return ptx
    tensor = name in ("tensor", "weights")
    machine = (
        _new("ptx-lower-barrier-reductions"),
        _new("ptx-expand-wide-divrem"),
        _new("ptx-expand-f64-atomics"),
        _new("convert-ptx-to-simt", mem_words=TENSOR_MEM_WORDS if tensor else 1024),
        _new("simt-if-convert"),
        _new("simt-rename-webs"),
        *((_new("simt-expand-float"), _new("simt-expand-divrem", max_ops=16, regs=15))
          if tensor else ()),
        _new("simt-cse"),
        _new("simt-layout-memory"),
        _new("simt-allocate-registers", regs=15, preds=8),
        _new("simt-form-blocks", max_ops=16, max_blocks=1 << BLOCK_BITS),
    )
    if not tensor:
        return ptx + machine
    scheduled = ptx + machine + (_new("convert-simt-to-tensor", max_warps=8),
                                 _new("tensor-split-thresholds", intermediate=6144),
                                 _new("tensor-schedule-layers", hidden=2048, intermediate=6144,
                                      heads=16))
    if name == "tensor":
        return scheduled
    return scheduled + (_new("convert-tensor-to-weights"),)


def stage(name: str, *, mem_words: int | None = None,
          schedule: TextConfig | None = None) -> Passes:
    """The passes of stage `name`: machine memory of `mem_words` words, the
    layer schedule for the base config `schedule` (where the stage has them)."""
    if name not in ALL_STAGES:
        raise QgcError(f"error: the `{name}` stage does not exist yet "
                       f"(available: {', '.join(ALL_STAGES)})", status=2)
    passes = _stage_passes(name)
    if mem_words is not None:
        passes = with_options(passes, "convert-ptx-to-simt", mem_words=mem_words)
    if schedule is not None:
        for p in passes:
            if p.name in FOLLOW_THE_BASE:
                passes = with_options(passes, p.name, **type(p).options_of(schedule))
    return passes


def deepest_stage() -> str:
    return ALL_STAGES[-1]


def up_to(passes: Passes, name: str, *, inclusive: bool = False) -> Passes:
    """The passes before the first `name` (through it if `inclusive`); all of
    them if none is `name`."""
    for index, p in enumerate(passes):
        if p.name == name:
            return passes[:index + inclusive]
    return passes


def from_pass(passes: Passes, name: str) -> Passes:
    """The passes from the first `name` on; none if none is `name`."""
    return passes[len(up_to(passes, name)):]


def insert_after(passes: Passes, name: str, new: Iterable[ModulePass]) -> Passes:
    """`passes` with `new` after the first `name` pass."""
    head = up_to(passes, name, inclusive=True)
    return head + tuple(new) + passes[len(head):]


def has_pass(passes: Passes, name: str) -> bool:
    return any(p.name == name for p in passes)


def with_options(passes: Passes, name: str, **options: Any) -> Passes:
    """`passes` with the options of every `name` pass set to `options`."""
    return tuple(dataclasses.replace(p, **options) if p.name == name else p for p in passes)


def for_kernel(passes: Passes, kernel: str) -> Passes:
    """`passes` compiling `kernel` alone, the other entries of its module
    dropped (`ptx-remove-dead-functions{entry}`): a launch's pipeline."""
    return with_options(passes, "ptx-remove-dead-functions", entry=kernel)


def pipeline_text(passes: Iterable[ModulePass]) -> str:
    """The pipeline in xDSL's syntax, `a,b{opt-x=1 opt-y=2}`: every option a
    pass has is written out, but for one left at a default that turns it off
    (0, false, unset)."""
    return ",".join(str(_spec(p)) for p in passes)


class _PositionalFloat(float):
    """A float printed without an exponent: xDSL prints options with `str`
    (`1e-06`) but its pipeline parser reads no exponent."""

    def __str__(self) -> str:
        return format(Decimal(repr(float(self))), "f")


def _spec(p: ModulePass) -> ArgSpec:
    defaults = {f.name: f.default for f in dataclasses.fields(p)}
    shown = {name.replace("_", "-"): tuple(_PositionalFloat(v) if isinstance(v, float) else v
                                          for v in values)
             for name, values in p.spec(include_default=True).parameters.items()
             if getattr(p, name) != defaults[name] or getattr(p, name)}
    return ArgSpec(p.name, shown)


def check_pass_names(names: Iterable[str], flag: str) -> None:
    """Refuse a pass name no pass has (a dump flag naming it would never fire)."""
    known = get_all_passes()
    for name in names:
        if name not in known:
            raise QgcError(f"error: unknown pass '{name}' in {flag} "
                           f"(known passes: {', '.join(known)})", status=2)


def step_program(module: builtin.ModuleOp, kernel: simt.KernelOp) -> tensor.ProgramOp:
    """The step program `convert-simt-to-tensor` made of `kernel`."""
    from qgc.dialects import tensor  # the ptx and simt stages never load it
    (program,) = [p for p in tensor.programs_of(module)
                  if p.program_name == f"{kernel.kernel_name}_step"]
    return program


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
    except ValueError as err:   # an unknown pass gets the list; a bad option does not
        known = (f" (known passes: {', '.join(get_all_passes())})"
                 if "Unrecognized passes" in str(err) else "")
        raise QgcError(f"error: {err}{known}", status=2) from None
    except (Exception, ArgSpecParseError) as err:  # malformed spec text, bad option values
        # xDSL's spec parse error derives from BaseException, not Exception
        raise QgcError(f"error: invalid pass pipeline '{spec}': {err}", status=2) from None


def run_pipeline(ctx: Context, module: builtin.ModuleOp, pipeline: PassPipeline,
                 dumps: DumpOptions | None = None, timing: Timing | None = None,
                 verify_each: bool = True) -> None:
    """Apply the passes in order, dumping as asked and timing each. The IR is
    verified after the last pass, and after every pass with `verify_each`
    (MLIR's default; `qgc` compiles without it unless asked, `--verify-each`:
    verifying a step program costs as much as a pass). The verifier's time is
    the pass's, as MLIR counts it."""
    dumps = dumps or DumpOptions()
    timing = timing or NoTiming()
    last = len(pipeline.passes) - 1
    for index, p in enumerate(pipeline.passes):
        if dumps.wants_before(p.name):
            _dump(module, f"IR Dump Before {pass_title(p)}", dumps)
        with timing.scope(pass_title(p)):
            p.apply(ctx, module)
            if verify_each or index == last:
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

