"""`qgc-opt`: xDSL's opt driver with qgc's dialects, passes and PTX frontend.

Lit tests drive it as MLIR's tests drive `mlir-opt`: `qgc-opt FILE -p PASSES`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.utils.exceptions import ArgSpecParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from qgc import __version__
from qgc.dialects import get_all_dialects
from qgc.passes import get_all_passes


def _parse_ptx_file(stream: IO[bytes]) -> ModuleOp:
    from qgc.frontend import parse_ptx
    name = getattr(stream, "name", "<stdin>")
    return parse_ptx(stream.read().decode(), name if isinstance(name, str) else "<stdin>")


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


def main(args: Sequence[str] | None = None) -> int:
    from qgc.diagnostics import QgcError
    try:
        QgcOptMain(args=args).run()
    except QgcError as err:
        print(str(err), file=sys.stderr)
        return err.status
    except (Exception, ArgSpecParseError) as err:  # parse, verify and pipeline errors:
        message = str(err).removeprefix("error: ")
        print(f"qgc-opt: error: {message}", file=sys.stderr)  # one message, no traceback
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
