"""Margin analysis: static bounds of the MLP gate pre-activations of a
scheduled `tensor.program`, and the check that every gate stays exact in
float32 and bfloat16 (codegen refuses a program that fails it)."""

from __future__ import annotations

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
    ops = program.ops()
    if layer is not None:
        ops = [op for op in ops if getattr(op, "placed_layer", None) == layer]
    bounds = _Bounds()
    for op in ops:
        bounds.add(op)
    return bounds.margins()


def margins_by_layer(program: T.ProgramOp, n_layers: int) -> list[Margins]:
    """`margins(program, i)` for every layer i < n_layers, in one walk."""
    bounds = [_Bounds() for _ in range(n_layers)]
    for op in program.ops():
        layer = getattr(op, "placed_layer", None)
        if layer is not None and 0 <= layer < n_layers:
            bounds[layer].add(op)
    return [b.margins() for b in bounds]


class _Bounds:
    """Running bounds of the gates of some ops, as scaled integers: every gate
    form of a gadget is a multiple of 1/_SCALE."""

    def __init__(self) -> None:
        self.min_on, self.max_off, self.max_on = _NONE_ON, -_NONE_ON, 0
        self.kinds: dict[str, int] = {}

    def add(self, op) -> None:
        kinds = self.kinds
        if isinstance(op, T.ClearOp):        # G = b_old: exactly 0 or 1
            kinds["clear"] = kinds.get("clear", 0) + op.neuron_count()
            self.min_on, self.max_on = min(self.min_on, _SCALE), max(self.max_on, _SCALE)
            return
        if not isinstance(op, T.ThresholdOp):
            return
        for row in op.row_list():
            for _, part in row.parts:
                g = part.gadget()
                kinds[g.kind] = kinds.get(g.kind, 0) + 1
                min_on, max_off, max_on = _gadget_bounds(g)
                self.min_on = min(self.min_on, min_on)
                self.max_off = max(self.max_off, max_off)
                self.max_on = max(self.max_on, max_on)

    def margins(self) -> Margins:
        return Margins(Fraction(self.min_on, _SCALE), Fraction(self.max_off, _SCALE),
                       Fraction(self.max_on, _SCALE), self.kinds)


#: gate forms are multiples of 1/2 (`Gadget`); 4 leaves room
_SCALE = 4
#: "no neuron on" (and −: "no neuron off"), as the bounds start
_NONE_ON = 10 ** 9 * _SCALE


def _gadget_bounds(g) -> tuple[int, int, int]:
    """(smallest G > 0, largest G < 0, largest G) of gadget `g` over its
    integer range, times _SCALE; computed once per gadget (shared by equal rows)."""
    cached = g.__dict__.get("_scaled_bounds")
    if cached is None:
        min_on, max_off, max_on = _NONE_ON, -_NONE_ON, 0
        for _, slope, offset in g.neurons:
            s, o = _scaled(slope), _scaled(offset)
            # over integer L in [lo, hi], the smallest positive and largest negative G
            for L in (g.lo, g.hi, *_near_zero(s, o, g.lo, g.hi)):
                G = s * L + o
                if G > 0:
                    min_on, max_on = min(min_on, G), max(max_on, G)
                elif G < 0:
                    max_off = max(max_off, G)
        cached = (min_on, max_off, max_on)
        object.__setattr__(g, "_scaled_bounds", cached)
    return cached


def _scaled(value: Fraction) -> int:
    scaled = value * _SCALE
    if scaled.denominator != 1:
        raise CodegenError(f"a gate form of {value} is not a multiple of 1/{_SCALE}")
    return int(scaled)


def check_margins(program: T.ProgramOp, n_layers: int) -> None:
    """Every gate of every layer exact in float32 and bfloat16: G = 0 or
    |G| ≥ ½ (SiLU(256·G) is then exactly ReLU), and an active G ≤ 256 (the
    gadgets' bound for 8 significant bits); otherwise compilation stops,
    naming the layer."""
    for i, m in enumerate(margins_by_layer(program, n_layers)):
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


def _near_zero(slope: int, offset: int, lo: int, hi: int) -> list[int]:
    """The integers L in [lo, hi] around the root of slope·L + offset."""
    floor = -offset // slope
    ceil = -(offset // slope)
    return [L for L in (floor, ceil, floor - 1, ceil + 1) if lo <= L <= hi]
