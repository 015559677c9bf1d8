"""Margin analysis: static bounds of the MLP gate pre-activations of a
scheduled `tensor.program`, and the check that every gate stays exact in
float32 and bfloat16 (codegen refuses a program that fails it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from qgc.dialects import tensor as T
from qgc.passes.tensor_to_weights.sparse import CodegenError


@dataclass(frozen=True)
class Margins:
    """Static bounds of the MLP gate pre-activations (in units of G, gate/256)."""

    min_active: Fraction      # smallest G of a neuron that is on
    max_inactive: Fraction    # largest G < 0 of a neuron that is off
    max_active: Fraction      # largest G of a neuron that is on (≤ 255: exact in bf16)
    kinds: dict[str, int]     # gadget kind → rows


def margins(program: T.ProgramOp, layer: int | None = None) -> Margins:
    """Interval bounds over every possible input: G = slope·L + offset with L
    integer in the row's range; a neuron with G ≤ −½ or G = 0 outputs exactly 0.
    `layer`: only the thresholds placed in that layer's MLP half."""
    min_on, max_off, max_on = Fraction(10 ** 9), Fraction(-(10 ** 9)), Fraction(0)
    kinds: dict[str, int] = {}
    for op in program.ops():
        if layer is not None and getattr(op, "placed_layer", None) != layer:
            continue
        if isinstance(op, T.ClearOp):        # G = b_old: exactly 0 or 1
            kinds["clear"] = kinds.get("clear", 0) + op.neuron_count()
            min_on, max_on = min(min_on, Fraction(1)), max(max_on, Fraction(1))
            continue
        if not isinstance(op, T.ThresholdOp):
            continue
        for g in (part.gadget() for row in op.row_list() for _, part in row.parts):
            kinds[g.kind] = kinds.get(g.kind, 0) + 1
            for _, slope, offset in g.neurons:
                # over integer L in [lo, hi], the smallest positive and largest negative G
                for L in (g.lo, g.hi, *_near_zero(slope, offset, g.lo, g.hi)):
                    G = slope * L + offset
                    if G > 0:
                        min_on = min(min_on, G)
                        max_on = max(max_on, G)
                    elif G < 0:
                        max_off = max(max_off, G)
    return Margins(min_on, max_off, max_on, kinds)


def check_margins(program: T.ProgramOp, n_layers: int) -> None:
    """Every gate of every layer exact in float32 and bfloat16: G = 0 or
    |G| ≥ ½ (SiLU(256·G) is then exactly ReLU), and an active G ≤ 256 (the
    gadgets' bound for 8 significant bits); otherwise compilation stops,
    naming the layer."""
    for i in range(n_layers):
        m = margins(program, i)
        margin = gate_margin(m)
        if margin is not None and margin < Fraction(1, 2):
            raise CodegenError(f"layer {i} of tensor program '{program.program_name}': a gate "
                               f"pre-activation reaches |G| = {margin}, inside the margin of "
                               "1/2 that keeps SiLU exact (only G = 0 or |G| ≥ 1/2 are)")
        if m.max_active > T.MAX_ACTIVE_GATE:
            raise CodegenError(f"layer {i} of tensor program '{program.program_name}': an "
                               f"active gate reaches G = {m.max_active}, more than the "
                               f"{T.MAX_ACTIVE_GATE} units bfloat16 keeps exact")


def gate_margin(m: Margins) -> Fraction | None:
    """How far the gates of `m` stay from 0 on either side, in units of G: a
    neuron is exact (SiLU(256·G)/256 = ReLU(G)) when |G| ≥ ½ or G = 0; None
    when no neuron is on or off."""
    sides = [v for v in (m.min_active, -m.max_inactive) if abs(v) < 10 ** 9]
    return min(sides) if sides else None


def _near_zero(slope: Fraction, offset: Fraction, lo: int, hi: int) -> list[int]:
    root = -offset / slope
    return [L for L in (math.floor(root), math.ceil(root), math.floor(root) - 1,
                        math.ceil(root) + 1) if lo <= L <= hi]
