"""qgc's passes, one file per pass, registered lazily by name (as xDSL does)."""

from collections.abc import Callable
from importlib import import_module

from xdsl.passes import ModulePass

#: pass name → (module under qgc.passes, class)
_PASSES = {
    "ptx-strip-debug-info": ("ptx_strip_debug_info", "PtxStripDebugInfoPass"),
    "ptx-remove-dead-functions": ("ptx_remove_dead_functions", "PtxRemoveDeadFunctionsPass"),
    "ptx-lower-barrier-reductions": ("ptx_lower_barrier_reductions",
                                     "PtxLowerBarrierReductionsPass"),
    "ptx-expand-wide-divrem": ("ptx_expand_wide_divrem", "PtxExpandWideDivremPass"),
    "ptx-expand-f64-atomics": ("ptx_expand_f64_atomics", "PtxExpandF64AtomicsPass"),
    "convert-ptx-to-simt": ("convert_ptx_to_simt", "ConvertPtxToSimtPass"),
    "simt-if-convert": ("simt_if_convert", "SimtIfConvertPass"),
    "simt-rename-webs": ("simt_rename_webs", "SimtRenameWebsPass"),
    "simt-cse": ("simt_cse", "SimtCsePass"),
    "simt-expand-divrem": ("simt_expand_divrem", "SimtExpandDivremPass"),
    "simt-expand-float": ("simt_expand_float", "SimtExpandFloatPass"),
    "simt-layout-memory": ("simt_layout_memory", "SimtLayoutMemoryPass"),
    "simt-form-blocks": ("simt_form_blocks", "SimtFormBlocksPass"),
    "simt-allocate-registers": ("simt_allocate_registers", "SimtAllocateRegistersPass"),
    "convert-simt-to-tensor": ("convert_simt_to_tensor", "ConvertSimtToTensorPass"),
    "tensor-split-thresholds": ("tensor_split_thresholds", "TensorSplitThresholdsPass"),
    "tensor-schedule-layers": ("tensor_schedule_layers", "TensorScheduleLayersPass"),
    "convert-tensor-to-weights": ("convert_tensor_to_weights", "ConvertTensorToWeightsPass"),
}


def _factory(module: str, cls: str) -> Callable[[], type[ModulePass]]:
    return lambda: getattr(import_module(f"qgc.passes.{module}"), cls)


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Pass name → factory of the pass class; importing a pass costs nothing until used."""
    return {name: _factory(*where) for name, where in _PASSES.items()}
