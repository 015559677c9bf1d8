"""simt_to_tensor.circuits: every circuit against Python's integer semantics on the ideal
`tensor` engine (exhaustively at small widths, on drawn and edge operands at
32 bits, at every width 1..32), the scheduled depth of the main circuits at 32
bits, and add / setp / select / mul_lo / popc / clz / mul.hi.s compiled into stock
`Qwen3_5DecoderLayer` modules in float32 and bfloat16, bit for bit against
the engine. The bit ops (abs, popc, clz, brev, bfind, bfe, bfi, shf,
mul.hi) against the simt engine's own ALU table at 32 bits and a
width-generic reading of the same PTX semantics below; popc, clz and mul.hi
in the stock layers too. `pytest -s -n 0` prints depth and neurons per op."""

from __future__ import annotations

import gc
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.machine.opcodes import ALU_OPCODES, SETP_EXPANSIONS
from qgc.passes.simt_to_tensor.circuits import CONDS, Alu, Form
from qgc.passes.simt_to_tensor.circuits.forms import tighten as _tighten
from qgc.passes.tensor_schedule_layers import schedule
from qgc.runtime.tensor_engine import from_bits, run_tensor, to_bits

#: the machine's semantics of each ALU opcode (the simt engine's)
ALU = {name: code.evaluate for name, code in ALU_OPCODES.items()}


def signed(v: int, w: int) -> int:
    return v - (1 << w) if v >> (w - 1) & 1 else v


def shift(op: str, a: int, s: int, w: int) -> int:
    m = (1 << w) - 1
    if op == "shl":
        return (a << s) & m if s < w else 0
    if op == "shr.u":
        return a >> s if s < w else 0
    return (signed(a, w) >> min(s, w - 1)) & m


def reference(op: str, w: int, a: int, b: int, c: int = 0) -> int:
    m = (1 << w) - 1
    sa, sb = signed(a, w), signed(b, w)
    table = {
        "add": a + b, "sub": a - b, "mul_lo": a * b, "mad_lo": a * b + c, "and_": a & b,
        "or_": a | b, "xor": a ^ b, "not_": ~a, "neg": -a, "sum": a + b + c,
        "add.cin": a + b + (c & 1), "eq": int(a == b),
        "min.s": min(sa, sb), "max.s": max(sa, sb), "min.u": min(a, b), "max.u": max(a, b),
        "select": a if c & 1 else b, "mask": a if c & 1 else 0,
    }
    if op in ("shl", "shr.u", "shr.s"):
        return shift(op, a, b, w)
    if op.startswith("setp."):
        cond = op[5:]
        x, y = (sa, sb) if cond.endswith(".s") else (a, b)
        base = cond.split(".")[0]
        return int({"eq": a == b, "ne": a != b, "lt": x < y, "le": x <= y, "gt": x > y,
                    "ge": x >= y}[base])
    return table[op] & m


OPS = ["add", "add.cin", "sub", "mul_lo", "mad_lo", "and_", "or_", "xor", "not_", "neg", "sum",
       "eq", "min.s", "max.s", "min.u", "max.u", "select", "mask", "shl", "shr.u", "shr.s",
       *(f"setp.{c}" for c in simt.SETP_CONDS if c not in SETP_EXPANSIONS)]


def build(op: str, w: int, **alu_options) -> T.ProgramOp:
    b = T.ProgramBuilder(op.replace(".", "_"))
    x, y, z = b.input("x", w), b.input("y", w), b.input("z", w)
    alu = Alu(b, **alu_options)
    p = b.slice(z, 0, 1)
    if op.startswith("setp."):
        out = alu.setp(op[5:], x, y)
    elif op in ("min.s", "max.s", "min.u", "max.u"):
        out = getattr(alu, op[:3])(x, y, op.endswith(".s"))
    elif op in ("shr.u", "shr.s"):
        out = alu.shr(x, y, op.endswith(".s"))
    elif op in ("not_", "neg"):
        out = getattr(alu, op)(x)
    elif op == "mad_lo":
        out = alu.mad_lo(x, y, z)
    elif op == "sum":
        out = alu.sum([x, y, z])
    elif op == "add.cin":
        out = alu.add(x, y, p)
    elif op == "select":
        out = alu.select(p, x, y)
    elif op == "mask":
        out = alu.mask(x, p)
    else:
        out = getattr(alu, op)(x, y)
    b.output("out", out)
    program = b.program
    program.verify()
    return program


def run(program: T.ProgramOp, w: int, a: int, b: int, c: int) -> int:
    out, _ = run_tensor(program, {"x": to_bits(a, w), "y": to_bits(b, w), "z": to_bits(c, w)})
    return from_bits(out["out"])


def check(program: T.ProgramOp, op: str, w: int, cases) -> None:
    for a, bb, c in cases:
        assert run(program, w, a, bb, c) == reference(op, w, a, bb, c), (op, w, a, bb, c)


def test_conds_match_simt():
    """Every integer compare has a circuit; the f32 ones are expanded into
    integer ops first (`simt-expand-float`)."""
    assert set(CONDS) == set(simt.SETP_CONDS) - set(SETP_EXPANSIONS)


# ----------------------------------------------------------------- ideal engine

@pytest.mark.parametrize("op", OPS)
def test_exhaustive_at_small_width(op):
    w = 3 if op in ("mul_lo", "mad_lo", "sum") else 4
    thirds = range(1 << w) if op in ("mad_lo", "sum", "select", "mask", "add.cin") else [0]
    check(build(op, w), op, w, itertools.product(range(1 << w), range(1 << w), thirds))


EDGES = [0, 1, 2, 3, 0x7FFF_FFFF, 0x8000_0000, 0x8000_0001, 0xFFFF_FFFF, 0xFFFF_FFFE,
         0x0F0F_0F0F, 0xF0F0_F0F0, 0x1000_0000, 0x0000_FFFF, 0xFFFF_0000, 31, 32, 33, 255]
WORDS = st.integers(0, 0xFFFF_FFFF) | st.sampled_from(
    EDGES + [1 << k for k in range(32)] + [0xF << 4 * k for k in range(8)])


@pytest.fixture(scope="module")
def wide():
    cache: dict[str, T.ProgramOp] = {}

    def get(op: str) -> T.ProgramOp:
        if op not in cache:
            cache[op] = build(op, 32)
        return cache[op]
    return get


@pytest.mark.parametrize("op", OPS)
def test_edges_at_32_bits(wide, op):
    check(wide(op), op, 32, [(a, b, c) for a in EDGES for b in EDGES[:8] for c in (0, 1, 5)])


@settings(max_examples=30, deadline=None)
@given(a=WORDS, b=WORDS, c=WORDS)
def test_drawn_operands_at_32_bits(wide, a, b, c):
    for op in ("add", "add.cin", "sub", "neg", "mul_lo", "mad_lo", "sum", "xor", "select", "eq",
               "setp.gt.s", "setp.lt.u", "setp.le.s", "setp.ne", "shl", "shr.u", "shr.s",
               "max.u", "min.s"):
        check(wide(op), op, 32, [(a, b, c), (a, b & 63, c), (b, a, c)])


@pytest.mark.parametrize("w", range(1, 33))
def test_every_width(w):
    rng = random.Random(w)
    m = (1 << w) - 1
    cases = [(rng.randrange(1 << w), rng.randrange(1 << w), rng.randrange(1 << w))
             for _ in range(6)] + [(m, 1, 1), (1 << (w - 1), m, 0), (m, m, m)]
    ops = ["add.cin", "sub", "setp.lt.s", "setp.ge.u", "eq", "min.u", "xor"]
    if w <= 10 or w in (13, 16, 17, 24, 31):      # the big circuits at a sample of widths
        ops += ["mul_lo", "shr.s", "shl"]
    for op in ops:
        check(build(op, w), op, w, cases + [(a, b % (w + 2), c) for a, b, c in cases])


@pytest.mark.parametrize("n", [2, 4, 5, 8])
def test_sum_of_n(n):
    for w in (3, 32):
        b = T.ProgramBuilder("sum")
        xs = [b.input(f"x{i}", w) for i in range(n)]
        b.output("out", Alu(b).sum(xs))
        b.program.verify()
        rng = random.Random(n * w)
        m = (1 << w) - 1
        for trial in range(40):
            vals = [m if trial == 0 else rng.randrange(1 << w) for _ in range(n)]
            out, _ = run_tensor(b.program, {f"x{i}": to_bits(v, w) for i, v in enumerate(vals)})
            assert from_bits(out["out"]) == sum(vals) & m, vals


def test_constant_operands_fold():
    """Constants fold into the rows: shifting by a constant is views only, a
    constant addend shrinks the adder, `const` costs no neuron."""
    b = T.ProgramBuilder("consts")
    alu = Alu(b)
    x = b.input("x", 32)
    k = alu.const(5, 32)
    outs = {"shl": alu.shl(x, k), "shr": alu.shr(x, k, True), "add": alu.add(x, k),
            "and": alu.and_(x, k), "mul": alu.mul_lo(x, alu.const(10, 32))}
    for name, v in outs.items():
        b.output(name, v)
    program = b.program
    program.verify()
    for a in EDGES:
        out, _ = run_tensor(program, {"x": to_bits(a, 32)})
        assert from_bits(out["shl"]) == (a << 5) & 0xFFFF_FFFF
        assert from_bits(out["shr"]) == (signed(a, 32) >> 5) & 0xFFFF_FFFF
        assert from_bits(out["add"]) == (a + 5) & 0xFFFF_FFFF
        assert from_bits(out["and"]) == a & 5
        assert from_bits(out["mul"]) == (a * 10) & 0xFFFF_FFFF
    for name in ("shl", "shr", "and"):
        owner = outs[name].owner
        assert not isinstance(owner, T.ThresholdOp) or not owner.gadget_neuron_count()


@pytest.mark.parametrize("narrow", [None, False, True])
def test_a_zero_factor_leaves_no_products(narrow):
    """Regression (matmul4x4 at the tensor level): `mul_lo`/`mad_lo` with the
    constant 0 as a factor build no partial products at all (wide or narrow);
    x·0 is 0 and x·0 + z is z, with no empty threshold and no neuron."""
    b = T.ProgramBuilder("zero_factor")
    alu = Alu(b, narrow=narrow)
    x, z = b.input("x", 32), b.input("z", 32)
    zero = alu.const(0, 32)
    b.output("mul", alu.mul_lo(x, zero))
    b.output("mad", alu.mad_lo(zero, x, z))
    b.output("hi", alu.mul_hi(zero, x, True))
    program = b.program
    program.verify()
    assert not any(op.gadget_neuron_count() for op in program.ops()
                   if isinstance(op, T.ThresholdOp))
    for a, c in zip(EDGES, reversed(EDGES), strict=True):
        out, _ = run_tensor(program, {"x": to_bits(a, 32), "z": to_bits(c, 32)})
        assert from_bits(out["mul"]) == 0
        assert from_bits(out["mad"]) == c
        assert from_bits(out["hi"]) == 0


# ----------------------------------------------------------------- bit ops

#: The simt engine's ALU ops built by the bit-op methods, with their operand
#: counts (the operands are the inputs x, y, z, u in the engine's order).
BIT_OPS = {"abs": 1, "popc": 1, "clz": 1, "brev": 1, "bfind.u": 1, "bfind.s": 1,
           "bfind.shiftamt.u": 1, "bfind.shiftamt.s": 1, "bfe.u": 3, "bfe.s": 3, "bfi": 4,
           "shf.l.wrap": 3, "shf.l.clamp": 3, "shf.r.wrap": 3, "shf.r.clamp": 3,
           "mul.hi.u": 2, "mul.hi.s": 2}
NAMES = "xyzu"


def bit_reference(op: str, w: int, a: int, b: int = 0, c: int = 0, d: int = 0) -> int:
    """The PTX semantics of the engine's helpers (`_bfe`, `_bfi`, `_shf`,
    `_bfind`, ...) at any width w (theirs are 32-bit; at 32 bits the tests
    check this against them)."""
    m = (1 << w) - 1
    if op.startswith("bfind"):
        if op.endswith(".s") and a >> (w - 1):
            a = ~a & m
        top = a.bit_length() - 1
        return m if not a else (w - 1 - top if "shiftamt" in op else top)
    if op.startswith("bfe"):
        pos, length = b & 0xFF, c & 0xFF
        sbit = (a >> min(pos + length - 1, w - 1)) & 1 if op == "bfe.s" and length else 0
        taken = max(0, min(length, w - pos))
        field = (a >> pos) & ((1 << taken) - 1) if pos < w else 0
        return field | (m & ~((1 << taken) - 1) if sbit else 0)
    if op == "bfi":
        pos, length = c & 0xFF, d & 0xFF
        field = ((1 << min(length, w - pos)) - 1) << pos if pos < w else 0
        return (b & ~field | (a << pos) & field) & m
    if op.startswith("shf"):
        n = min(c, w) if op.endswith("clamp") else c % w
        pair = (b << w) | a
        return ((pair << n) >> w) & m if ".l." in op else (pair >> n) & m
    return {"abs": lambda: abs(signed(a, w)) & m, "popc": lambda: bin(a).count("1"),
            "clz": lambda: w - a.bit_length(), "brev": lambda: int(f"{a:0{w}b}"[::-1], 2),
            "mul.hi.u": lambda: (a * b) >> w,
            "mul.hi.s": lambda: (signed(a, w) * signed(b, w) >> w) & m}[op]()


def bit_op(alu: Alu, op: str, v: list):
    if op.startswith("bfind"):
        return alu.bfind(v[0], op.endswith(".s"), "shiftamt" in op)
    if op.startswith("bfe"):
        return alu.bfe(*v, signed=op == "bfe.s")
    if op.startswith("shf"):
        return alu.shf(*v, left=".l." in op, clamp=op.endswith("clamp"))
    if op.startswith("mul.hi"):
        return alu.mul_hi(*v, signed=op.endswith(".s"))
    return getattr(alu, op)(*v)


def build_bit_op(op: str, w: int, consts: dict[int, int] | None = None,
                 **alu_options) -> T.ProgramOp:
    """The op over inputs x, y, ... (operand k the constant consts[k] if given)."""
    b = T.ProgramBuilder(op.replace(".", "_"))
    alu = Alu(b, **alu_options)
    consts = consts or {}
    v = [alu.const(consts[k], w) if k in consts else b.input(NAMES[k], w)
         for k in range(BIT_OPS[op])]
    b.output("out", bit_op(alu, op, v))
    program = b.program
    program.verify()
    return program


def run_named(program: T.ProgramOp, w: int, operands) -> int:
    """Run with the operands as inputs x, y, z, u (those the program takes)."""
    names = {op.input_name.data for op in program.inputs()}
    inputs = {n: to_bits(v, w) for n, v in zip(NAMES[:len(operands)], operands, strict=True)
              if n in names}
    return from_bits(run_tensor(program, inputs)[0]["out"])


def check_bit_op(program: T.ProgramOp, op: str, w: int, cases) -> None:
    for v in cases:
        want = ALU[op](*v) if w == 32 else bit_reference(op, w, *v)
        assert run_named(program, w, v) == want, (op, w, v)


#: pos / len / shift amounts: PTX reads the low 8 bits of pos and len, the
#: whole amount of a clamped funnel shift.
FIELD_EDGES = [0, 1, 5, 8, 16, 31, 32, 33, 40, 255, 256, 0x101, 0x8000_001F, 0xFFFF_FFFF]


#: The operands that are positions, lengths or amounts.
FIELDS = {"bfe.u": (1, 2), "bfe.s": (1, 2), "bfi": (2, 3), "shf.l.wrap": (2,),
          "shf.l.clamp": (2,), "shf.r.wrap": (2,), "shf.r.clamp": (2,)}


def spread(words: list[int], k: int) -> list[int]:
    """k of the words, evenly spaced."""
    return [words[i * len(words) // k] for i in range(k)]


def bit_cases(op: str, words: list[int]) -> list[tuple[int, ...]]:
    """Operand tuples: words for data operands, FIELD_EDGES for the fields;
    about 600 per op of more than one operand."""
    n = BIT_OPS[op]
    if n == 1:
        return [(a,) for a in words]
    fields = FIELDS.get(op, ())
    room = 600 / len(FIELD_EDGES) ** len(fields)
    data = spread(words, max(2, round(room ** (1 / (n - len(fields))))))
    return list(itertools.product(*[FIELD_EDGES if k in fields else data for k in range(n)]))


_rng = random.Random(32)
WORDS32 = sorted(set(EDGES + [1 << k for k in range(32)] + [(1 << k) - 1 for k in range(33)]
                     + [_rng.randrange(1 << 32) for _ in range(200)]))


def test_bit_reference_is_the_engines():
    """The width-generic reference equals the engine's ALU table at 32 bits."""
    rng = random.Random(7)
    for op, n in BIT_OPS.items():
        for _ in range(300):
            v = [rng.choice([rng.randrange(1 << 32), rng.choice(FIELD_EDGES), rng.choice(EDGES)])
                 for _ in range(n)]
            assert bit_reference(op, 32, *v) == ALU[op](*v), (op, v)


def small_widths(op: str) -> tuple[int, ...]:
    """Exhaustive widths: every operand combination stays ≤ 4,096 runs."""
    n = BIT_OPS[op]
    if n == 1:
        return (1, 2, 3, 5, 8)
    if n == 2:
        return (1, 2, 3, 4, 5)
    if op.startswith("shf"):
        return (1, 2, 4)               # funnel shifts take power-of-two widths
    return (2, 3) if n == 4 else (3, 4)


@pytest.mark.parametrize("op", list(BIT_OPS))
def test_bit_ops_exhaustive_at_small_width(op):
    for w in small_widths(op):
        check_bit_op(build_bit_op(op, w), op, w,
                     itertools.product(range(1 << w), repeat=BIT_OPS[op]))


@pytest.fixture(scope="module")
def wide_bits():
    cache: dict[str, T.ProgramOp] = {}

    def get(op: str) -> T.ProgramOp:
        if op not in cache:
            cache[op] = build_bit_op(op, 32)
        return cache[op]
    yield get
    # the IR is cyclic: collect it now, not while xdist stops the worker
    # (its interrupt then lands in hypothesis' gc callback, a noisy warning)
    cache.clear()
    gc.collect()


@pytest.mark.parametrize("op", list(BIT_OPS))
def test_bit_ops_edges_at_32_bits(wide_bits, op):
    cases = bit_cases(op, WORDS32)
    assert len(cases) >= 100
    check_bit_op(wide_bits(op), op, 32, cases)


@settings(max_examples=25, deadline=None)
@given(v=st.tuples(WORDS, WORDS, WORDS, WORDS), small=st.integers(0, 300))
def test_bit_ops_drawn_at_32_bits(wide_bits, v, small):
    for op, n in BIT_OPS.items():
        near = [small if k in FIELDS.get(op, ()) else x for k, x in enumerate(v[:n])]
        check_bit_op(wide_bits(op), op, 32, [v[:n], tuple(near)])


@pytest.mark.parametrize("w", [6, 9, 17])
def test_mul_hi_at_more_widths(w):
    """mul.hi at other widths: 12 and 18 columns (4-bit digits), 34 columns
    (the 8 digits of 5 bits that wide adders take)."""
    rng = random.Random(w)
    m = (1 << w) - 1
    cases = [(rng.randrange(1 << w), rng.randrange(1 << w)) for _ in range(30)]
    cases += [(m, m), (1 << (w - 1), 1 << (w - 1)), (m, 1), (1 << (w - 1), m)]
    for op in ("mul.hi.u", "mul.hi.s"):
        for narrow in (False, True):
            check_bit_op(build_bit_op(op, w, narrow=narrow), op, w, cases)


def test_split_adder(monkeypatch):
    """The fallback adder of over 32 columns (3 layers: the high half's carries
    for either carry-in, then the low half's carry out picks) where the
    8-digit lookahead's rows break the gadget bounds."""
    from xdsl.utils.exceptions import VerifyException
    plain = Alu._carry_forms

    def no_wide_digits(self, s, c_in, wanted, size=4):
        if size > 4:
            raise VerifyException("wide digits refused (test)")
        return plain(self, s, c_in, wanted, size)

    monkeypatch.setattr(Alu, "_carry_forms", no_wide_digits)
    w = 20
    rng = random.Random(2)
    cases = [(rng.randrange(1 << w), rng.randrange(1 << w)) for _ in range(60)]
    cases += [((1 << w) - 1, (1 << w) - 1), (1 << (w - 1), 1 << (w - 1))]
    for op in ("mul.hi.u", "mul.hi.s"):
        program = build_bit_op(op, w, narrow=False)       # the wide one's 2W-column adder
        check_bit_op(program, op, w, cases)
        assert layers_and_neurons(program)[0] == 6


def test_bit_op_constants_fold():
    """Constant pos / len / amounts leave views only (no neuron); a constant
    factor shrinks mul.hi (the division-by-constant idiom)."""
    folded = {"bfe.u": {1: 5, 2: 10}, "bfe.s": {1: 3, 2: 7}, "bfi": {2: 2, 3: 30},
              "shf.l.wrap": {2: 7}, "shf.r.clamp": {2: 40}, "shf.r.wrap": {2: 39}}
    for op, consts in folded.items():
        program = build_bit_op(op, 32, consts)
        assert not any(o.gadget_neuron_count() for o in program.ops()
                       if isinstance(o, T.ThresholdOp)), op
        for a in EDGES[::2]:
            v = [consts.get(k, a if k == 0 else a ^ 0x5A5A_5A5A) for k in range(BIT_OPS[op])]
            assert run_named(program, 32, [a, a ^ 0x5A5A_5A5A]) == ALU[op](*v), (op, a)
    k = 0x9249_2493            # mul.hi.s by −1840700269: x / 7
    program = build_bit_op("mul.hi.s", 32, {1: k})
    _, neurons = layers_and_neurons(program)
    assert neurons < 2000
    for a in EDGES:
        assert run_named(program, 32, [a]) == ALU["mul.hi.s"](a, k)


@settings(max_examples=100, deadline=None)
@given(weights=st.lists(st.integers(-300, 300).filter(bool), min_size=1, max_size=6),
       const=st.integers(-40, 40), t=st.integers(-600, 600))
def test_tighten_keeps_the_function(weights, const, t):
    """`_tighten` (which brings lopsided digit rows within the gadget bounds)
    changes the weights, never the threshold function."""
    form = Form({(None, i): w for i, w in enumerate(weights)}, const)
    tight, u = _tighten(form, t)
    def value(f: Form, bits: tuple[int, ...]) -> int:
        return f.const + sum(w * bits[i] for (_, i), w in f.terms.items())

    for bits in itertools.product((0, 1), repeat=len(weights)):
        assert (value(form, bits) >= t) == (value(tight, bits) >= u)
    assert all(abs(tight.terms[k]) <= abs(w) for k, w in form.terms.items())


# ----------------------------------------------------------------- narrow multipliers

MULS = ("mul_lo", "mad_lo", "mul.hi.u", "mul.hi.s")


def build_mul(op: str, w: int, **alu_options) -> T.ProgramOp:
    return build_bit_op(op, w, **alu_options) if op in BIT_OPS else build(op, w, **alu_options)


def check_mul(program: T.ProgramOp, op: str, w: int, cases) -> None:
    for a, b, c in cases:
        want = bit_reference(op, w, a, b) if op in BIT_OPS else reference(op, w, a, b, c)
        assert run_named(program, w, (a, b, c)) == want, (op, w, a, b, c)


@pytest.mark.parametrize("op", MULS)
def test_narrow_exhaustive_at_small_width(op):
    """The digit-serial multipliers on every operand pair (mad: a third of the
    addends too at W = 4): one further digit at W = 4, one digit per further
    row (digit_bits 1) and pairs of rows at W = 5."""
    for w, digit_bits in ((4, 4), (5, 1), (5, 2)):
        thirds = range(0, 1 << w, 3) if op == "mad_lo" and w == 4 else [0, (1 << w) - 1, 5]
        program = build_mul(op, w, narrow=True, digit_bits=digit_bits)
        check_mul(program, op, w, itertools.product(range(1 << w), range(1 << w), thirds))


#: 0, 1, −1, INT_MIN, INT_MAX, their neighbours, powers of two.
MUL_EDGES = [0, 1, 3, 0xFFFF_FFFF, 0xFFFF_FFFE, 0x8000_0000, 0x8000_0001, 0x7FFF_FFFF,
             0x0000_FFFF, 1 << 7, 1 << 24, 0xDEAD_BEEF]


@pytest.fixture(scope="module")
def muls(wide, wide_bits):
    """The 32-bit multipliers, narrow (the default for two registers: the
    programs of `wide` and `wide_bits`, see test_default_keeps_cheap_products_wide)
    and wide."""
    cache: dict[str, T.ProgramOp] = {}

    def get(op: str, narrow: bool) -> T.ProgramOp:
        if narrow:
            return wide_bits(op) if op in BIT_OPS else wide(op)
        if op not in cache:
            cache[op] = build_mul(op, 32, narrow=False)
        return cache[op]
    yield get
    cache.clear()
    gc.collect()


@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize("op", MULS)
def test_muls_edges_at_32_bits(muls, op, narrow):
    cases = [(a, b, c) for a in MUL_EDGES for b in MUL_EDGES
             for c in ((0, 0xFFFF_FFFF) if op == "mad_lo" else (0,))]
    check_mul(muls(op, narrow), op, 32, cases)


@settings(max_examples=40, deadline=None)
@given(a=WORDS, b=WORDS, c=WORDS)
def test_muls_drawn_at_32_bits(muls, a, b, c):
    for op in MULS:
        for narrow in (True, False):
            check_mul(muls(op, narrow), op, 32, [(a, b, c), (b, a, c), (a, a, c)])


@pytest.mark.parametrize("op, digit_bits", [("mul.hi.s", 2), ("mad_lo", 6)])
def test_narrow_digit_bits(op, digit_bits):
    """Other digit sizes (more, shorter rounds or fewer, longer ones)."""
    rng = random.Random(digit_bits)
    cases = [(rng.randrange(1 << 32), rng.randrange(1 << 32), rng.randrange(1 << 32))
             for _ in range(12)] + [(0xFFFF_FFFF, 0xFFFF_FFFF, 0xFFFF_FFFF),
                                    (0x8000_0000, 0x8000_0000, 1), (0x8000_0000, 0xFFFF_FFFF, 0)]
    check_mul(build_mul(op, 32, narrow=True, digit_bits=digit_bits), op, 32, cases)


def test_narrow_with_constant_bits():
    """Narrow with constant bits in a factor (forced: the default keeps a byte
    wide): a zero-extended half and byte, the sign half fixed to ones
    (x_s ∧ ¬y_j of a constant y_j is a single bit: those merge by weight)."""
    b = T.ProgramBuilder("consts")
    alu = Alu(b, narrow=True)
    x, y, z = b.input("x", 32), b.input("y", 16), b.input("z", 8)
    v = {"h": b.concat([y, alu.const(0, 16)]), "b": b.concat([z, alu.const(0, 24)]),
         "s": b.concat([y, alu.const(0xFFFF, 16)])}
    outs = {"mul.lo h": alu.mul_lo(x, v["h"]), "mul.hi.s s": alu.mul_hi(x, v["s"], True),
            "mul.hi.s b": alu.mul_hi(v["b"], x, True)}
    for name, out in outs.items():
        b.output(name.replace(".", "_").replace(" ", "_"), out)
    program = b.program
    program.verify()
    rng = random.Random(3)
    for a in MUL_EDGES + [rng.randrange(1 << 32) for _ in range(8)]:
        c, d = rng.randrange(1 << 16), rng.randrange(256)
        got, _ = run_tensor(program, {"x": to_bits(a, 32), "y": to_bits(c, 16),
                                      "z": to_bits(d, 8)})
        values = {"h": c, "b": d, "s": c | 0xFFFF_0000}
        for name in outs:
            op, which = name.split()
            want = ALU[op](a, values[which])
            assert from_bits(got[name.replace(".", "_").replace(" ", "_")]) == want, (name, a)


def test_default_keeps_cheap_products_wide():
    """The automatic choice: a constant factor or a zero-extended byte
    (ctaid·ntid) builds the wide multiplier (few products, shallow), two
    registers (`Alu.narrow_min_bits` variable bits or more) the narrow one;
    `narrow` on the Alu or the call overrides."""
    def ops(build_it, **alu_options) -> list[tuple[int, int]]:
        b = T.ProgramBuilder("choice")
        alu = Alu(b, **alu_options)
        x, y = b.input("x", 16), b.input("y", 8)
        b.output("out", build_it(alu, x, b.concat([y, alu.const(0, 8)])))
        return [(T.width_of(op.result), op.gadget_neuron_count()) for op in b.program.ops()
                if isinstance(op, T.ThresholdOp)]

    byte = ops(lambda alu, x, y: alu.mul_lo(x, y))
    assert byte == ops(lambda alu, x, y: alu.mul_lo(x, y, narrow=False))
    assert byte != ops(lambda alu, x, y: alu.mul_lo(x, y, narrow=True))
    assert byte != ops(lambda alu, x, y: alu.mul_lo(x, y), narrow=True)
    const = ops(lambda alu, x, y: alu.mul_hi(x, alu.const(0x9493, 16), True))
    assert const == ops(lambda alu, x, y: alu.mul_hi(x, alu.const(0x9493, 16), True,
                                                     narrow=False))
    full = ops(lambda alu, x, y: alu.mul_hi(x, x, False))
    assert full == ops(lambda alu, x, y: alu.mul_hi(x, x, False, narrow=True))
    assert full != ops(lambda alu, x, y: alu.mul_hi(x, x, False, narrow=False))
    assert full != ops(lambda alu, x, y: alu.mul_hi(x, x, False), narrow=False)
    assert ops(lambda alu, x, y: alu.mad_lo(x, x, x)) == \
        ops(lambda alu, x, y: alu.mad_lo(x, x, x, narrow=True))


def test_mul_wide():
    """Both words of x·y from one circuit (PTX mul.wide): every pair at W = 4
    (narrow and wide) and 5, edges at 32 bits."""
    for w, signed, narrow in [(4, False, True), (4, True, True), (5, True, True),
                              (32, True, True), (4, False, False), (4, True, False)]:
        b = T.ProgramBuilder("wide")
        alu = Alu(b, narrow=narrow, digit_bits=2)
        x, y = b.input("x", w), b.input("y", w)
        lo, hi = alu.mul_wide(x, y, signed)
        b.output("lo", lo)
        b.output("hi", hi)
        b.program.verify()
        pairs = MUL_EDGES if w == 32 else range(1 << w)
        for a, c in itertools.product(pairs, repeat=2):
            product = signed_or_not(a, w, signed) * signed_or_not(c, w, signed)
            out, _ = run_tensor(b.program, {"x": to_bits(a, w), "y": to_bits(c, w)})
            assert from_bits(out["lo"]) | from_bits(out["hi"]) << w == product % (1 << 2 * w)


@pytest.mark.parametrize("w", [3, 32])
def test_narrow_words_are_shared(w):
    """A narrow mul_hi / mul_wide of x, y keeps both words: a later mul_lo of
    x, y (or y, x) is that low word, a later mul_hi of the other signedness
    the high word corrected by x_s·Y + y_s·X (4 layers, no second multiplier)."""
    b = T.ProgramBuilder("shared")
    alu = Alu(b, narrow=True, digit_bits=2 if w < 8 else 4)
    x, y = b.input("x", w), b.input("y", w)
    outs = {"hu": alu.mul_hi(x, y, False), "lo": alu.mul_lo(y, x), "hs": alu.mul_hi(y, x, True)}
    wide_lo, wide_hi = alu.mul_wide(x, y, True)
    assert wide_lo is outs["lo"]
    outs["ws"] = wide_hi
    for name, v in outs.items():
        b.output(name, v)
    program = b.program
    program.verify()
    if w == 32:
        layers, neurons = layers_and_neurons(program, 10**6, 6144)
        assert layers <= 14 and neurons < 7_500         # one multiplier, one correction
    m = (1 << w) - 1
    pairs = itertools.product(MUL_EDGES, repeat=2) if w == 32 else \
        itertools.product(range(1 << w), repeat=2)
    for a, c in pairs:
        got, _ = run_tensor(program, {"x": to_bits(a, w), "y": to_bits(c, w)})
        high_s = (signed(a, w) * signed(c, w) >> w) & m
        want = {"hu": a * c >> w, "lo": a * c & m, "hs": high_s, "ws": high_s}
        assert {k: from_bits(v) for k, v in got.items()} == want, (a, c)


def signed_or_not(v: int, w: int, is_signed: bool) -> int:
    return signed(v, w) if is_signed else v


def live_peak(program: T.ProgramOp) -> int:
    """Most bits alive at once in a scheduled program (inputs and outputs too)."""
    from qgc.passes.tensor_schedule_layers import peak_live
    reads = T.bit_reads(program)
    intervals = []
    for op in program.ops():
        if isinstance(op, T.InputOp | T.KvReadOp | T.ThresholdOp):
            birth = T.birth_half(op)
            for c in T.coords_of(op.coords.get_values()):  # type: ignore[union-attr]
                intervals.append((birth, max(reads.get((op, c), birth), birth + 1)))
    return peak_live(intervals)


@pytest.mark.parametrize("op", ["mul_lo", "mul.hi.s"])
def test_narrow_is_narrow(muls, op):
    """What the narrow multipliers are for: one lane at W = 32 keeps under half
    the bits alive of the wide one (mul.hi.s about 220 against 724, mul_lo
    about 175 against 404, inputs and outputs included), within 12 layers."""
    peaks = {}
    for narrow in (True, False):
        program = muls(op, narrow)
        layers, _ = layers_and_neurons(program, 10**6, 6144)
        peaks[narrow] = live_peak(program)
        print(f"\n{op} {'narrow' if narrow else 'wide'}: {layers} layers, "
              f"{peaks[narrow]} bits live at most")
        assert layers <= (12 if narrow else 5)
    assert 2 * peaks[True] < peaks[False]


# ----------------------------------------------------------------- depth

#: Scheduled layers at W = 32 on the 2B shape: regressions show here.
DEPTH = {"add": 2, "sub": 2, "neg": 2, "setp.lt.s": 2, "setp.ge.u": 2, "eq": 2, "select": 1,
         "mask": 1, "and_": 1, "xor": 1, "min.s": 2, "shl": 2, "shr.s": 2, "sum": 3,
         "mul_lo": 8, "mad_lo": 8,
         "abs": 1, "popc": 1, "clz": 1, "bfind.shiftamt.u": 1, "bfind.s": 1, "bfe.u": 2,
         "bfe.s": 2, "bfi": 2, "shf.l.wrap": 1, "shf.r.clamp": 1, "mul.hi.u": 10, "mul.hi.s": 10}


def layers_and_neurons(program: T.ProgramOp, hidden=2048, inter=6144) -> tuple[int, int]:
    schedule(program, hidden, inter, 16)
    program.verify()
    n = sum(op.gadget_neuron_count() for op in program.ops() if isinstance(op, T.ThresholdOp))
    layers = program.limit("layers")
    assert layers is not None
    return layers, n


@pytest.mark.parametrize("op", list(DEPTH))
def test_depth_at_32_bits(wide, wide_bits, op):
    layers, neurons = layers_and_neurons(wide_bits(op) if op in BIT_OPS else wide(op))
    print(f"\n{op}: {layers} layers, {neurons} neurons (W = 32, one lane)")
    assert layers == DEPTH[op]


def test_small_widths_are_shallower():
    assert layers_and_neurons(build("add", 8))[0] == 1
    assert layers_and_neurons(build("setp.lt.s", 8))[0] == 1


def test_brev_is_a_view():
    program = build_bit_op("brev", 32)
    assert not any(isinstance(op, T.ThresholdOp) for op in program.ops())


# ----------------------------------------------------------------- stock layers

torch = pytest.importorskip("torch")
DTYPES = ("float32", "bfloat16")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def stock_config(hidden: int, inter: int):
    import json

    from transformers.models.qwen3_5 import Qwen3_5TextConfig

    from conftest import BASE_2B
    base = json.loads(BASE_2B.read_text())
    base.update(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=1,
                layer_types=["linear_attention"])
    return Qwen3_5TextConfig(**base)


class Stock:
    """A compiled program's layers as stock `Qwen3_5DecoderLayer` modules
    (built once), run as one prefill; sum(h²) checked after every layer."""

    def __init__(self, compiled, dtype: str, hidden: int):
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding
        self.compiled, self.hidden = compiled, hidden
        self.dtype = getattr(torch, dtype)
        self.layers = compiled.build_layers(self.dtype)
        self.rotary = Qwen3_5TextRotaryEmbedding(compiled.layer_config())

    def prefill(self, h):
        x = h.to(self.dtype)[None]
        pos = torch.arange(x.shape[1])[None]
        with torch.no_grad():
            for layer in self.layers:
                x = layer(x, position_embeddings=self.rotary(x, pos), attention_mask=None,
                          position_ids=pos)
                e = x.double().pow(2).sum(-1)
                assert bool((e == 64 * self.hidden).all()), "sum(h²) drifted"
        return x[0].double()


#: (op, hidden, intermediate) of the stock runs: the 0.8B width where the
#: program's bits fit, else the 2B width with fewer neurons.
STOCK = {"add": (1024, 3584), "setp.lt.s": (1024, 3584), "select": (1024, 3584),
         "mul_lo": (1024, 3584), "popc": (1024, 3584), "clz": (1024, 3584),
         "mul.hi.s": (1024, 3584)}


@pytest.fixture(scope="module", params=list(STOCK))
def stock(request):
    from qgc.passes.tensor_to_weights import compile_program
    op = request.param
    hidden, inter = STOCK[op]
    program = build_bit_op(op, 32) if op in BIT_OPS else build(op, 32)
    schedule(program, hidden, inter, 16)
    program.verify()
    compiled = compile_program(program, stock_config(hidden, inter))
    return op, compiled, {d: Stock(compiled, d, hidden) for d in DTYPES}


def test_stock_layers_match_engine(stock):
    op, compiled, runs = stock
    rng = random.Random(11)
    cases = [(a, b, c) for a, b, c in zip(EDGES, reversed(EDGES), itertools.cycle((0, 1)))]
    cases += [(rng.randrange(1 << 32), rng.randrange(1 << 32), rng.randrange(2))
              for _ in range(50 - len(cases))]
    tokens, expected = [], []
    names = {o.input_name.data for o in compiled.program.inputs()}
    for a, b, c in cases:
        inputs = {n: to_bits(v, 32) for n, v in zip("xyz", (a, b, c), strict=True) if n in names}
        out, _ = run_tensor(compiled.program, inputs)
        want = ALU[op](*(a, b, c)[:BIT_OPS[op]]) if op in BIT_OPS else reference(op, 32, a, b, c)
        assert from_bits(out["out"]) == want
        tokens.append(compiled.encode(inputs))
        expected.append(out)
    h = torch.tensor(tokens, dtype=torch.float64)
    coords = compiled.output_coords()
    for dtype, r in runs.items():
        h_out = r.prefill(h)
        vals = h_out[:, coords]
        assert bool(((vals == 1) | (vals == -1)).all()), (op, dtype)
        got = [compiled.decode(row) for row in h_out.tolist()]
        assert got == expected, (op, dtype)
    print(f"\n{op}: {compiled.program.limit('layers')} stock layers, exact in "
          f"{', '.join(runs)} on {len(cases)} operand pairs")
