"""qgc: compile CUDA kernels (as PTX) into Qwen3.5 decoder layers that run them exactly."""

__version__ = "0.1.0"
