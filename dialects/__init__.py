"""qgc's dialects, one file per dialect, registered lazily by name."""

from collections.abc import Callable

from xdsl.ir import Dialect


def _ptx() -> Dialect:
    from qgc.dialects.ptx import PTX
    return PTX


def _simt() -> Dialect:
    from qgc.dialects.simt import SIMT
    return SIMT


def _tensor() -> Dialect:
    from qgc.dialects.tensor import TENSOR
    return TENSOR


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Dialect name → factory. Only qgc's own dialects and `builtin`: xDSL's
    upstream `tensor` dialect must never load beside qgc's `tensor`."""
    return {"ptx": _ptx, "simt": _simt, "tensor": _tensor}
