"""qgc's passes, one file per pass, registered lazily by name (as xDSL does)."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _ptx_strip_debug_info() -> type[ModulePass]:
    from qgc.passes.ptx_strip_debug_info import PtxStripDebugInfoPass
    return PtxStripDebugInfoPass


def _ptx_remove_dead_functions() -> type[ModulePass]:
    from qgc.passes.ptx_remove_dead_functions import PtxRemoveDeadFunctionsPass
    return PtxRemoveDeadFunctionsPass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name → factory of the pass class; importing a pass costs nothing until used."""
    return {
        "ptx-strip-debug-info": _ptx_strip_debug_info,
        "ptx-remove-dead-functions": _ptx_remove_dead_functions,
    }
