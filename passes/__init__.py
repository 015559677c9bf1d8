"""qgc's passes, one file per pass, registered lazily by name (as xDSL does)."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _ptx_strip_debug_info() -> type[ModulePass]:
    from qgc.passes.ptx_strip_debug_info import PtxStripDebugInfoPass
    return PtxStripDebugInfoPass


def _ptx_remove_dead_functions() -> type[ModulePass]:
    from qgc.passes.ptx_remove_dead_functions import PtxRemoveDeadFunctionsPass
    return PtxRemoveDeadFunctionsPass


def _convert_ptx_to_simt() -> type[ModulePass]:
    from qgc.passes.convert_ptx_to_simt import ConvertPtxToSimtPass
    return ConvertPtxToSimtPass


def _simt_if_convert() -> type[ModulePass]:
    from qgc.passes.simt_if_convert import SimtIfConvertPass
    return SimtIfConvertPass


def _simt_form_blocks() -> type[ModulePass]:
    from qgc.passes.simt_form_blocks import SimtFormBlocksPass
    return SimtFormBlocksPass


def _simt_allocate_registers() -> type[ModulePass]:
    from qgc.passes.simt_allocate_registers import SimtAllocateRegistersPass
    return SimtAllocateRegistersPass


def _tensor_schedule_layers() -> type[ModulePass]:
    from qgc.passes.tensor_schedule_layers import TensorScheduleLayersPass
    return TensorScheduleLayersPass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name → factory of the pass class; importing a pass costs nothing until used."""
    return {
        "ptx-strip-debug-info": _ptx_strip_debug_info,
        "ptx-remove-dead-functions": _ptx_remove_dead_functions,
        "convert-ptx-to-simt": _convert_ptx_to_simt,
        "simt-if-convert": _simt_if_convert,
        "simt-form-blocks": _simt_form_blocks,
        "simt-allocate-registers": _simt_allocate_registers,
        "tensor-schedule-layers": _tensor_schedule_layers,
    }
