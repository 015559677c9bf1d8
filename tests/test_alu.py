"""qgc.alu: every circuit against Python's integer semantics on the ideal
`tensor` engine (exhaustively at small widths, on drawn and edge operands at
32 bits, at every width 1..32), the scheduled depth of the main circuits at 32
bits, and add / setp / select / mul_lo compiled into stock
`Qwen3_5DecoderLayer` modules in float32 and bfloat16, bit for bit against
the engine. `pytest -s` prints depth and neurons per op."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qgc.alu import CONDS, Alu
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.passes.tensor_schedule_layers import schedule
from qgc.runtime.tensor_engine import from_bits, run_tensor, to_bits


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
       *(f"setp.{c}" for c in simt.SETP_CONDS)]


def build(op: str, w: int) -> T.ProgramOp:
    b = T.ProgramBuilder(op.replace(".", "_"))
    x, y, z = b.input("x", w), b.input("y", w), b.input("z", w)
    alu = Alu(b)
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
    assert set(CONDS) == set(simt.SETP_CONDS)


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


def test_a_zero_factor_leaves_no_products():
    """Regression (matmul4x4 at the tensor level): `mul_lo`/`mad_lo` with the
    constant 0 as a factor build no partial products at all; x·0 is 0 and
    x·0 + z is z, with no empty threshold."""
    b = T.ProgramBuilder("zero_factor")
    alu = Alu(b)
    x, z = b.input("x", 32), b.input("z", 32)
    zero = alu.const(0, 32)
    b.output("mul", alu.mul_lo(x, zero))
    b.output("mad", alu.mad_lo(zero, x, z))
    program = b.program
    program.verify()
    for a, c in zip(EDGES, reversed(EDGES), strict=True):
        out, _ = run_tensor(program, {"x": to_bits(a, 32), "z": to_bits(c, 32)})
        assert from_bits(out["mul"]) == 0
        assert from_bits(out["mad"]) == c


# ----------------------------------------------------------------- depth

#: Scheduled layers at W = 32 on the 2B shape: regressions show here.
DEPTH = {"add": 2, "sub": 2, "neg": 2, "setp.lt.s": 2, "setp.ge.u": 2, "eq": 2, "select": 1,
         "mask": 1, "and_": 1, "xor": 1, "min.s": 2, "shl": 2, "shr.s": 2, "sum": 3,
         "mul_lo": 5, "mad_lo": 5}


def layers_and_neurons(program: T.ProgramOp, hidden=2048, inter=6144) -> tuple[int, int]:
    schedule(program, hidden, inter, 16)
    program.verify()
    n = sum(op.gadget_neuron_count() for op in program.ops() if isinstance(op, T.ThresholdOp))
    layers = program.limit("layers")
    assert layers is not None
    return layers, n


@pytest.mark.parametrize("op", list(DEPTH))
def test_depth_at_32_bits(wide, op):
    layers, neurons = layers_and_neurons(wide(op))
    print(f"\n{op}: {layers} layers, {neurons} neurons (W = 32, one lane)")
    assert layers == DEPTH[op]


def test_small_widths_are_shallower():
    assert layers_and_neurons(build("add", 8))[0] == 1
    assert layers_and_neurons(build("setp.lt.s", 8))[0] == 1


# ----------------------------------------------------------------- stock layers

torch = pytest.importorskip("torch")
DTYPES = ("float32", "bfloat16")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def stock_config(hidden: int, inter: int):
    import json

    from transformers.models.qwen3_5 import Qwen3_5TextConfig

    from conftest import SHARED
    base = json.loads((SHARED / "qwen3_5_2b_text_config.json").read_text())
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
         "mul_lo": (2048, 2048)}


@pytest.fixture(scope="module", params=list(STOCK))
def stock(request):
    from qgc.runtime.tensor_codegen import compile_program
    op = request.param
    hidden, inter = STOCK[op]
    program = build(op, 32)
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
    for a, b, c in cases:
        inputs = {"x": to_bits(a, 32), "y": to_bits(b, 32), "z": to_bits(c, 32)}
        out, _ = run_tensor(compiled.program, inputs)
        assert from_bits(out["out"]) == reference(op, 32, a, b, c)
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
