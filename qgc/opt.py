"""`qgc-opt`: xDSL's opt driver with qgc's dialects, passes and PTX frontend.

Lit tests drive it as MLIR's tests drive `mlir-opt`: `qgc-opt FILE -p PASSES`,
`--split-input-file` (chunks between `// -----` lines, each on its own) and
`--verify-diagnostics` (each chunk's error must be the one its
`// expected-error {{...}}` comments announce). The input is `.mlir`, `.ptx`,
or the standard input (`-` or none), which is PTX when it starts with a PTX
directive and textual IR otherwise; `-f ptx|mlir` says which.
Diagnostics: `file:LINE:COL: error: ...` with the source line and a caret, or
`qgc-opt: error: ...` where no position exists; exit status 1, as mlir-opt.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.passes import PassPipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from qgc import __version__
from qgc.diagnostics import QgcError
from qgc.dialects import get_all_dialects
from qgc.passes import get_all_passes

#: What a chunk's failure raises: each is one diagnostic.
_CHUNK_ERRORS = (QgcError, DiagnosticException, ParseError)


def _parse_ptx_file(stream: IO[bytes]) -> ModuleOp:
    from qgc.frontend import parse_ptx
    name = getattr(stream, "name", "<stdin>")
    return parse_ptx(stream.read().decode(), name if isinstance(name, str) else "<stdin>")


_HELP = {
    "input_file": ".mlir or .ptx file; - or none: the standard input (PTX if it starts with "
                  "a PTX directive, else textual IR; -f ptx|mlir says which)",
    "verify_diagnostics": "check each chunk's errors against its `// expected-error "
                          "{{...}}` comments (as mlir-opt); exit 0 when they agree",
    "split_input_file": "process each chunk between `// -----` lines on its own",
}


class QgcOptMain(xDSLOptMain):
    version_format = f"qgc-opt {__version__} (xDSL {{xdsl_version}})"

    def register_all_dialects(self):
        self.ctx.load_dialect(Builtin)
        for name, factory in get_all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self):
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_frontends(self):
        super().register_all_frontends()
        self.available_frontends["ptx"] = _parse_ptx_file

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser):
        from qgc.dump_flags import add_dump_flags
        super().register_all_arguments(arg_parser)
        add_dump_flags(arg_parser)
        for action in arg_parser._actions:  # xDSL's words for what qgc-opt does otherwise
            action.help = _HELP.get(action.dest, action.help)

    def setup_pipeline(self):
        from qgc.dump_flags import dump_options
        from qgc.pipeline import parse_pipeline
        from qgc.timing import NoTiming, Timing
        if self.args.shrink:
            raise QgcError("error: --shrink (xdsl-opt's shrinkray hook) is not qgc-opt's", 1)
        self.dumps = dump_options(self.args)
        self.dumps.after_all |= self.args.print_between_passes
        self.timing = Timing() if self.args.time_passes else NoTiming()
        self.pipeline = parse_pipeline(self.args.passes) if self.args.passes else PassPipeline(())

    def run(self) -> int:
        """Each chunk parsed, verified, through the passes and printed; the
        status says whether every chunk did (or, verifying diagnostics,
        whether every chunk's diagnostics were the expected ones)."""
        from qgc.diagnostics import remember_source
        from qgc.expected_diagnostics import split_input
        name, text = self._read_input()
        kind = self._input_kind(name, text)
        remember_source(name, text)
        chunks = split_input(text) if self.args.split_input_file else [(0, text)]
        output = self.prepare_output()
        failed = False
        try:
            for index, (offset, chunk) in enumerate(chunks):
                if index:
                    output.write("// -----\n")
                failed |= not self._run_chunk(kind, name, offset, chunk, output)
                output.flush()
        finally:
            if output is not sys.stdout:
                output.close()
        if self.args.time_passes:
            self.timing.report(sys.stderr)
        return 1 if failed else 0

    def _run_chunk(self, kind: str, name: str, offset: int, chunk: str, output: IO[str]) -> bool:
        # the chunk padded to its place in the file: positions are the file's
        padded = "\n" * offset + chunk
        try:
            module = self._parse(kind, padded, name)
        except _CHUNK_ERRORS as err:
            if self.args.parsing_diagnostics:   # xdsl-opt's: the parse error is the output
                print(self._diagnostic(err), file=output)
                return True
            return self._check(padded, name, self._diagnostic(err))
        try:
            self._apply(module)
            output.write(self.output_resulting_program(module))
            produced = None
        except _CHUNK_ERRORS as err:
            produced = self._diagnostic(err)
        return self._check(padded, name, produced)

    def _check(self, chunk: str, name: str, produced: str | None) -> bool:
        """Print the chunk's diagnostic, or under --verify-diagnostics its
        mismatches with the expected ones; whether the chunk passes."""
        from qgc.expected_diagnostics import check_expected, expected_diagnostics
        if not self.args.verify_diagnostics:
            if produced is not None:
                print(produced, file=sys.stderr)
            return produced is None
        mismatches = check_expected(expected_diagnostics(chunk, name),
                                    [] if produced is None else [produced], name)
        for line in mismatches:
            print(line, file=sys.stderr)
        return not mismatches

    def _read_input(self) -> tuple[str, str]:
        from qgc import driver
        path = self.args.input_file or "-"
        try:
            text = driver.read_source(path)
        except QgcError as err:
            raise QgcError(str(err).removeprefix("error: "), 1) from None
        return (driver.STDIN_NAME if path == "-" else path), text

    def _input_kind(self, name: str, text: str) -> str:
        """`ptx` or `mlir` (by -f, the suffix, or for stdin the text), or
        another frontend xDSL registers that -f names."""
        from qgc import driver
        if self.args.frontend:
            return self.args.frontend
        path = "-" if name == driver.STDIN_NAME else name
        try:
            return driver.input_kind(path, text).removeprefix(".")
        except QgcError as err:
            raise QgcError(str(err).removeprefix("error: ").removesuffix(")")
                           + "; -f ptx|mlir says which)", 1) from None

    def _parse(self, kind: str, text: str, name: str) -> ModuleOp:
        if kind == "ptx":
            from qgc.frontend import parse_ptx
            module = parse_ptx(text, name)
        elif kind == "mlir":
            from qgc.frontend.mlir import parse_mlir
            module = parse_mlir(self.ctx, text, name)
        else:    # another of xDSL's frontends
            import io
            module = self.parse_chunk(io.BytesIO(text.encode()), kind)
        return module

    def _apply(self, module: ModuleOp) -> None:
        """Verify the module as parsed, then run the passes (each verified)."""
        from qgc import driver
        if not self.args.disable_verify:
            driver.verify(module)
        driver.apply(self.ctx, module, self.pipeline.passes, self.dumps, self.timing,
                     verify_each=True)   # as mlir-opt: after every pass

    @staticmethod
    def _diagnostic(err: Exception) -> str:
        """`err` as one diagnostic: `file:L:C: error: ...` and its snippet, or `error: ...`."""
        from qgc.diagnostics import at_op
        if isinstance(err, ParseError):
            where = err.span.get_location()
            return at_op(None, f"{where}: error: {err.msg}")
        return at_op(None, str(err).strip())


DESCRIPTION = ("qgc's modular optimizer driver: parse, verify, run passes (-p), print. "
               "Diagnostics: file:LINE:COL: error: ... on stderr, exit status 1.")


def main(args: Sequence[str] | None = None) -> int:
    try:
        return QgcOptMain(DESCRIPTION, args=args).run()
    except QgcError as err:
        print(f"qgc-opt: {_unlocated(str(err))}", file=sys.stderr)
        return 1
    except (Exception, ArgSpecParseError) as err:  # xDSL's own errors, no traceback
        print(f"qgc-opt: {_unlocated(str(err))}", file=sys.stderr)
        return 1


def _unlocated(message: str) -> str:
    return message if message.startswith("error: ") else f"error: {message}"


if __name__ == "__main__":
    sys.exit(main())
