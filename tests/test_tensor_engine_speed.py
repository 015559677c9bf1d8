"""The compiled `tensor` engine (`compile_program`, what `run_tensor` runs)
against the reference interpreter it replaced (`_interpret`, op by op): the
same outputs, memories and errors on random programs — plain and sum rows,
half-integer thresholds, slices, concats, memories written and read in any
order — and a plan that follows the program when it changes. Semantics only;
`bench/tensor_engine.py` measures the speed."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.dialects import tensor as T
from qgc.runtime import tensor_engine as E
from qgc.runtime.tensor_engine import (
    TensorEngineError,
    _interpret,
    compile_program,
    run_tensor,
    to_bits,
)


def outcome(run, program, tokens, state=None):
    """Every token's outputs and the final state, or where and how it failed."""
    outs = []
    try:
        for tok in tokens:
            out, state = run(program, tok, state)
            outs.append(out)
    except (TensorEngineError, KeyError, IndexError, TypeError, ValueError) as err:
        return outs, ("error", type(err).__name__, str(err))
    return outs, state


def same(program, tokens, state=None):
    expected = outcome(_interpret, program, tokens, state)
    assert outcome(run_tensor, program, tokens, state) == expected
    return expected


# ------------------------------------------------------------ random programs

WEIGHTS = st.integers(-3, 3).filter(bool)


@st.composite
def terms(draw, n_in: int, weights=WEIGHTS):
    if n_in == 0:
        return {}
    bits = draw(st.lists(st.integers(0, n_in - 1), max_size=min(n_in, 6), unique=True))
    return {i: draw(weights) for i in bits}


def half(draw, form: dict[int, int]) -> Fraction:
    lo = sum(min(w, 0) for w in form.values())
    hi = sum(max(w, 0) for w in form.values())
    return Fraction(draw(st.integers(2 * lo - 2, 2 * hi + 2)), 2)


@st.composite
def row(draw, n_in: int):
    kind = draw(st.sampled_from(["plain", "plain", "staircase", "xor", "sum"]))
    if kind == "plain":
        form = draw(terms(n_in))
        return (form, half(draw, form))
    if kind == "staircase":        # bit t of a count: always 0 or 1
        form = draw(terms(n_in, st.integers(1, 3)))
        top = sum(form.values())
        t = draw(st.integers(0, 2))
        parts = [(((k >> t) & 1) - (((k - 1) >> t) & 1), form, k) for k in range(1, top + 1)]
        parts = [p for p in parts if p[0]]
        return parts or (form, half(draw, form))
    if kind == "xor":              # [a + b ≥ 1] − [a + b ≥ 2], maybe over repeated forms
        form = draw(terms(n_in, st.just(1)))
        return [(1, form, 1), (-1, form, 2)]
    # anything: often not a bit, and then both engines must fail alike
    n = draw(st.integers(1, 3))
    parts = []
    for _ in range(n):
        form = draw(terms(n_in))
        parts.append((draw(st.sampled_from([-2, -1, 1, 1, 1, 2])), form, half(draw, form)))
    return parts


@st.composite
def programs(draw):
    """(program, tokens, initial state)."""
    b = T.ProgramBuilder("random")
    pool: list = []
    widths: dict[str, int] = {}
    for k in range(draw(st.integers(1, 3))):
        widths[f"in{k}"] = w = draw(st.integers(1, 5))
        pool.append(b.input(f"in{k}", w))
    mems = {}
    for m in range(draw(st.integers(0, 3))):
        slots, width = draw(st.integers(1, 9)), draw(st.integers(1, 4))
        mems[b.memory(f"m{m}", slots, width)] = (slots, width)

    def value(width: int):
        """A value of `width` bits: a slice, or a threshold of random rows."""
        wide = [v for v in pool if T.width_of(v) >= width]
        if wide and draw(st.booleans()):
            v = draw(st.sampled_from(wide))
            lo = draw(st.integers(0, T.width_of(v) - width))
            return b.slice(v, lo, lo + width)
        ins = draw(st.lists(st.sampled_from(pool), max_size=3))
        n_in = sum(T.width_of(v) for v in ins)
        return b.threshold(ins, [draw(row(n_in)) for _ in range(width)])

    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["threshold", "threshold", "slice", "concat", "kv", "kv", "kv"]))
        if kind == "threshold":
            pool.append(value(draw(st.integers(1, 6))))
        elif kind == "slice":
            v = draw(st.sampled_from(pool))
            lo = draw(st.integers(0, T.width_of(v) - 1))
            pool.append(b.slice(v, lo, draw(st.integers(lo + 1, T.width_of(v)))))
        elif kind == "concat":
            pool.append(b.concat(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))))
        elif mems:
            name = draw(st.sampled_from(sorted(mems)))
            slots, width = mems[name]
            key_kind = draw(st.sampled_from(T.KEY_KINDS))
            key_width = slots if key_kind == "onehot" else max(1, (slots - 1).bit_length())
            key = value(key_width)
            enable = value(1) if draw(st.booleans()) else None
            if draw(st.booleans()):
                b.kv_write(name, key_kind, key, value(width), enable)
            else:
                pool.append(b.kv_read(name, key_kind, key, enable))
    for k, v in enumerate(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=4))):
        b.output(f"out{k}", v)
    tokens = [{name: draw(st.lists(st.integers(0, 1), min_size=w, max_size=w))
               for name, w in widths.items()} for _ in range(draw(st.integers(1, 4)))]
    state = {name: {slot: tuple(draw(st.lists(st.integers(0, 1), min_size=width,
                                              max_size=width)))
                    for slot in draw(st.lists(st.integers(0, slots), max_size=3))}
             for name, (slots, width) in mems.items() if draw(st.booleans())}
    return b.program, tokens, state or None


@settings(max_examples=200)
@given(programs())
def test_compiled_equals_reference(case):
    program, tokens, state = case
    assert compile_program(program) is not None     # the plan, not the fallback, runs
    same(program, tokens, state)


@settings(max_examples=60)
@given(programs(), st.data())
def test_bad_tokens_fail_alike(case, data):
    """A missing, unknown or malformed input, or a state row that is not bits."""
    program, tokens, state = case
    tok = dict(tokens[0])
    name = data.draw(st.sampled_from(sorted(tok)))
    how = data.draw(st.sampled_from(["missing", "unknown", "two", "short", "long", "bool",
                                     "state"]))
    if how == "missing":
        del tok[name]
    elif how == "unknown":
        tok["zz"] = [0]
    elif how == "two":
        tok[name] = [2] + list(tok[name][1:])
    elif how == "short":
        tok[name] = list(tok[name][:-1])
    elif how == "long":
        tok[name] = list(tok[name]) + [0]
    elif how == "bool":
        tok[name] = [bool(b) for b in tok[name]]
    elif state:
        state = {m: {s: (2,) + row[1:] for s, row in rows.items()} for m, rows in state.items()}
    same(program, [tok] + tokens[1:], state)


# ------------------------------------------------------------------ examples

def test_errors_and_messages_are_the_reference_ones():
    bld = T.ProgramBuilder("sums")
    x = bld.input("x", 2)
    bad = [(1, {0: 1}, 1), (1, {1: 1}, 1)]                 # x0 + x1: 2 when both are set
    s = bld.threshold([x], [({0: 1, 1: 1}, Fraction(3, 2)), bad])
    bld.output("s", s)
    for a, b in itertools.product((0, 1), repeat=2):
        (out, _), _ = same(bld.program, [{"x": [a, b]}]), None
        if a + b < 2:
            assert out[0]["s"] == [a & b, a + b]
    with pytest.raises(TensorEngineError, match=r"row 1 .* sums to 2, not a bit"):
        run_tensor(bld.program, {"x": [1, 1]})
    with pytest.raises(TensorEngineError, match="missing input 'x'"):
        run_tensor(bld.program, {})
    with pytest.raises(TensorEngineError, match="unknown input 'y'"):
        run_tensor(bld.program, {"x": [0, 0], "y": [1]})
    with pytest.raises(TensorEngineError, match=r"input 'x' takes 2 bits \(0 or 1\)"):
        run_tensor(bld.program, {"x": [0, 2]})


def test_memory_order_and_one_hot():
    """Two writes, reads before and after them, a one-hot key with two bits."""
    b = T.ProgramBuilder("order")
    k, v = b.input("k", 3), b.input("v", 2)
    b.memory("m", 3, 2)
    before = b.kv_read("m", "onehot", k)
    b.kv_write("m", "onehot", k, v)
    middle = b.kv_read("m", "onehot", k)
    flipped = b.threshold([v], [({0: -1}, 0), ({1: -1}, 0)])
    b.kv_write("m", "onehot", k, flipped)
    after = b.kv_read("m", "onehot", k)
    for name, val in (("before", before), ("middle", middle), ("after", after)):
        b.output(name, val)
    tokens = [{"k": [0, 1, 0], "v": [1, 0]}, {"k": [0, 1, 0], "v": [1, 1]},
              {"k": [0, 0, 0], "v": [1, 1]}, {"k": [1, 1, 0], "v": [0, 0]}]
    outs, err = same(b.program, tokens)
    assert outs[0] == {"before": [0, 0], "middle": [1, 0], "after": [0, 1]}
    assert outs[1] == {"before": [0, 1], "middle": [1, 1], "after": [0, 0]}
    assert err[0] == "error" and "one-hot key has 2 bits set (slots [0, 1])" in err[2]


def test_plan_is_cached_and_follows_changes():
    b = T.ProgramBuilder("cache")
    x = b.input("x", 3)
    s = b.threshold([x], [({0: 1, 1: 1, 2: 1}, 2)])
    b.output("s", s)
    program = b.program
    plan = compile_program(program)
    assert plan is not None and compile_program(program) is plan
    assert run_tensor(program, {"x": [1, 1, 0]})[0] == {"s": [1]}
    s.owner.properties["rows"] = T.ArrayAttr([T.row_attr({0: 1, 1: 1, 2: 1}, 3)])  # in place
    assert compile_program(program) is not plan
    assert run_tensor(program, {"x": [1, 1, 0]})[0] == {"s": [0]}
    out = next(op for op in program.ops() if isinstance(op, T.OutputOp))
    t = T.ThresholdOp([x], [T.row_attr({0: 1}, 1)])      # a new op, and an operand rewired
    b.block.insert_op_before(t, out)
    out.operands[0] = t.result
    assert run_tensor(program, {"x": [1, 1, 0]})[0] == {"s": [1]}
    b.output("t", s)
    assert run_tensor(program, {"x": [1, 1, 0]})[0] == {"s": [1], "t": [0]}
    out.detach()
    out.erase()
    assert run_tensor(program, {"x": [1, 1, 0]})[0] == {"t": [0]}
    last = program.ops()[-1]
    last.operands[0] = t.result                            # only an operand changes
    assert run_tensor(program, {"x": [1, 1, 0]})[0] == {"t": [1]}


def test_runner_is_run_tensor():
    b = T.ProgramBuilder("runner")
    x = b.input("x", 2)
    b.memory("m", 2, 2)
    b.kv_write("m", "onehot", x, x)
    b.output("r", b.kv_read("m", "binary", b.threshold([x], [({0: 1, 1: 1}, 2)])))
    tokens = [{"x": [1, 0]}, {"x": [0, 1]}, {"x": [1, 1]}, {"x": [0, 0]}]
    run = E.tensor_runner(b.program)
    assert outcome(lambda _p, tok, state: run(tok, state), None, tokens) == \
        outcome(_interpret, b.program, tokens)


def test_a_plan_refused_is_interpreted():
    """A row reading past its operands: the plan refuses the program and the
    reference runs (and fails) op by op."""
    b = T.ProgramBuilder("bad")
    x = b.input("x", 2)
    b.output("s", b.threshold([x], [({5: 1}, 1)]))
    assert compile_program(b.program) is None
    with pytest.raises(IndexError):
        run_tensor(b.program, {"x": [1, 0]})


def test_wide_program_agrees():
    """A deeper program in one go: an 8-bit ripple adder of threshold rows with
    a register file, run over many tokens."""
    b = T.ProgramBuilder("adder")
    a, c, addr, en = b.input("a", 8), b.input("c", 8), b.input("addr", 3), b.input("en", 1)
    b.memory("regs", 8, 8)
    old = b.kv_read("regs", "binary", addr)
    carry = None
    bits = []
    for i in range(8):
        ins = [b.slice(a, i, i + 1), b.slice(old, i, i + 1)] + ([carry] if carry else [])
        n = len(ins)
        form = {j: 1 for j in range(n)}
        total = b.threshold(ins, [[(1, form, 1), (-1, form, 2)] + ([(1, form, 3)] if n == 3
                                                                   else []),
                                  (form, 2)])
        bits.append(b.slice(total, 0, 1))
        carry = b.slice(total, 1, 2)
    new = b.concat(bits)
    b.kv_write("regs", "binary", addr, new, en)
    b.output("sum", new)
    b.output("xor", b.threshold([new, c], [[(1, {i: 1, 8 + i: 1}, 1), (-1, {i: 1, 8 + i: 1}, 2)]
                                           for i in range(8)]))
    tokens = [{"a": to_bits(17 * t % 256, 8), "c": to_bits(t, 8), "addr": to_bits(t % 5, 3),
               "en": [t % 3 != 0]} for t in range(40)]
    outs, state = same(b.program, tokens)
    assert isinstance(state, dict) and set(state) == {"regs"}
    assert isinstance(compile_program(b.program), E.CompiledProgram)


def test_plans_die_with_their_programs():
    import gc
    import weakref
    b = T.ProgramBuilder("short")
    b.output("x", b.input("x", 1))
    assert run_tensor(b.program, {"x": [1]})[0] == {"x": [1]}
    plan = weakref.ref(compile_program(b.program))
    del b
    gc.collect()
    assert plan() is None


# ------------------------------------------- the dialect's fast constructors

def test_rows_are_interned_and_print_as_before(ctx):
    import io

    from xdsl.parser import Parser
    from xdsl.printer import Printer

    a = T.row_attr({2: -1, 0: 1, 5: 0}, Fraction(3, 2))
    assert a is T.row_attr([(0, 1), (2, -1)], 1.5)
    assert a == T.RowAttr([(0, 1), (2, -1)], Fraction(3, 2))     # the plain constructor
    assert a.row() is a.row() and a.row() == T.ThresholdRow(((0, 1), (2, -1)), Fraction(3, 2))
    xor = [(1, {0: 1, 1: 1}, 1), (-1, {0: 1, 1: 1}, 2)]
    assert T.sum_attr(xor) is T.sum_attr([(1, {1: 1, 0: 1}, 1), (-1, {0: 1, 1: 1}, 2)])
    assert T.sum_attr([(1, {0: 1}, 1)]) is T.row_attr({0: 1}, 1)
    with pytest.raises(ValueError, match="threshold 0.25 is not a multiple of 1/2"):
        T.row_attr({0: 1}, 0.25)
    b = T.ProgramBuilder("p")
    x = b.input("x", 3)
    s = b.threshold([x], [({0: 1, 2: -1}, 1.5), xor, ({}, 0), ({0: 1, 1: 1}, -2.5)])
    b.memory("m", 4, 2)
    b.kv_write("m", "binary", b.slice(s, 0, 2), b.slice(s, 2, 4))
    b.output("r", b.kv_read("m", "binary", b.slice(x, 1, 3)))
    b.program.verify()
    out = io.StringIO()
    Printer(stream=out).print_op(b.program)
    text = out.getvalue()
    assert "[{0 = 1, 2 = -1} >= 1.5, {0 = 1, 1 = 1} >= 1 - (>= 2), {} >= 0, " \
           "{0 = 1, 1 = 1} >= -2.5]" in text
    parsed = Parser(ctx, text).parse_op()
    parsed.verify()
    again = io.StringIO()
    Printer(stream=again).print_op(parsed)
    assert again.getvalue() == text


def test_a_changed_row_is_verified_again():
    from xdsl.utils.exceptions import VerifyException

    b = T.ProgramBuilder("p")
    x = b.input("x", 2)
    s = b.threshold([x], [({0: 1}, 1)])
    b.output("s", s)
    b.program.verify()
    s.owner.properties["rows"] = T.ArrayAttr([T.row_attr({3: 1}, 1)])
    with pytest.raises(VerifyException, match="row 0 reads bit 3; the operands have 2 bits"):
        b.program.verify()
    s.owner.properties["rows"] = T.ArrayAttr([T.row_attr([(1, 1), (1, 1)], 1)])
    with pytest.raises(VerifyException, match="row 0 reads bit 1 twice"):
        b.program.verify()


@given(st.lists(st.one_of(st.integers(-(1 << 63), (1 << 64) - 1), st.integers(-5, 5))))
def test_dense_packs_like_xdsl(values):
    from xdsl.dialects.builtin import DenseArrayBase, i64
    assert T.i64_array(values) == DenseArrayBase.from_list(i64, values)


def _is_bf16_reference(value) -> bool:
    if value == 0:
        return True
    f = Fraction(value)
    num, den = abs(f.numerator), f.denominator
    if den & (den - 1):
        return False
    while num % 2 == 0:
        num //= 2
    return num < 256 and abs(f) < Fraction(2) ** 128


@given(st.one_of(st.integers(-(1 << 140), 1 << 140),
                 st.builds(lambda n, k: n << k, st.integers(-600, 600), st.integers(0, 140)),
                 st.fractions(max_denominator=1 << 12),
                 st.floats(allow_nan=False, allow_infinity=False)))
def test_is_bf16_as_before(value):
    assert T.is_bf16(value) == _is_bf16_reference(value)


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(-300, 300)), max_size=6),
       st.integers(-1200, 1200), st.integers(1, 2))
def test_row_forms_and_gadgets_as_before(terms, num, den):
    """`form`, `range` and the gadget check keep their values (they are cached
    and take shortcuts now)."""
    import math

    from xdsl.utils.exceptions import VerifyException

    row = T.ThresholdRow(tuple(terms), Fraction(num, den))
    ws = [abs(w) for _, w in terms]
    g = math.gcd(*ws) if terms else 1
    if g == 0:
        with pytest.raises(ZeroDivisionError):
            row.form()
        return
    form = (tuple((i, w // g) for i, w in terms), math.ceil(Fraction(num, den) / g))
    assert row.form() == form
    lo = sum(min(w, 0) for _, w in form[0]) - form[1]
    hi = sum(max(w, 0) for _, w in form[0]) - form[1]
    assert row.range() == (lo, hi)
    assert hash(row) == hash(T.ThresholdRow(tuple(terms), num / den if den == 2 else num))
    try:
        gadget = row.gadget()
    except VerifyException:
        return
    for _, slope, offset in gadget.neurons:
        const = 256 * (offset + slope * (Fraction(sum(w for _, w in form[0]), 2) - form[1]))
        assert _is_bf16_reference(const)
        assert all(_is_bf16_reference(1024 * slope * w) for _, w in form[0])
