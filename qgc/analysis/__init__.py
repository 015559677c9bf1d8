"""Analyses over the machine's IR, shared by the passes (as xDSL's `analysis/`):
`dataflow` holds the per-lane data-flow analyses of `simt` kernels."""
