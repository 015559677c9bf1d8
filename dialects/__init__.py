"""qgc's dialects, one file per dialect, registered lazily by name."""

from collections.abc import Callable
from importlib import import_module

from xdsl.ir import Dialect

#: dialect name → the module under qgc.dialects and its Dialect object
_DIALECTS = {"ptx": ("ptx", "PTX"), "simt": ("simt", "SIMT"), "tensor": ("tensor", "TENSOR"),
             "weights": ("weights", "WEIGHTS")}


def _factory(module: str, name: str) -> Callable[[], Dialect]:
    return lambda: getattr(import_module(f"qgc.dialects.{module}"), name)


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Dialect name → factory. Only qgc's own dialects and `builtin`: xDSL's
    upstream `tensor` dialect must never load beside qgc's `tensor`."""
    return {name: _factory(*where) for name, where in _DIALECTS.items()}
