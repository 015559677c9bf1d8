"""qgc: compile CUDA kernels (as PTX) into Qwen3.5 decoder layers that run them exactly."""

__version__ = "0.1.0"


def __getattr__(name: str):
    """`qgc.prompt_ids` (qgc/merged_model.py), imported on first use: it needs torch."""
    if name == "prompt_ids":
        from qgc.merged_model import prompt_ids
        return prompt_ids
    raise AttributeError(f"module 'qgc' has no attribute {name!r}")
