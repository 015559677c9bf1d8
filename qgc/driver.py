"""Load a kernel (PTX or textual IR), run pipelines on it, print it."""

from __future__ import annotations

import functools
import re
import sys
from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.ir import Operation
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from qgc import protocol
from qgc.context import make_context
from qgc.diagnostics import QgcError, at_op, remember_source
from qgc.machine.abi import banked_words, memory_layout, pick_kernel
from qgc.pipeline import (
    DumpOptions,
    Passes,
    for_kernel,
    from_pass,
    has_pass,
    parse_pipeline,
    print_module,
    run_pipeline,
    up_to,
    with_options,
)
from qgc.timing import Timing

#: The name diagnostics give the standard input, as MLIR's tools do.
STDIN_NAME = "<stdin>"
_FRONTENDS = (".ptx", ".mlir")


def read_source(path: str) -> str:
    """The text of `path`, or of the standard input for `-` (read once: every
    later load of `-` in this process sees the same text)."""
    if path == "-":
        return _stdin_text()
    try:
        return Path(path).read_text()
    except OSError as err:
        raise QgcError(f"error: cannot read '{path}': {err.strerror}", status=2) from None
    except UnicodeDecodeError:
        raise QgcError(f"error: '{path}' is not a text file", status=2) from None


@functools.cache
def _stdin_text() -> str:
    try:
        return sys.stdin.buffer.read().decode()
    except UnicodeDecodeError:
        raise QgcError("error: the standard input is not text", status=2) from None


def input_kind(path: str, text: str) -> str:
    """`.ptx` or `.mlir`: by the suffix, or for stdin (`-`) by the first thing
    that is not a comment: a PTX directive (`.version`, `.target`, ...) is PTX,
    anything else textual IR."""
    if path == "-":
        return ".ptx" if _first_token(text).startswith(".") else ".mlir"
    suffix = Path(path).suffix
    if suffix not in _FRONTENDS:
        hint = "; compile CUDA with nvcc -ptx first" if suffix in (".cu", ".cuh") else ""
        kind = f"'{suffix}'" if suffix else "(no suffix)"
        raise QgcError(f"error: '{path}': unknown input kind {kind} (expected .ptx or .mlir, "
                       f"or - for the standard input{hint})", status=2)
    return suffix


_COMMENTS = re.compile(r"\s*(//[^\n]*|/\*.*?\*/)?", re.S)


def _first_token(text: str) -> str:
    pos = 0
    while (m := _COMMENTS.match(text, pos)) and m.end() > pos:
        pos = m.end()
    return text[pos:pos + 1]


def load(path: str) -> tuple[Context, builtin.ModuleOp]:
    """Parse a `.ptx` file with the PTX frontend, a `.mlir` file as textual IR,
    `-` (the standard input) as what it holds; then verify it."""
    text = read_source(path)
    kind = input_kind(path, text)
    name = STDIN_NAME if path == "-" else path
    remember_source(name, text)
    ctx = make_context()
    if kind == ".ptx":
        from qgc.frontend import parse_ptx
        module = parse_ptx(text, name)
    else:
        module = parse_ir(ctx, text, name)
    verify(module)
    return ctx, module


def parse_ir(ctx: Context, text: str, path: str) -> builtin.ModuleOp:
    from qgc.frontend.mlir import parse_mlir
    return parse_mlir(ctx, text, path)


def verify(module: builtin.ModuleOp, source: str | None = None) -> None:
    """Verify `module`; a failure is a diagnostic at the op that fails."""
    try:
        module.verify()
    except VerifyException as err:
        raise QgcError(verify_diagnostic(module, err), status=2) from None


def verify_diagnostic(module: builtin.ModuleOp, err: VerifyException) -> str:
    """`err` as `file:L:C: error: ...` at the op that fails to verify (the
    innermost, as the verifier checks nested ops first), or `error: ...`."""
    message = str(err).strip() or "verification failed"
    return at_op(failing_op(module), message.removeprefix("Operation does not verify: "))


def failing_op(module: builtin.ModuleOp) -> Operation | None:
    """The innermost op whose own checks fail (None: only the block structure does)."""
    for op in module.walk(region_first=True):
        try:
            op.verify(verify_nested_ops=False)
        except (VerifyException, ValueError):
            return op
    return None


def apply(ctx: Context, module: builtin.ModuleOp, pipeline: str | Passes,
          dumps: DumpOptions | None = None, timing: Timing | None = None,
          verify_each: bool = False) -> None:
    """Run `pipeline` (passes, or their text as `-p` takes it) on `module`,
    verifying after the last pass, as `qgc` does, or (`verify_each`, as
    `qgc-opt` and the pipeline's tests do) after every pass; a
    schedule past the layer goal is tried again with blocks of one product
    each (`fit_layers`)."""
    passes = _passes(pipeline)

    def run(target: builtin.ModuleOp, part: Passes) -> None:
        _run(ctx, target, part, dumps, timing, verify_each)
    fit_layers(module, passes, run, run)


def apply_for_launch(ctx: Context, module: builtin.ModuleOp, pipeline: str | Passes,
                     launch, dumps: DumpOptions | None = None,
                     timing: Timing | None = None, verify_each: bool = False) -> None:
    """Apply `pipeline` (through `convert-ptx-to-simt`) with the machine
    memory `launch` needs: the machine passes run with all the memory the
    tensor level holds, then the launched kernel keeps the fewest memory banks
    that hold the launch's words (the rest of `pipeline` lowers it). Only
    the launched kernel is compiled (`for_kernel`)."""
    passes = for_kernel(_passes(pipeline), launch.kernel)
    if not has_pass(up_to(passes, "convert-simt-to-tensor"), "convert-ptx-to-simt"):
        apply(ctx, module, passes, dumps, timing, verify_each)
        return

    def run(target: builtin.ModuleOp, part: Passes) -> None:
        _run(ctx, target, with_options(up_to(part, "convert-simt-to-tensor"),
                                       "convert-ptx-to-simt",
                                       mem_words=protocol.MAX_MEMORY_WORDS), dumps, timing,
             verify_each)
        kernel = pick_kernel(target, launch.kernel)    # a launch past the memory is refused here
        kernel.set_limit("mem_words", banked_words(memory_layout(kernel, launch).total))
        if rest := from_pass(part, "convert-simt-to-tensor"):
            _run(ctx, target, rest, dumps, timing, verify_each)

    def run_rest(target: builtin.ModuleOp, part: Passes) -> None:
        _run(ctx, target, part, dumps, timing, verify_each)
    fit_layers(module, passes, run, run_rest)


def fit_layers(module: builtin.ModuleOp, passes: Passes, run, run_rest) -> None:
    """`run(module, passes)`, but where `simt-form-blocks` may put several
    products in a block (`max-products=0`) and the tensor schedule then takes
    more than `LAYER_GOAL` layers or does not fit: the passes through the
    schedule run again on the input with narrower blocks (`_narrower`: one
    product each, so a block's multipliers no longer run side by side; then
    also half the ops, so fewer values live at once), at the price of more
    steps, until one is within the goal; the schedule with the fewest layers
    stays (a retry stops any placement that cannot have fewer:
    `tensor-schedule-layers{fewer-than}`), and `run_rest` runs what follows
    it."""
    form = next((p for p in passes if p.name == "simt-form-blocks"), None)
    if form is None or form.max_products or not has_pass(passes, "tensor-schedule-layers"):
        run(module, passes)
        return
    from qgc.dialects import tensor  # the schedule's modules: only where one runs
    from qgc.passes.tensor_schedule_layers import LAYER_GOAL

    head = up_to(passes, "tensor-schedule-layers", inclusive=True)
    original, failure = module.clone(), None
    try:
        run(module, head)
    except QgcError as err:
        if not tensor.programs_of(module):       # not the schedule: no second try helps
            raise
        failure = err
    layers = None if failure else _layers(module)
    for options in _narrower(form):
        if not failure and layers <= LAYER_GOAL:
            break
        retry = original.clone()
        shape = with_options(head, "simt-form-blocks", **options)
        if not failure:     # only a schedule with fewer layers is worth finishing
            shape = with_options(shape, "tensor-schedule-layers", fewer_than=layers)
        try:
            run(retry, shape)
        except QgcError:
            continue
        if failure or _layers(retry) < layers:
            layers, failure = _layers(retry), None
            replace_contents(module, retry)
    if failure:
        raise failure
    if rest := passes[len(head):]:
        run_rest(module, rest)


def _narrower(form) -> list[dict[str, int]]:
    """The block shapes `fit_layers` tries after the first, in order."""
    return [{"max_products": 1},
            {"max_products": 1, "max_ops": max(1, form.max_ops // 2)}]


def _layers(module: builtin.ModuleOp) -> int:
    from qgc.dialects import tensor
    return max(p.limit("layers") or 0 for p in tensor.programs_of(module))


def replace_contents(module: builtin.ModuleOp, other: builtin.ModuleOp) -> None:
    """`module` holds what `other` holds (which is left empty)."""
    for op in list(module.ops):
        op.detach()
        op.erase()
    for op in list(other.ops):
        op.detach()
        module.body.block.add_op(op)


def _passes(pipeline: str | Passes) -> Passes:
    return pipeline if isinstance(pipeline, tuple) else parse_pipeline(pipeline).passes


def _run(ctx: Context, module: builtin.ModuleOp, passes: Passes, dumps: DumpOptions | None,
         timing: Timing | None, verify_each: bool) -> None:
    try:
        run_pipeline(ctx, module, PassPipeline(passes), dumps, timing, verify_each)
    except VerifyException as err:   # a pass left IR that does not verify
        raise QgcError(verify_diagnostic(module, err), status=2) from None
    except DiagnosticException as err:
        raise QgcError(at_op(None, str(err).strip()), status=2) from None


def print_ir(module: builtin.ModuleOp, stream: IO[str], debuginfo: bool = False) -> None:
    print_module(module, stream, debuginfo)
