"""Exact integer circuits of `tensor.threshold` ops (`Alu`): convert-simt-to-tensor's library."""
