"""`qgc KERNEL.ptx -o layers.safetensors`: the module's `weights.model` (made
by `convert-tensor-to-weights`, the `weights` stage's last pass) written by
runtime/layers_file.py. No torch: the config is read as JSON
(qgc/base_config.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xdsl.dialects import builtin

from qgc.base_config import TextConfig, default_config_path, read_text_config
from qgc.diagnostics import QgcError
from qgc.dialects import weights as W
from qgc.passes import convert_tensor_to_weights as lower
from qgc.passes.tensor_to_weights import CodegenError
from qgc.runtime.layers_file import write_layers

__all__ = ["TextConfig", "compiled_machine", "default_config_path", "read_text_config",
           "write_compiled"]


def compiled_machine(module: builtin.ModuleOp, config: Any):
    """(CompiledProgram, readout layer, vocabulary, simt kernel) of the module."""
    try:
        return lower.compiled_machine(module, config)
    except CodegenError as err:
        raise QgcError(f"error: {err}", 2) from None


def write_compiled(module: builtin.ModuleOp, path: str | Path,
                   config_path: str | Path | None = None) -> int:
    """Write the module's `weights.model` (the `weights` stage's output)."""
    (model,) = W.models_of(module)
    return write_layers(path, model, read_text_config(config_path))
