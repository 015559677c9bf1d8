"""Load a kernel (PTX or textual IR), run pipelines on it, print it."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

from qgc import protocol
from qgc.context import make_context
from qgc.diagnostics import QgcError, with_snippet
from qgc.machine.abi import banked_words, memory_layout, pick_kernel
from qgc.pipeline import (
    DumpOptions,
    Passes,
    from_pass,
    has_pass,
    parse_pipeline,
    print_module,
    run_pipeline,
    up_to,
    with_options,
)
from qgc.timing import Timing


def read_source(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        raise QgcError(f"error: cannot read '{path}': {err.strerror}", status=2) from None
    except UnicodeDecodeError:
        raise QgcError(f"error: '{path}' is not a text file", status=2) from None


def load(path: str) -> tuple[Context, builtin.ModuleOp]:
    """Parse a `.ptx` file with the PTX frontend, anything else as textual IR."""
    text = read_source(path)
    ctx = make_context()
    if path.endswith(".ptx"):
        from qgc.frontend import parse_ptx
        module = parse_ptx(text, path)
    else:
        module = parse_ir(ctx, text, path)
    verify(module, text)
    return ctx, module


def parse_ir(ctx: Context, text: str, path: str) -> builtin.ModuleOp:
    from xdsl.parser import Parser
    try:
        return Parser(ctx, text, path).parse_module()
    except ParseError as err:
        raise QgcError(str(err), status=2) from None


def verify(module: builtin.ModuleOp, source: str | None = None) -> None:
    try:
        module.verify()
    except VerifyException as err:
        raise QgcError(with_snippet(str(err).splitlines()[0] if str(err) else "error: "
                                    "verification failed", source), status=2) from None


def apply(ctx: Context, module: builtin.ModuleOp, pipeline: str | Passes,
          dumps: DumpOptions | None = None, timing: Timing | None = None) -> None:
    """Run `pipeline` (passes, or their text as `-p` takes it) on `module`."""
    passes = PassPipeline(pipeline) if isinstance(pipeline, tuple) else parse_pipeline(pipeline)
    try:
        run_pipeline(ctx, module, passes, dumps, timing)
    except (VerifyException, DiagnosticException) as err:
        raise QgcError(with_snippet(str(err)), status=2) from None


def apply_for_launch(ctx: Context, module: builtin.ModuleOp, pipeline: str | Passes,
                     launch, dumps: DumpOptions | None = None,
                     timing: Timing | None = None) -> None:
    """Apply `pipeline` (through `convert-ptx-to-simt`) with the machine
    memory `launch` needs: the machine passes run with all the memory the
    tensor level holds, then the launched kernel keeps the fewest memory banks
    that hold the launch's words (the rest of `pipeline` lowers it)."""
    passes = pipeline if isinstance(pipeline, tuple) else parse_pipeline(pipeline).passes
    machine = up_to(passes, "convert-simt-to-tensor")
    if not has_pass(machine, "convert-ptx-to-simt"):
        apply(ctx, module, passes, dumps, timing)
        return
    apply(ctx, module, with_options(machine, "convert-ptx-to-simt",
                                    mem_words=protocol.MAX_MEMORY_WORDS), dumps, timing)
    kernel = pick_kernel(module, launch.kernel)    # a launch past 508 words is refused here
    kernel.set_limit("mem_words", banked_words(memory_layout(kernel, launch).total))
    if rest := from_pass(passes, "convert-simt-to-tensor"):
        apply(ctx, module, rest, dumps, timing)


def print_ir(module: builtin.ModuleOp, stream: IO[str], debuginfo: bool = False) -> None:
    print_module(module, stream, debuginfo)
