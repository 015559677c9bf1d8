"""Coordinate reuse in `tensor-schedule-layers` (docs/machine.md, "The tensor
level (core)"): a threshold output may overwrite a coordinate whose bit is dead
by its MLP half (`overwrites`, one copy neuron per bit), so programs whose bits
outnumber `hidden` fit as long as their live bits do.

- a chain of four 4-lane 32-bit adds (a + 4b, through a memory round trip of
  64 bits) at hidden 1024: 2272 bits in all, schedules with reuse, and its
  weights run through stock `Qwen3_5DecoderLayer` modules in float32 and
  bfloat16 bit for bit like the ideal engine, sum(h²) = 64·hidden after every
  half-layer; thresholds overwrite kv_read and input coordinates;
- the lifetime verifier: an overwrite before the last read, of an output, of
  nothing, an unmarked or non-threshold sharer are refused.
"""

from __future__ import annotations

import io
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from conftest import SHARED_KERNELS, needs_shared_kernels
from qgc.dialects import tensor as T
from qgc.passes.tensor_schedule_layers import peak_live, schedule
from qgc.passes.tensor_to_weights import compile_program, margins
from qgc.runtime.tensor_engine import from_bits, run_tensor, to_bits

torch = pytest.importorskip("torch")

from test_tensor_core import (  # noqa: E402
    DTYPES,
    EDGE,
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    MASK,
    StockRun,
    add32x4_of,
    check_outputs,
    small_config,
)

ADDS = 4


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def add_chain() -> T.ProgramOp:
    """s = a + 4·b per 32-bit lane as four chained adds; the first sum's low
    64 bits go through a memory (written and read by the same token)."""
    bld = T.ProgramBuilder("add_chain")
    a, b, key = bld.input("a", 128), bld.input("b", 128), bld.input("key", 1)
    s = add32x4_of(bld, a, b)
    bld.memory("m", 2, 64)
    bld.kv_write("m", "binary", key, bld.slice(s, 0, 64))
    r = bld.kv_read("m", "binary", key)
    s = bld.concat([r, bld.slice(s, 64, 128)])
    for _ in range(ADDS - 1):
        s = add32x4_of(bld, s, b)
    bld.output("s", s)
    return bld.program


def bit_counts(program: T.ProgramOp) -> tuple[int, int]:
    """(peak of live bits, total bits) of a scheduled program."""
    reads = T.bit_reads(program)
    intervals, total = [], 0
    for op in program.ops():
        if isinstance(op, T.InputOp | T.KvReadOp | T.ThresholdOp):
            birth = T.birth_half(op)
            for c in T.coords_of(op.coords.get_values()):  # type: ignore[union-attr]
                intervals.append((birth, max(reads.get((op, c), birth), birth + 1)))
                total += 1
    return peak_live(intervals), total


def coords(op) -> set[int]:
    return set(T.coords_of(op.coords.get_values()))


def text_of(op) -> str:
    from xdsl.printer import Printer
    out = io.StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


@pytest.fixture(scope="module")
def chain():
    program = add_chain()
    program.verify()
    schedule(program, HIDDEN, INTERMEDIATE, HEADS)
    program.verify()
    return program


def test_chain_fits_only_with_reuse(chain):
    peak, total = bit_counts(chain)
    used = {c for op in chain.ops() if isinstance(op, T.InputOp | T.KvReadOp | T.ThresholdOp)
            for c in coords(op)}
    print(f"\nadd chain ({ADDS} × add32x4): {total} bits, peak {peak} live, "
          f"{len(used)} bit coordinates, {len(chain.pads())} pads, "
          f"{chain.limit('layers')} layers")
    assert total > HIDDEN > peak
    assert len(used) == peak            # greedy reuse reaches the peak here
    reads = [c for op in chain.ops() if isinstance(op, T.KvReadOp) for c in coords(op)]
    inputs = {c for op in chain.inputs() for c in coords(op)}
    over = {c for op in chain.ops() if isinstance(op, T.ThresholdOp)
            for c in op.overwritten_coords()}
    assert set(reads) & over, "no threshold overwrites a kv_read coordinate"
    assert inputs & over, "no threshold overwrites an input coordinate"
    cleared = {c for op in chain.ops() if isinstance(op, T.ClearOp) for c in op.cleared_coords()}
    assert set(reads) <= cleared, "the read does not land on cleared coordinates"
    for op in chain.ops():
        if isinstance(op, T.ThresholdOp):
            assert op.neuron_count() == op.gadget_neuron_count() + len(op.overwritten_coords())


def test_chain_below_its_peak_does_not_fit(chain):
    peak, total = bit_counts(chain)
    assert 1 + total > HIDDEN
    with pytest.raises(DiagnosticException, match=rf"needs \d+ residual coordinates \(\d+ for the "
                                                  rf"flag and bits, of which at most {peak} bits "
                                                  rf"live at once, \d+ pads\), the layers have "
                                                  rf"hidden {peak}"):
        schedule(add_chain(), peak, INTERMEDIATE, HEADS)


def test_schedule_keeps_the_budget_with_the_fewest_layers(monkeypatch):
    """Where no budget meets the layer goal, the fitting schedule with the
    fewest layers stays, whichever budget came first."""
    import qgc.passes.tensor_schedule_layers as S

    def layers_with(budgets) -> int:
        monkeypatch.setattr(S, "_BUDGETS", budgets)
        program = add_chain()
        schedule(program, HIDDEN, INTERMEDIATE, HEADS)
        return program.limit("layers")

    tight, loose = S._Budget(40), S._Budget(900)
    alone = {b: layers_with((b,)) for b in (tight, loose)}
    monkeypatch.setattr(S, "LAYER_GOAL", 0)
    for order in ((tight, loose), (loose, tight)):
        assert layers_with(order) == min(alone.values())


def test_a_layer_bound_keeps_the_schedule_or_refuses(monkeypatch):
    """`fewer_than`: a bound above the schedule's layer count leaves the
    schedule as it was, every budget included (each later budget is bounded
    by the best before it too); one at its count has no schedule, said so."""
    import qgc.passes.tensor_schedule_layers as S
    monkeypatch.setattr(S, "LAYER_GOAL", 0)        # every budget runs
    free = add_chain()
    schedule(free, HIDDEN, INTERMEDIATE, HEADS)
    layers = free.limit("layers")
    bounded = add_chain()
    schedule(bounded, HIDDEN, INTERMEDIATE, HEADS, fewer_than=layers + 1)
    assert text_of(bounded) == text_of(free)
    with pytest.raises(DiagnosticException, match=f"no schedule of fewer than {layers} layers"):
        schedule(add_chain(), HIDDEN, INTERMEDIATE, HEADS, fewer_than=layers)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from([None, 0, 1, 2, 3]),
                                st.integers(-3, 6)), min_size=1, max_size=8))
def test_the_budget_check_is_the_scan_of_every_group(deltas):
    """`_Placement._within` ranks the groups once per placement; it answers
    as a scan of every group would, placement after placement."""
    import qgc.passes.tensor_schedule_layers as S
    placer = object.__new__(S._Placement)
    placer.budget, placer._ranked = 6, None
    live: dict = {None: 0}
    for delta in deltas:
        groups = (set(live) | set(delta)) - {None}
        worst = max((live.get(g, 0) + delta.get(g, 0) for g in groups), default=0)
        want = live.get(None, 0) + delta.get(None, 0) + worst <= 6
        assert placer._within(live, delta) == want
        for g, d in delta.items():          # placed: as `_take` counts it
            live[g] = live.get(g, 0) + d
        placer._ranked = None


def test_chain_roundtrip_and_reschedule(ctx, chain):
    from xdsl.parser import Parser
    text = text_of(chain)
    assert " overwrites [" in text
    parsed = Parser(ctx, text).parse_op()
    parsed.verify()
    assert text_of(parsed) == text
    again = add_chain()
    schedule(again, HIDDEN, INTERMEDIATE, HEADS)
    schedule(again, HIDDEN, INTERMEDIATE, HEADS)   # rescheduling strips `overwrites`
    assert text_of(again) == text


@pytest.fixture(scope="module")
def compiled(chain):
    return compile_program(chain, small_config())


def test_chain_codegen(compiled):
    m = margins(compiled.program)
    assert m.min_active >= 0.5 and m.max_active <= 255
    layers = compiled.program.limit("layers")
    assert len(compiled.usage.neurons) == layers
    assert compiled.usage.coords <= HIDDEN
    print(f"\nadd chain: neurons per layer {compiled.usage.neurons}, "
          f"{compiled.usage.coords} coordinates")


def test_a_narrowed_constant_is_caught(chain, monkeypatch):
    """The margin check: a restoring gadget whose second kink is narrowed from
    ½ to ¼ below an integer (G = ¼ on the active side: SiLU(64)/256 is not
    ¼) stops codegen, naming the layer and the gate value."""
    import dataclasses
    from fractions import Fraction

    from qgc.passes.tensor_to_weights import CodegenError
    exact = T.ThresholdRow.gadget

    def narrowed(row):
        g = exact(row)
        if g.kind != "restoring":
            return g
        (s0, k0, c0), (s1, k1, c1) = g.neurons
        return dataclasses.replace(g, neurons=((s0, k0, c0), (s1, k1, c1 - Fraction(1, 4))))
    monkeypatch.setattr(T.ThresholdRow, "gadget", narrowed)
    with pytest.raises(CodegenError, match=r"layer \d+ of tensor program .*\|G\| = 1/4, inside "
                       r"the margin of 1/2"):
        compile_program(chain, small_config())


@pytest.mark.parametrize("dtype", DTYPES)
def test_chain_stock(compiled, dtype):
    rng = random.Random(11)
    pairs = [(x, y) for x in EDGE[:8] for y in EDGE] + \
        [(rng.randrange(MASK + 1), rng.randrange(MASK + 1)) for _ in range(24)]
    pairs += [(0, 0)] * (-len(pairs) % 4)
    tokens, expected = [], []
    for t in range(0, len(pairs), 4):
        lanes = pairs[t:t + 4]
        inputs = {"a": [bit for x, _ in lanes for bit in to_bits(x, 32)],
                  "b": [bit for _, y in lanes for bit in to_bits(y, 32)],
                  "key": [rng.randrange(2)]}
        out, _ = run_tensor(compiled.program, inputs)
        for lane, (x, y) in enumerate(lanes):
            assert from_bits(out["s"][32 * lane:32 * lane + 32]) == (x + ADDS * y) & MASK
        tokens.append(compiled.encode(inputs))
        expected.append(out)
    run = StockRun(compiled, dtype)
    h_out = run.prefill(torch.tensor(tokens, dtype=torch.float64))
    check_outputs(compiled, h_out, expected)
    assert run.min_active >= 0.5 and run.max_inactive <= -0.5
    assert run.halves_checked == 1 + 2 * compiled.program.limit("layers")
    print("\n" + run.report(f"add chain, {len(pairs)} lane-adds"))


# ----------------------------------------------------------------- the verifier

def small_scheduled() -> T.ProgramOp:
    """%b and %a's second bit are read only by %and in mlp 0, which overwrites
    the lowest two of them; %x (mlp 1) overwrites the key, the bit that died
    first (read last by the memory in attn 1)."""
    bld = T.ProgramBuilder("p")
    a, b = bld.input("a", 2), bld.input("b", 2)
    k = bld.input("key", 1)
    and_ = bld.threshold([a, b], [({0: 1, 2: 1}, 2), ({1: 1, 3: 1}, 2)])
    bld.memory("m", 2, 2)
    bld.kv_write("m", "binary", k, and_)
    r = bld.kv_read("m", "binary", k)
    x = bld.threshold([r, a], [({0: 1, 1: 1, 2: 1}, 2)])
    bld.output("x", x)
    bld.output("and", and_)
    schedule(bld.program, 64, 8, 1)
    bld.program.verify()
    return bld.program


def ops_of(program):
    th = [op for op in program.ops() if isinstance(op, T.ThresholdOp)]
    return th, program.inputs(), [op for op in program.ops() if isinstance(op, T.KvReadOp)]


def test_small_schedule_reuses():
    program = small_scheduled()
    (and_, x), (a, b, key), (r,) = ops_of(program)
    assert coords(and_) == {max(coords(a)), min(coords(b))} == set(and_.overwritten_coords())
    assert coords(x) == coords(key) == set(x.overwritten_coords())
    assert and_.neuron_count() == 4 and x.neuron_count() == 3
    compile_program(program, small_config(hidden_size=64, intermediate_size=8))


def _set(op, name, values):
    op.properties[name] = T.i64_array(T.ranges_of(sorted(values)))


def test_verifier_refuses_unmarked_sharing():
    program = small_scheduled()
    (and_, _), _, _ = ops_of(program)
    del and_.properties["overwrites"]
    and_.properties["neurons"] = T.i64_array([1, 3])
    with pytest.raises(VerifyException, match=r"tensor.threshold .* and input 'a' share "
                                              r"coordinate 2"):
        program.verify()


def test_verifier_refuses_overwrite_before_last_read():
    program = small_scheduled()
    (_, x), (a, _, _), _ = ops_of(program)
    # %x (mlp 1) onto %a's second coordinate is fine, it reads %a itself; onto
    # the key (read in attn 1, before mlp 1) too; but %and is read by the
    # kv_write in attn 1 and is an output, so it lives to the end
    and_c = min(coords(ops_of(program)[0][0]))
    _set(x, "coords", [and_c])
    _set(x, "overwrites", [and_c])
    with pytest.raises(VerifyException, match=r"overwrites coordinate \d+ in half 3, but "
                                              r"tensor.threshold .* is read there until the "
                                              r"end \(an output\)"):
        program.verify()


def test_verifier_refuses_overwrite_of_a_later_read():
    bld = T.ProgramBuilder("q")
    a = bld.input("a", 1)
    t1 = bld.threshold([a], [({0: 1}, 1)])
    t2 = bld.threshold([t1], [({0: 1}, 1)])
    t3 = bld.threshold([t2, a], [({0: 1, 1: 1}, 2)])
    bld.output("t", t3)
    schedule(bld.program, 64, 8, 1)
    bld.program.verify()
    (a_op,) = bld.program.inputs()
    t2_op = t2.owner
    _set(t2_op, "coords", coords(a_op))        # %a is still read by t3, in mlp 2
    _set(t2_op, "overwrites", coords(a_op))
    t2_op.properties["neurons"] = T.i64_array([1, 3])
    with pytest.raises(VerifyException, match=r"in half 3, but input 'a' is read there until "
                                              r"half 5"):
        bld.program.verify()


def test_verifier_refuses_overwriting_nothing():
    program = small_scheduled()
    (and_, _), _, _ = ops_of(program)
    free = max(op.coord.value.data for op in program.pads()) + 1
    _set(and_, "coords", [free, free + 1])
    _set(and_, "overwrites", [free, free + 1])
    with pytest.raises(VerifyException, match=r"overwrites coordinate \d+, which holds no "
                                              r"earlier bit"):
        program.verify()


def test_verifier_refuses_kv_read_and_pad_sharing():
    program = small_scheduled()
    (_, x), _, (r,) = ops_of(program)
    _set(r, "coords", coords(x) | {max(coords(x)) + 1})     # on %a, which x overwrites
    with pytest.raises(VerifyException, match=r"share coordinate"):
        program.verify()
    program = small_scheduled()
    (and_, _), _, _ = ops_of(program)
    pad = program.pads()[0].coord.value.data
    _set(and_, "coords", [pad, pad + 1])
    _set(and_, "overwrites", [pad, pad + 1])
    with pytest.raises(VerifyException, match=rf"tensor.pad {pad} and .* share coordinate|"
                                              rf"and tensor.pad {pad} share coordinate"):
        program.verify()


def test_overwrites_must_be_output_coordinates():
    program = small_scheduled()
    (and_, _), _, _ = ops_of(program)
    _set(and_, "overwrites", [60, 61])
    with pytest.raises(VerifyException, match="not among its output coordinates"):
        program.verify()


@needs_shared_kernels
def test_a_stalled_schedule_bursts(monkeypatch):
    """divrem_i (nvcc) with a margin of 200: its live bits stall at the
    budget, a unit every few halves (31 layers); the burst budget takes the
    units that add the fewest bits at once and fits in fewer (29). (Until
    the lane control's min-PC became a race of keys, transpose_tiled_i
    overflowed at a margin of 150 and only the burst fitted it; its
    one-hot of the blocks no longer takes those bits.)"""
    import qgc.passes.tensor_schedule_layers as S
    from qgc import driver
    from qgc.pipeline import stage, up_to
    from qgc.runtime.launch import load_launch

    ctx, module = driver.load(str(SHARED_KERNELS / "divrem_i.ptx"))
    driver.apply_for_launch(ctx, module, up_to(stage("tensor"), "tensor-schedule-layers"),
                            load_launch(SHARED_KERNELS / "divrem_i.json"))
    (program,) = T.programs_of(module)

    def layers_with(budget) -> int | None:
        """The schedule's layers with the one budget, None when it overflows."""
        monkeypatch.setattr(S, "_BUDGETS", (budget,))
        try:
            schedule(program, 2048, 6144, 16)
        except DiagnosticException:
            return None
        program.verify()
        return program.limit("layers")

    stalled = layers_with(S._Budget(200))
    assert stalled is not None
    assert layers_with(S._Budget(200, burst=True)) < stalled


TWO_PRODUCTS = """.version 8.0
.target sm_75
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [k_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r2, [%rd4];
    mul.lo.s32 %r3, %r2, %r2;
    mul.lo.s32 %r4, %r3, %r2;
    st.global.u32 [%rd4], %r4;
    ret;
}
"""


def _through_the_schedule(path, **form_blocks):
    """A kernel lowered for its launch through `tensor-schedule-layers`:
    (layers, blocks)."""
    from qgc import driver
    from qgc.dialects import simt
    from qgc.pipeline import stage, up_to, with_options
    from qgc.runtime.launch import load_launch
    passes = up_to(stage("tensor"), "convert-tensor-to-weights")
    if form_blocks:
        passes = with_options(passes, "simt-form-blocks", **form_blocks)
    ctx, module = driver.load(str(path))
    launch = {"kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1],
              "args": [{"type": "s32*", "data": [3, -5, 7, 1 << 20]}]}
    driver.apply_for_launch(ctx, module, passes, load_launch(launch))
    (program,) = T.programs_of(module)
    (kernel,) = simt.kernels_of(module)
    return program.limit("layers"), len(kernel.body.blocks)


@pytest.mark.full
def test_a_schedule_past_the_goal_is_tried_with_narrower_blocks(monkeypatch, tmp_path):
    """`driver.fit_layers`: two products share a block; with every schedule
    past the goal, the driver also forms blocks of one product each, then of
    half the ops too, and keeps the schedule with the fewest layers (a tie
    keeps the earlier)."""
    import qgc.passes.tensor_schedule_layers as S
    path = tmp_path / "k.ptx"
    path.write_text(TWO_PRODUCTS)
    shared = _through_the_schedule(path, max_products=0)
    apart = _through_the_schedule(path, max_products=1)
    halved = _through_the_schedule(path, max_products=1, max_ops=8)
    assert halved[1] >= apart[1] > shared[1]            # the blocks did split
    assert _through_the_schedule(path) == shared      # within the goal: no second try
    monkeypatch.setattr(S, "LAYER_GOAL", 0)
    best = shared
    for tried in (apart, halved):
        best = tried if tried[0] < best[0] else best
    assert _through_the_schedule(path) == best
