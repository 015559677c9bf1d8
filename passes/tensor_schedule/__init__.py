"""Helpers of the `tensor-schedule-layers` pass (`passes/tensor_schedule_layers.py`)."""
