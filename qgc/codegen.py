"""`qgc KERNEL.ptx -o layers.safetensors`: the scheduled step program as
layer weights for a Qwen3.5 text config (runtime/tensor_codegen.py), plus the
readout layer (runtime/readout.py), written compactly (runtime/layers_file.py).
No torch: the config is read as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from xdsl.dialects import builtin

from qgc.diagnostics import QgcError

SHARED_CONFIG = "qwen3_5_2b_text_config.json"


def default_config_path() -> Path:
    import os
    shared = os.environ.get("QGC_SHARED")
    root = Path(shared) if shared else Path(__file__).resolve().parents[2] / "shared"
    return root / SHARED_CONFIG


class TextConfig(SimpleNamespace):
    """A Qwen3.5 text config read from JSON (what codegen needs of it)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def read_text_config(path: str | Path | None = None) -> TextConfig:
    path = Path(path) if path is not None else default_config_path()
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise QgcError(f"error: cannot read the base config '{path}': {err}", 2) from None
    data = data.get("text_config", data)
    data.setdefault("hidden_act", "silu")
    return TextConfig(**data)


def schedule_options(config: TextConfig) -> str:
    return (f"tensor-schedule-layers{{hidden={config.hidden_size} "
            f"intermediate={config.intermediate_size} heads={config.linear_num_value_heads}}}")


def compiled_machine(module: builtin.ModuleOp, config: TextConfig):
    """(CompiledProgram, readout layer, vocabulary, simt kernel) of the module."""
    from qgc.dialects import simt, tensor
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.runtime.readout import readout_layer
    from qgc.runtime.tensor_codegen import CodegenError, compile_program
    programs = tensor.programs_of(module)
    kernels = simt.kernels_of(module)
    if len(programs) != 1 or len(kernels) != 1:
        raise QgcError("error: code generation takes one kernel (one simt.kernel and its "
                       "tensor.program)", 2)
    try:
        compiled = compile_program(programs[0], config)
    except CodegenError as err:
        raise QgcError(f"error: {err}", 2) from None
    return compiled, readout_layer(compiled), vocabulary_of(programs[0]), kernels[0]


def write_compiled(module: builtin.ModuleOp, path: str | Path,
                   config_path: str | Path | None = None) -> int:
    from qgc.runtime.checkpoint import kernel_fingerprint
    from qgc.runtime.layers_file import write_layers
    config = read_text_config(config_path)
    compiled, readout, vocab, kernel = compiled_machine(module, config)
    machine = {name: kernel.limit(name) for name in kernel.LIMIT_PROPS}
    machine.update(lanes=kernel.lanes.value.data, mem_words=kernel.mem_words.value.data,
                   layers=len(compiled.layers) + 1, fingerprint=kernel_fingerprint(kernel))
    gpu_rows = [compiled.encode(vocab.inputs(t)) for t in vocab.tokens()]
    return write_layers(path, [*compiled.layers, readout], config, kernel.kernel_name,
                        machine, vocab, np.array(gpu_rows, dtype=np.float32))
