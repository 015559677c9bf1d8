"""The simt -> tensor lowering: its circuits and the Lowering built from them."""
