"""`tensor.merge` and `tensor.clear` (docs/machine.md, "The tensor level (core)"):

- merge semantics on the ideal engine, the reference interpreter and the
  numpy plan alike: three one-slot memories, read with one-hot enables and
  merged, give the selected row (zero bits when none is selected); two reads
  that give set bits in one token are an error naming both memories;
- the merge verifier: only kv_read results, each used by the merge alone, and
  after scheduling all on the same coordinates;
- scheduling: all reads of a merge on one set of coordinates (in one layer or
  spread over several), and the compiled layers run through stock
  `Qwen3_5DecoderLayer` modules (float32 and bfloat16, prefill and decode)
  exactly like the engine;
- the clear verifier: a clear before the dead bit's last read, a missing
  clear, and per view: a clear of group 0 leaves group 1's view dirty, an
  ungrouped clear cleans every view; scheduled clears (ungrouped and grouped)
  run exactly through stock layers.
"""

from __future__ import annotations

import io
import random
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.utils.exceptions import VerifyException

from qgc.dialects import tensor as T
from qgc.passes.tensor_schedule_layers import schedule
from qgc.passes.tensor_to_weights import compile_program
from qgc.runtime import tensor_engine as E
from qgc.runtime.tensor_engine import TensorEngineError, run_tensor, run_tensor_tokens

torch = pytest.importorskip("torch")

from test_tensor_core import DTYPES, StockRun, check_outputs, small_config  # noqa: E402

W = 4          # bits per merged row
N_MEM = 3      # merged memories


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def coords(op) -> list[int]:
    return T.coords_of(op.coords.get_values())


def _set(op, name, values):
    op.properties[name] = T.i64_array(T.ranges_of(sorted(values)))


def text_of(op) -> str:
    from xdsl.printer import Printer
    out = io.StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


def reads_of(program: T.ProgramOp) -> list[T.KvReadOp]:
    return [op for op in program.ops() if isinstance(op, T.KvReadOp)]


def clears_of(program: T.ProgramOp) -> list[T.ClearOp]:
    return [op for op in program.ops() if isinstance(op, T.ClearOp)]


# ------------------------------------------------------------------ programs

def merge3() -> T.ProgramOp:
    """N_MEM one-slot memories @m0.. (key 0 of a 1-bit binary key): row i
    written from `v{i}` when `we` bit i is set, read when `sel` bit i is set;
    the reads merged into `r`, and `any` (the OR of r) computed from it."""
    b = T.ProgramBuilder("merge3")
    k = b.input("k", 1)
    vals = [b.input(f"v{i}", W) for i in range(N_MEM)]
    we, sel = b.input("we", N_MEM), b.input("sel", N_MEM)
    reads = []
    for i in range(N_MEM):
        b.memory(f"m{i}", 1, W)
        b.kv_write(f"m{i}", "binary", k, vals[i], b.slice(we, i, i + 1))
        reads.append(b.kv_read(f"m{i}", "binary", k, b.slice(sel, i, i + 1)))
    r = b.merge(reads)
    b.output("r", r)
    b.output("any", b.threshold([r], [({i: 1 for i in range(W)}, 1)]))
    return b.program


def token(rows=None, we=(0,) * N_MEM, sel=(0,) * N_MEM) -> dict[str, list[int]]:
    rows = rows or [[0] * W] * N_MEM
    return {"k": [0], **{f"v{i}": list(rows[i]) for i in range(N_MEM)},
            "we": list(we), "sel": list(sel)}


def onehot(i: int | None) -> list[int]:
    return [int(j == i) for j in range(N_MEM)]


#: one program for the engine tests (hypothesis reruns them; the plan is kept
#: on the program op)
MERGE3 = merge3()
MERGE3.verify()


def run_both(program, tokens):
    """Every token through the reference interpreter and through `run_tensor`
    (the numpy plan), which must agree; returns the outputs."""
    ref_state = plan_state = None
    outs = []
    for tok in tokens:
        ref, ref_state = E._interpret(program, tok, ref_state)
        got, plan_state = run_tensor(program, tok, plan_state)
        assert got == ref
        assert plan_state == ref_state
        outs.append(got)
    return outs


def test_the_plan_models_merges():
    plan = E.compile_program(MERGE3)
    assert isinstance(plan, E.CompiledProgram)
    assert sum(isinstance(s, E._Merge) for s in plan.steps) == 1
    rows = [[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1]]
    # the plan runs these tokens itself: the interpreter is never asked
    with mock.patch.object(E, "_interpret", side_effect=AssertionError("fell back")):
        _, state = run_tensor(MERGE3, token(rows, we=(1, 1, 1)))
        for i in (None, 0, 1, 2):
            out, _ = run_tensor(MERGE3, token(sel=onehot(i)), state)
            assert out["r"] == (rows[i] if i is not None else [0] * W)


bit_rows = st.lists(st.lists(st.integers(0, 1), min_size=W, max_size=W),
                    min_size=N_MEM, max_size=N_MEM)


@settings(max_examples=60)
@given(rows=bit_rows, pick=st.sampled_from([None, *range(N_MEM)]),
       written=st.lists(st.integers(0, 1), min_size=N_MEM, max_size=N_MEM),
       same_token=st.booleans())
def test_merge_gives_the_selected_row(rows, pick, written, same_token):
    """Rows written on one token (those `written` says), read by a later
    token or by the same one: the selected row if written (else zero bits),
    zero bits when none is selected."""
    if same_token:
        tokens = [token(rows, we=written, sel=onehot(pick))]
    else:
        tokens = [token(rows, we=written), token(sel=onehot(pick))]
    outs = run_both(MERGE3, tokens)
    if not same_token:
        assert outs[0]["r"] == [0] * W and outs[0]["any"] == [0]
    want = list(rows[pick]) if pick is not None and written[pick] else [0] * W
    assert outs[-1]["r"] == want
    assert outs[-1]["any"] == [int(any(want))]


@settings(max_examples=60)
@given(rows=bit_rows, picked=st.sets(st.integers(0, N_MEM - 1), min_size=2))
def test_merge_of_two_set_reads_is_an_error(rows, picked):
    """Several reads enabled: fine while at most one gives set bits (the
    others read empty rows), else an error naming every read that did, from
    the interpreter and from the plan (which hands the token to it)."""
    sel = [int(i in picked) for i in range(N_MEM)]
    _, state = E._interpret(MERGE3, token(rows, we=(1,) * N_MEM))
    given_bits = [i for i in sorted(picked) if any(rows[i])]
    tok = token(sel=sel)
    if len(given_bits) <= 1:
        want = rows[given_bits[0]] if given_bits else [0] * W
        assert E._interpret(MERGE3, tok, state)[0]["r"] == want
        assert run_tensor(MERGE3, tok, state)[0]["r"] == want
        return
    names = ", ".join(f"@m{i}" for i in given_bits)
    message = rf"tensor.merge: reads of {names} all gave set bits in one token"
    with pytest.raises(TensorEngineError, match=message):
        E._interpret(MERGE3, tok, state)
    with pytest.raises(TensorEngineError, match=message):
        run_tensor(MERGE3, tok, state)
    # the same on the token that writes the rows (the reads see its writes)
    with pytest.raises(TensorEngineError, match=message):
        run_tensor(MERGE3, token(rows, we=(1,) * N_MEM, sel=sel))


def test_merge_error_names_both_memories():
    _, state = run_tensor(MERGE3, token([[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]],
                                        we=(1, 1, 1)))
    for run in (E._interpret, run_tensor):
        with pytest.raises(TensorEngineError, match=r"reads of @m0, @m2 all gave set bits in "
                                                    r"one token; at most one may"):
            run(MERGE3, token(sel=(1, 0, 1)), state)
        # @m1's row is empty: @m1 with either of the others is fine
        assert run(MERGE3, token(sel=(1, 1, 0)), state)[0]["r"] == [1, 0, 0, 0]
        assert run(MERGE3, token(sel=(0, 1, 1)), state)[0]["r"] == [0, 0, 0, 1]


# ------------------------------------------------------------------ the verifier

def test_merge_of_a_value_that_is_not_a_read():
    b = T.ProgramBuilder("bad")
    k, v = b.input("k", 1), b.input("v", W)
    b.memory("m", 1, W)
    r = b.kv_read("m", "binary", k)
    b.output("x", b.merge([r, v]))
    with pytest.raises(VerifyException, match="tensor.merge merges the results of "
                                              "tensor.kv_read ops"):
        b.program.verify()
    b = T.ProgramBuilder("bad")       # a view of a read is not a read either
    k = b.input("k", 1)
    b.memory("m", 1, W)
    b.memory("n", 1, W)
    r, q = b.kv_read("m", "binary", k), b.kv_read("n", "binary", k)
    b.output("x", b.merge([r, b.slice(q, 0, W)]))
    with pytest.raises(VerifyException, match="merges the results of tensor.kv_read ops"):
        b.program.verify()


def test_merged_read_with_another_use():
    b = T.ProgramBuilder("bad")
    k = b.input("k", 1)
    b.memory("m", 1, W)
    b.memory("n", 1, W)
    r, q = b.kv_read("m", "binary", k), b.kv_read("n", "binary", k)
    b.output("x", b.merge([r, q]))
    b.output("q", b.slice(q, 0, 1))
    with pytest.raises(VerifyException, match="a read that tensor.merge takes has no other use"):
        b.program.verify()


def test_merged_reads_of_different_widths():
    b = T.ProgramBuilder("bad")
    k = b.input("k", 1)
    b.memory("m", 1, W)
    b.memory("n", 1, W + 1)
    r, q = b.kv_read("m", "binary", k), b.kv_read("n", "binary", k)
    b.output("x", b.merge([r, q]))
    with pytest.raises(VerifyException, match=rf"tensor.merge of !tensor.bits<{W + 1}> gives "
                                              rf"!tensor.bits<{W}>"):
        b.program.verify()


def scheduled_merge3(heads: int) -> T.ProgramOp:
    program = merge3()
    program.verify()
    schedule(program, 64, 8, heads)
    program.verify()
    return program


@pytest.mark.parametrize("moved", range(N_MEM))
def test_merged_reads_moved_apart(moved):
    program = scheduled_merge3(1)
    reads = reads_of(program)
    free = max(op.coord.value.data for op in program.pads()) + 1   # held by nothing
    _set(reads[moved], "coords", range(free, free + W))
    with pytest.raises(VerifyException, match="the reads of a tensor.merge are placed on the "
                                              "same coordinates"):
        program.verify()
    program = scheduled_merge3(1)   # one coordinate of one read swapped for another
    read = reads_of(program)[moved]
    _set(read, "coords", coords(read)[1:] + [free])
    with pytest.raises(VerifyException, match="same coordinates"):
        program.verify()


# ------------------------------------------------------------------ scheduling

@pytest.mark.parametrize("heads, layers", [(1, N_MEM), (N_MEM, 1)])
def test_merged_reads_share_coordinates(ctx, heads, layers):
    """One head a layer: the memories in layers 0, 1, 2, their reads on one set
    of coordinates (the later ones write onto the first one's); heads enough:
    all in layer 0."""
    from xdsl.parser import Parser
    program = scheduled_merge3(heads)
    assert program.limit("layers") == layers
    reads = reads_of(program)
    assert sorted(r.placed_layer for r in reads) == \
        ([0, 1, 2] if heads == 1 else [0, 0, 0])
    assert all(coords(r) == coords(reads[0]) for r in reads)
    assert len(set(coords(reads[0]))) == W
    (merge,) = [op for op in program.ops() if isinstance(op, T.MergeOp)]
    assert merge.first_read() is min(reads, key=T.half_index)
    # no other bit lives on the merged coordinates while the reads write them
    first, last = min(map(T.half_index, reads)), max(map(T.half_index, reads))
    last_read = T.bit_reads(program)
    for op in program.ops():
        if isinstance(op, T.ThresholdOp | T.InputOp):
            for c in set(coords(op)) & set(coords(reads[0])):
                born = T.birth_half(op)
                assert last_read.get((op, c), born) <= first or born > last
    # the printed schedule parses back to the same text
    text = text_of(program)
    assert text.count(f"coords {T.spell_ranges(T.ranges_of(coords(reads[0])))} :") >= N_MEM
    parsed = Parser(ctx, text).parse_op()
    parsed.verify()
    assert text_of(parsed) == text


def merge_tokens(n: int, seed: int):
    """Tokens that write some rows and read at most one (one-hot `sel`, or none)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rows = [[rng.randrange(2) for _ in range(W)] for _ in range(N_MEM)]
        we = [int(rng.random() < 0.4) for _ in range(N_MEM)]
        pick = rng.choice([None, *range(N_MEM)])
        out.append(token(rows, we=we, sel=onehot(pick)))
    return out


@pytest.fixture(scope="module", params=[1, N_MEM], ids=["heads1", f"heads{N_MEM}"])
def merge_compiled(request):
    return compile_program(scheduled_merge3(request.param),
                           small_config(hidden_size=64, intermediate_size=8))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_merge_stock(merge_compiled, dtype, mode):
    tokens = merge_tokens(16, seed=5)
    expected, _ = run_tensor_tokens(merge_compiled.program, tokens)
    assert sum(out["any"] == [1] for out in expected) >= 4     # rows do come through
    assert sum(out["any"] == [0] for out in expected) >= 2
    h = torch.tensor([merge_compiled.encode(t) for t in tokens], dtype=torch.float64)
    run = StockRun(merge_compiled, dtype)
    h_out = run.decode(h) if mode == "decode" else run.prefill(h)
    check_outputs(merge_compiled, h_out, expected)
    assert run.min_active >= 0.5 and run.max_inactive <= -0.5


# ------------------------------------------------------------------ clears

def layers_example() -> T.ProgramOp:
    """testsuite/passes/tensor-schedule-layers.mlir: %b's second bit, dead
    after mlp 0, is cleared there for the read of attn 1."""
    b = T.ProgramBuilder("p")
    a, bb, key = b.input("a", 2), b.input("b", 2), b.input("key", 2)
    and_ = b.threshold([a, bb], [({0: 1, 2: 1}, 2), ({1: 1, 3: 1}, 2)])
    b.memory("m", 4, 2)
    b.kv_write("m", "binary", key, and_)
    r = b.kv_read("m", "binary", key)
    x = b.threshold([r, a], [({0: 1, 1: 1, 2: 1}, 2)])
    b.output("x", x)
    return b.program


def late_clear() -> T.ProgramOp:
    """%a and %t1 are last read by %t2 in mlp 1; the read (keyed by %t2) in
    attn 2 lands on their coordinates, cleared in mlp 1."""
    b = T.ProgramBuilder("late")
    a, k = b.input("a", 2), b.input("k", 1)
    t1 = b.threshold([a], [({0: 1, 1: 1}, 2)])
    t2 = b.threshold([t1, a], [({0: 1, 1: 1, 2: 1}, 2)])
    b.memory("m", 2, 2)
    b.kv_write("m", "binary", t2, b.concat([k, k]))
    b.output("r", b.kv_read("m", "binary", t2))
    return b.program


def grouped_clears() -> T.ProgramOp:
    """Groups 0 and 1 (bits of `g`) each read a memory in attn 1; both reads
    land on the coordinate of %x's second bit (dead after mlp 0), cleared
    there once per group. Each read is output through an AND with its group
    bit (as a machine step picks the running block's values)."""
    b = T.ProgramBuilder("gr")
    g, x, k = b.input("g", 2), b.input("x", 2), b.input("k", 1)
    t = b.threshold([x], [({0: 1, 1: 1}, 2)])
    for i in range(2):
        b.memory(f"m{i}", 2, 1)
        b.kv_write(f"m{i}", "binary", k, t)
        with b.grouped(i):
            r = b.kv_read(f"m{i}", "binary", t)
        b.output(f"r{i}", b.threshold([g, r], [({i: 1, 2: 1}, 2)]))
    b.program.properties["groups"] = T.StringAttr("g")
    return b.program


def scheduled(program: T.ProgramOp, hidden=64, intermediate=8, heads=1) -> T.ProgramOp:
    program.verify()
    schedule(program, hidden, intermediate, heads)
    program.verify()
    return program


def earlier_holder(program: T.ProgramOp, clear: T.ClearOp, c: int):
    """(op, last read half) of the bit on coordinate c before the clear."""
    reads = T.bit_reads(program)
    before = [op for op in program.ops()
              if isinstance(op, T.InputOp | T.ThresholdOp | T.KvReadOp)
              and c in coords(op) and T.birth_half(op) < T.half_index(clear)]
    op = max(before, key=T.birth_half)
    return op, reads.get((op, c), T.birth_half(op))


def test_layers_example_has_its_clear():
    program = scheduled(layers_example())
    (clear,) = clears_of(program)
    assert clear.placed_layer == 0 and clear.group_index is None
    (c,) = clear.cleared_coords()
    holder, last = earlier_holder(program, clear, c)
    assert isinstance(holder, T.InputOp) and holder.input_name.data == "b"
    assert last <= T.half_index(clear)
    (r,) = reads_of(program)
    assert c in coords(r) and T.half_index(r) > T.half_index(clear)
    assert clear.neuron_count() == 1
    lo, hi = clear.neurons.get_values()
    assert hi - lo == 1


@pytest.mark.parametrize("make", [layers_example, late_clear])
def test_deleting_the_clear(make):
    program = scheduled(make())
    for clear in clears_of(program):
        c = clear.cleared_coords()[0]
        clear.detach()
        clear.erase()
        with pytest.raises(VerifyException, match=rf"share coordinate {c}\b"):
            program.verify()
        return
    pytest.fail("no tensor.clear scheduled")


def test_clear_before_the_last_read():
    program = scheduled(late_clear())
    (clear,) = clears_of(program)
    lasts = {c: earlier_holder(program, clear, c)[1] for c in clear.cleared_coords()}
    assert min(lasts.values()) >= 3          # read in mlp 1 (or later) ...
    assert T.half_index(clear) >= max(lasts.values())   # ... and cleared after
    clear.place(0, "mlp")                    # now in mlp 0, before those reads
    with pytest.raises(VerifyException, match=r"tensor.clear of layer 0 clears coordinate "
                                              r"\d+ in half 1, but .* is read there until "
                                              r"half [3-9]"):
        program.verify()


def add_clear(program: T.ProgramOp, layer: int, cs: list[int]) -> T.ClearOp:
    """A further clear in layer `layer`'s MLP, on neurons nobody uses there."""
    used = [op.neurons.get_values()[1] for op in program.ops()
            if isinstance(op, T.ThresholdOp | T.ClearOp) and op.placed_layer == layer]
    clear = T.ClearOp(layer, cs)
    lo = max(used, default=1)
    clear.properties["neurons"] = T.i64_array([lo, lo + len(cs)])
    program.body.block.add_op(clear)
    return clear


def test_clear_of_a_live_output():
    """A clear of the coordinate of a read that is an output (read until the
    end), in the MLP half after it."""
    program = scheduled(late_clear())
    (r,) = reads_of(program)
    add_clear(program, r.placed_layer, coords(r)[:1])
    with pytest.raises(VerifyException, match=rf"tensor.clear of layer {r.placed_layer} clears "
                                              rf"coordinate {coords(r)[0]} in half "
                                              rf"{T.half_index(r) + 1}, but the kv_read of @m "
                                              r"is read there until the end \(an output\)"):
        program.verify()


@pytest.mark.parametrize("where", ["flag", "pad", "outside"])
def test_clear_of_a_coordinate_without_bits(where):
    program = scheduled(layers_example())
    c = {"flag": T.ProgramOp.FLAG, "pad": program.pads()[0].coord.value.data,
         "outside": program.limit("hidden")}[where]
    add_clear(program, 0, [c])
    with pytest.raises(VerifyException, match=rf"clears coordinate {c}, which holds no bits"):
        program.verify()


def test_grouped_clears_per_view():
    program = scheduled(grouped_clears(), heads=2)
    r0, r1 = reads_of(program)
    assert (r0.group_index, r1.group_index) == (0, 1)
    (c,) = set(coords(r0)) & set(coords(r1))      # the groups share it
    by_group = {op.group_index: op for op in clears_of(program) if c in op.cleared_coords()}
    assert set(by_group) == {0, 1}
    assert all(op.cleared_coords() == [c] for op in by_group.values())

    # group 0's clear alone: group 1's view still holds %x's dead bit
    by_group[1].detach()
    by_group[1].erase()
    with pytest.raises(VerifyException, match=rf"the kv_read of @m1 and input 'x' share "
                                              rf"coordinate {c}"):
        program.verify()
    # ungrouped, the same clear cleans every view
    del by_group[0].properties["group"]
    program.verify()
    # a second clear of group 0 does not clean group 1's view either
    program = scheduled(grouped_clears(), heads=2)
    for op in clears_of(program):
        if op.group_index == 1:
            op.properties["group"] = T.i64_attr(0)
    with pytest.raises(VerifyException, match=rf"clears coordinate {c} twice in half"):
        program.verify()
    # and group 1's clear alone leaves group 0's view dirty
    program = scheduled(grouped_clears(), heads=2)
    for op in clears_of(program):
        if op.group_index == 0:
            op.detach()
            op.erase()
    with pytest.raises(VerifyException, match=rf"@m0 and input 'x' share coordinate {c}"):
        program.verify()


@pytest.mark.parametrize("make, heads", [(late_clear, 1), (grouped_clears, 2)],
                         ids=["late", "grouped"])
def test_clears_stock(make, heads):
    """Reads landing on cleared coordinates, exactly, in both dtypes."""
    compiled = compile_program(scheduled(make(), heads=heads),
                               small_config(hidden_size=64, intermediate_size=8))
    assert clears_of(compiled.program)
    rng = random.Random(3)
    names = {op.input_name.data: T.width_of(op.result) for op in compiled.program.inputs()}
    tokens = []
    for _ in range(24):
        tok = {n: [rng.randrange(2) for _ in range(w)] for n, w in names.items()}
        if "g" in tok:                        # at most one group runs
            tok["g"] = rng.choice([[0, 0], [1, 0], [0, 1]])
        tokens.append(tok)
    expected, _ = run_tensor_tokens(compiled.program, tokens)
    h = torch.tensor([compiled.encode(t) for t in tokens], dtype=torch.float64)
    for dtype in DTYPES:
        run = StockRun(compiled, dtype)
        check_outputs(compiled, run.prefill(h), expected)
        assert run.min_active >= 0.5 and run.max_inactive <= -0.5


# ------------------------------------------------------------------ regressions
# Programs the scheduler once placed and the verifier accepted whose compiled
# layers disagreed with the engine, or that the verifier now refuses.

def stock_outputs(program: T.ProgramOp, tokens, heads: int):
    program.verify()
    schedule(program, 64, 8, heads)
    program.verify()                       # accepted ...
    compiled = compile_program(program, small_config(hidden_size=64, intermediate_size=8))
    expected, _ = run_tensor_tokens(program, tokens)
    h = torch.tensor([compiled.encode(t) for t in tokens], dtype=torch.float64)
    check_outputs(compiled, StockRun(compiled, "float32").prefill(h), expected)  # ... but wrong


def two_merged_reads(name: str):
    """A program with inputs k, a, e (2 bits), v0, v1 (2 bits each): one-slot
    memories m0, m1 written from v0, v1, read when e's bit i is set; returns
    the builder, the inputs by name and the merge of the two reads."""
    b = T.ProgramBuilder(name)
    x = {n: b.input(n, w) for n, w in (("k", 1), ("a", 1), ("e", 2), ("v0", 2), ("v1", 2))}
    reads = []
    for i in range(2):
        b.memory(f"m{i}", 1, 2)
        b.kv_write(f"m{i}", "binary", x["k"], x[f"v{i}"])
        reads.append(b.kv_read(f"m{i}", "binary", x["k"], b.slice(x["e"], i, i + 1)))
    return b, x, b.merge(reads)


def test_regression_merge_bits_nobody_reads_are_reused_too_early():
    b, x, merged = two_merged_reads("b1")
    b.output("r0", b.slice(merged, 0, 1))     # bit 1 of the merge: never read
    b.output("v", b.concat([x["v0"], x["v1"]]))
    b.output("e", x["e"])
    t = b.threshold([x["a"]], [({0: 1}, 1)] * 2)            # mlp 0
    b.output("t", b.threshold([t], [({0: 1, 1: 1}, 1)]))  # mlp 1
    stock_outputs(b.program, [{"k": [0], "a": [0], "e": [0, 1], "v0": [0, 0], "v1": [1, 1]}],
                  heads=1)


def test_regression_merge_across_groups():
    b = T.ProgramBuilder("b2")
    g, k, x = b.input("g", 2), b.input("k", 1), b.input("x", 1)
    v = [b.input(f"v{i}", 1) for i in range(2)]
    reads = []
    for i in range(2):
        b.memory(f"m{i}", 1, 1)
        b.kv_write(f"m{i}", "binary", k, v[i])
        with b.grouped(i):
            reads.append(b.kv_read(f"m{i}", "binary", k))
    b.output("r", b.merge(reads))
    with b.grouped(1):
        t1 = b.threshold([x], [({0: 1}, 1)])
        t2 = b.threshold([g, t1], [({1: 1, 2: 1}, 2)])
    b.output("t2", t2)
    b.program.properties["groups"] = T.StringAttr("g")
    with pytest.raises(VerifyException, match="belong to one group"):
        b.program.verify()


def test_regression_group_bits_are_reused_while_grouped_ops_gate_on_them():
    b = T.ProgramBuilder("b3")
    b.input("g", 1)
    x, y = b.input("x", 1), b.input("y", 1)
    with b.grouped(0):
        t1 = b.threshold([x], [({0: 1}, 1)])
    u = b.threshold([y], [({0: 1}, 1)])
    with b.grouped(0):
        b.output("t2", b.threshold([t1], [({0: 1}, 1)]))
    b.output("u", b.threshold([u], [({0: 1}, 1)]))
    b.program.properties["groups"] = T.StringAttr("g")
    stock_outputs(b.program, [{"g": [0], "x": [1], "y": [1]}], heads=1)


def test_regression_grouped_outputs_share_coordinates():
    b = T.ProgramBuilder("b4")
    b.input("g", 2)
    k, v = b.input("k", 1), b.input("v", 1)
    for i in range(2):
        b.memory(f"m{i}", 1, 1)
        b.kv_write(f"m{i}", "binary", k, v)
        with b.grouped(i):
            b.output(f"r{i}", b.kv_read(f"m{i}", "binary", k))
    b.program.properties["groups"] = T.StringAttr("g")
    stock_outputs(b.program, [{"g": [0, 1], "k": [0], "v": [1]}], heads=2)


def test_regression_clear_and_overwrite_in_one_half():
    program = scheduled(layers_example())
    (x,) = [op for op in program.ops() if isinstance(op, T.ThresholdOp) and op.placed_layer == 1]
    assert x.overwritten_coords() == coords(x)
    add_clear(program, 1, coords(x))
    with pytest.raises(VerifyException):
        program.verify()


def test_regression_two_clears_in_one_half():
    program = scheduled(layers_example())
    (clear,) = clears_of(program)
    add_clear(program, clear.placed_layer, clear.cleared_coords())
    with pytest.raises(VerifyException):
        program.verify()


def test_regression_a_merge_beside_another_operand():
    """A threshold reading a merge and another bit `t` (which an output also
    reads): the sinking step once took the merge's bits as all its reads' side
    by side, so the threshold's row named a read's bit instead of `t`, and `t`
    sank past the threshold that reads it (two memory banks, as in
    `mem_words` 254)."""
    b, x, merged = two_merged_reads("b5")
    t = b.threshold([x["a"]], [({0: 1}, 1)])
    c = b.threshold([merged, t], [({0: 1, 2: 1}, 2)])
    b.output("c", b.threshold([c], [({0: 1}, 1)]))
    b.output("t", t)
    b.output("a", x["a"])
    stock_outputs(b.program, [{"k": [0], "a": [1], "e": [0, 1], "v0": [0, 0], "v1": [1, 1]},
                              {"k": [0], "a": [1], "e": [1, 0], "v0": [1, 1], "v1": [0, 0]}],
                  heads=1)
