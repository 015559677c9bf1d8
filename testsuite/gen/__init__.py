"""Random PTX programs for differential testing (DESIGN §2), with a numpy oracle."""

from testsuite.gen.ptxgen import FAMILIES, GeneratedProgram, programs, run_oracle

__all__ = ["FAMILIES", "GeneratedProgram", "programs", "run_oracle"]
