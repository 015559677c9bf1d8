"""Integer semantics of the reference engine: arithmetic (add .. sad), bit
operations (and .. dp2a), and compare and select (setp, set, selp, slct; their
f32 forms too). The f32 forms of add/sub/mul/mad/div/abs/neg/min/max are
decoded by ref_float's helpers."""

from __future__ import annotations

from collections.abc import Callable

from qgc.dialects.ptx import Imm, Pair
from qgc.runtime import float32 as F
from qgc.runtime import float64 as D
from qgc.runtime import ref_float64 as R64
from qgc.runtime.ref_decode import (
    ALU,
    BIT_TYPES,
    ROUNDINGS,
    Ctx,
    is_signed,
    mask,
    op,
    signed,
    type_bits,
)
from qgc.runtime.ref_float import (
    float_approx_div,
    float_binary,
    float_bits_unary,
    float_fma,
    float_minmax,
)

# ============================================================ integer arithmetic

INT_ARITH = ("u16", "s16", "u32", "s32", "u64", "s64")
_WIDE = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64"}


def _int_operands(cx: Ctx, t: str, n: int) -> tuple[Callable, list[Callable]]:
    ops = cx.operands(n + 1)
    return cx.dst(ops[0], t), [cx.src(o, t) for o in ops[1:]]


def _binary(cx: Ctx, t: str, fn: Callable) -> tuple[int, Callable]:
    """d = fn(a, b) masked to the type's width."""
    d, (a, b) = _int_operands(cx, t, 2)
    m = mask(type_bits(t))

    def run(th):
        d(th, fn(a(th), b(th)) & m)
    return ALU, run


def _sat32(value: int) -> int:
    return min(max(value, -(1 << 31)), (1 << 31) - 1)


@op("add", "add.{u16,s16,u32,s32,u64,s64}", "add.sat.s32", "add.cc.{u32,s32,u64,s64}",
    "add{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32", "add{.rn,.rz,.rm,.rp}.f64",
    desc="integer add (wrapping; .sat clamps s32; .cc sets the carry); f32 and f64 add",
    mods=("sat", "cc", "ftz") + ROUNDINGS)
def _add(cx: Ctx):
    t = cx.one_type(INT_ARITH + BIT_TYPES[1:] + ("f32", "f64"))
    if t == "f32":
        return float_binary(cx, F.add_exact, lambda x, y: x + y)
    if t == "f64":
        return R64.binary(cx, D.add)
    if "cc" in cx.mods:
        return _carry_op(cx, t, sub=False, use_carry=False)
    if "sat" in cx.mods:
        if t != "s32":
            raise cx.unsupported()
        return _binary(cx, t, lambda x, y: _sat32(signed(x, 32) + signed(y, 32)))
    return _binary(cx, t, lambda x, y: x + y)


@op("sub", "sub.{u16,s16,u32,s32,u64,s64}", "sub.sat.s32", "sub.cc.{u32,s32,u64,s64}",
    "sub{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32", "sub{.rn,.rz,.rm,.rp}.f64",
    desc="integer subtract (wrapping; .sat clamps s32; .cc sets the borrow); f32 and f64 "
         "subtract",
    mods=("sat", "cc", "ftz") + ROUNDINGS)
def _sub(cx: Ctx):
    t = cx.one_type(INT_ARITH + BIT_TYPES[1:] + ("f32", "f64"))
    if t == "f32":
        return float_binary(cx, lambda x, y, mode: F.add_exact(x, -y, mode),
                             lambda x, y: x - y)
    if t == "f64":
        return R64.binary(cx, D.sub)
    if "cc" in cx.mods:
        return _carry_op(cx, t, sub=True, use_carry=False)
    if "sat" in cx.mods:
        if t != "s32":
            raise cx.unsupported()
        return _binary(cx, t, lambda x, y: _sat32(signed(x, 32) - signed(y, 32)))
    return _binary(cx, t, lambda x, y: x - y)


def _carry_op(cx: Ctx, t: str, sub: bool, use_carry: bool):
    """add.cc/addc/sub.cc/subc: the carry flag CC.CF lives in `thread.cc`."""
    if t not in ("u32", "s32", "u64", "s64", "b32", "b64"):
        raise cx.unsupported()
    bits = type_bits(t)
    m = mask(bits)
    set_cc = "cc" in cx.mods
    d, (a, b) = _int_operands(cx, t, 2)

    def run(th):
        cin = th.cc if use_carry else 0
        if sub:
            full = a(th) - b(th) - cin
            cout = 1 if full < 0 else 0
        else:
            full = a(th) + b(th) + cin
            cout = full >> bits
        d(th, full & m)
        if set_cc:
            th.cc = cout
    return ALU, run


@op("addc", "addc{.cc}.{u32,s32,u64,s64}", desc="add with carry-in", mods=("cc",))
def _addc(cx: Ctx):
    return _carry_op(cx, cx.one_type(("u32", "s32", "u64", "s64")), sub=False, use_carry=True)


@op("subc", "subc{.cc}.{u32,s32,u64,s64}", desc="subtract with borrow-in", mods=("cc",))
def _subc(cx: Ctx):
    return _carry_op(cx, cx.one_type(("u32", "s32", "u64", "s64")), sub=True, use_carry=True)


def _product(t: str) -> Callable:
    bits = type_bits(t)
    if is_signed(t):
        return lambda x, y: signed(x, bits) * signed(y, bits)
    return lambda x, y: x * y


@op("mul", "mul.{lo,hi}.{u16,s16,u32,s32,u64,s64}", "mul.wide.{u16,s16,u32,s32}",
    "mul{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32", "mul{.rn,.rz,.rm,.rp}.f64",
    desc="integer multiply (low half, high half, or double-width); f32 and f64 multiply",
    mods=("lo", "hi", "wide", "ftz", "sat") + ROUNDINGS)
def _mul(cx: Ctx):
    t = cx.one_type(INT_ARITH + ("f32", "f64"))
    if t == "f32":
        return float_binary(cx, F.mul_exact, lambda x, y: x * y)
    if t == "f64":
        return R64.binary(cx, D.mul)
    bits, prod = type_bits(t), _product(t)
    if "wide" in cx.mods:
        if t not in _WIDE:
            raise cx.unsupported()
        wt = _WIDE[t]
        ops = cx.operands(3)
        d, a, b = cx.dst(ops[0], wt), cx.src(ops[1], t), cx.src(ops[2], t)
        m = mask(2 * bits)
        return ALU, lambda th: d(th, prod(a(th), b(th)) & m)
    if "hi" in cx.mods:
        return _binary(cx, t, lambda x, y: prod(x, y) >> bits)
    if "lo" not in cx.mods:
        raise cx.unsupported("integer mul needs .lo, .hi or .wide")
    return _binary(cx, t, prod)


@op("mad", "mad.{lo,hi}.{u16,s16,u32,s32,u64,s64}", "mad.hi.sat.s32",
    "mad{.lo,.hi}.cc.{u32,s32,u64,s64}",
    "mad.wide.{u16,s16,u32,s32}", "mad{.rn,.rz,.rm,.rp}{.ftz}{.sat}.f32",
    "mad{.rn,.rz,.rm,.rp}.f64",
    desc="integer multiply-add (.cc sets the carry); f32 and f64 mad (a fused "
         "multiply-add, like fma)",
    mods=("lo", "hi", "wide", "sat", "ftz", "cc") + ROUNDINGS)
def _mad(cx: Ctx):
    t = cx.one_type(INT_ARITH + ("f32", "f64"))
    if t == "f32":
        return float_fma(cx)
    if t == "f64":
        return R64.fma(cx)
    if "cc" in cx.mods:
        return _mad_carry(cx, t, use_carry=False)
    bits, prod = type_bits(t), _product(t)
    ops = cx.operands(4)
    if "wide" in cx.mods:
        if t not in _WIDE:
            raise cx.unsupported()
        wt = _WIDE[t]
        d, a, b, c = cx.dst(ops[0], wt), cx.src(ops[1], t), cx.src(ops[2], t), cx.src(ops[3], wt)
        m = mask(2 * bits)
        return ALU, lambda th: d(th, (prod(a(th), b(th)) + c(th)) & m)
    d, a, b, c = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t), cx.src(ops[3], t)
    m = mask(bits)
    if "hi" in cx.mods:
        if "sat" in cx.mods:
            if t != "s32":
                raise cx.unsupported()
            return ALU, lambda th: d(th, _sat32((prod(a(th), b(th)) >> 32)
                                              + signed(c(th), 32)) & m)
        return ALU, lambda th: d(th, ((prod(a(th), b(th)) >> bits) + c(th)) & m)
    if "lo" not in cx.mods or "sat" in cx.mods:
        raise cx.unsupported()
    return ALU, lambda th: d(th, (prod(a(th), b(th)) + c(th)) & m)


@op("madc", "madc{.lo,.hi}{.cc}.{u32,s32,u64,s64}",
    desc="multiply-add with carry-in (.cc sets the carry)", mods=("lo", "hi", "cc"))
def _madc(cx: Ctx):
    return _mad_carry(cx, cx.one_type(("u32", "s32", "u64", "s64")), use_carry=True)


def _mad_carry(cx: Ctx, t: str, use_carry: bool):
    """mad.cc/madc: the product's low or high half plus `c` (plus CC.CF),
    an unsigned add whose carry-out `.cc` writes to `thread.cc`."""
    if t not in ("u32", "s32", "u64", "s64") or ("lo" in cx.mods) == ("hi" in cx.mods):
        raise cx.unsupported("mad.cc and madc need .lo or .hi")
    bits, prod = type_bits(t), _product(t)
    m, shift, set_cc = mask(bits), bits if "hi" in cx.mods else 0, "cc" in cx.mods
    d, (a, b, c) = _int_operands(cx, t, 3)

    def run(th):
        full = (prod(a(th), b(th)) >> shift & m) + c(th) + (th.cc if use_carry else 0)
        d(th, full & m)
        if set_cc:
            th.cc = full >> bits
    return ALU, run


def _mul24(cx: Ctx, with_c: bool):
    t = cx.one_type(("u32", "s32"))
    ops = cx.operands(4 if with_c else 3)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t)
    c = cx.src(ops[3], t) if with_c else (lambda th: 0)
    sgn = is_signed(t)
    hi = "hi" in cx.mods
    if not hi and "lo" not in cx.mods:
        raise cx.unsupported()

    def operand24(x: int) -> int:
        x &= 0xFFFFFF
        return signed(x, 24) if sgn else x

    def run(th):
        p = operand24(a(th)) * operand24(b(th))
        p = (p >> 16) if hi else p
        d(th, (p + c(th)) & 0xFFFFFFFF)
    return ALU, run


@op("mul24", "mul24.{lo,hi}.{u32,s32}", desc="24-bit multiply", mods=("lo", "hi"))
def _mul24_op(cx: Ctx):
    return _mul24(cx, with_c=False)


@op("mad24", "mad24.{lo,hi}.{u32,s32}", desc="24-bit multiply-add", mods=("lo", "hi"))
def _mad24_op(cx: Ctx):
    return _mul24(cx, with_c=True)


def _int_div(t: str) -> Callable:
    bits = type_bits(t)
    m = mask(bits)
    if not is_signed(t):
        return lambda x, y: x // y if y else m
    def div(x, y):
        if y == 0:
            return m
        sx, sy = signed(x, bits), signed(y, bits)
        q = abs(sx) // abs(sy)
        return -q if (sx < 0) != (sy < 0) else q
    return div


def _int_rem(t: str) -> Callable:
    bits = type_bits(t)
    if not is_signed(t):
        return lambda x, y: x % y if y else x
    def rem(x, y):
        if y == 0:
            return x
        sx, sy = signed(x, bits), signed(y, bits)
        r = abs(sx) % abs(sy)
        return -r if sx < 0 else r
    return rem


@op("div", "div.{u16,s16,u32,s32,u64,s64}", "div{.rn,.rz,.rm,.rp}{.ftz}.f32",
    "div.approx{.ftz}.f32", "div.full{.ftz}.f32", "div{.rn,.rz,.rm,.rp}.f64",
    desc="integer divide (toward zero; x/0 = all ones); f32 and f64 divide (correctly rounded, or "
         "qgc's approx algorithms: div.approx a*rcp.rn(b), div.full div.rn)",
    mods=("approx", "full", "ftz") + ROUNDINGS)
def _div(cx: Ctx):
    t = cx.one_type(INT_ARITH + ("f32", "f64"))
    if t == "f64":
        return R64.binary(cx, D.div)
    if t == "f32":
        if cx.mods & {"approx", "full"}:
            return float_approx_div(cx)
        return float_binary(cx, F.div_exact, F.div_float)
    return _binary(cx, t, _int_div(t))


@op("rem", "rem.{u16,s16,u32,s32,u64,s64}",
    desc="integer remainder (sign of the dividend; x rem 0 = x)")
def _rem(cx: Ctx):
    t = cx.one_type(INT_ARITH)
    return _binary(cx, t, _int_rem(t))


@op("abs", "abs.{s16,s32,s64}", "abs{.ftz}.f32", "abs.f64",
    desc="absolute value (floats: clears the sign)",
    mods=("ftz",))
def _abs(cx: Ctx):
    t = cx.one_type(("s16", "s32", "s64", "f32", "f64"))
    if t == "f32":
        return float_bits_unary(cx, lambda b: b & 0x7FFFFFFF)
    if t == "f64":
        return R64.bits_unary(cx, lambda b: b & ~D.SIGN)
    bits = type_bits(t)
    return _unary(cx, t, lambda x: abs(signed(x, bits)))


@op("neg", "neg.{s16,s32,s64}", "neg{.ftz}.f32", "neg.f64", desc="negate (floats: flips the sign)",
    mods=("ftz",))
def _neg(cx: Ctx):
    t = cx.one_type(("s16", "s32", "s64", "f32", "f64"))
    if t == "f32":
        return float_bits_unary(cx, lambda b: b ^ F.SIGN)
    if t == "f64":
        return R64.bits_unary(cx, lambda b: b ^ D.SIGN)
    return _unary(cx, t, lambda x: -x)


def _unary(cx: Ctx, t: str, fn: Callable, dt: str | None = None):
    ops = cx.operands(2)
    d, a = cx.dst(ops[0], dt or t), cx.src(ops[1], t)
    m = mask(type_bits(dt or t))
    return ALU, lambda th: d(th, fn(a(th)) & m)


def int_minmax(t: str, pick_max: bool) -> Callable:
    bits = type_bits(t)
    if is_signed(t):
        if pick_max:
            return lambda x, y: x if signed(x, bits) >= signed(y, bits) else y
        return lambda x, y: x if signed(x, bits) <= signed(y, bits) else y
    return max if pick_max else min


def _minmax(cx: Ctx, pick_max: bool):
    t = cx.one_type(INT_ARITH + ("f32", "f64"))
    if t == "f32":
        return float_minmax(cx, pick_max)
    if t == "f64":
        return R64.minmax(cx, pick_max)
    fn = int_minmax(t, pick_max)
    if "relu" in cx.mods:
        if t != "s32":
            raise cx.unsupported()
        inner = fn
        fn = lambda x, y: max(signed(inner(x, y), 32), 0)  # noqa: E731
    return _binary(cx, t, fn)


@op("min", "min{.relu}.{u16,s16,u32,s32,u64,s64}", "min{.ftz}{.NaN}.f32", "min.f64",
    desc="minimum (f32: the non-NaN operand; -0 < +0)", mods=("relu", "ftz", "NaN"))
def _min(cx: Ctx):
    return _minmax(cx, pick_max=False)


@op("max", "max{.relu}.{u16,s16,u32,s32,u64,s64}", "max{.ftz}{.NaN}.f32", "max.f64",
    desc="maximum (f32: the non-NaN operand; -0 < +0)", mods=("relu", "ftz", "NaN"))
def _max(cx: Ctx):
    return _minmax(cx, pick_max=True)


@op("sad", "sad.{u16,s16,u32,s32,u64,s64}", desc="sum of absolute difference: c + |a - b|")
def _sad(cx: Ctx):
    t = cx.one_type(INT_ARITH)
    bits = type_bits(t)
    d, (a, b, c) = _int_operands(cx, t, 3)
    m = mask(bits)
    conv = (lambda x: signed(x, bits)) if is_signed(t) else (lambda x: x)
    return ALU, lambda th: d(th, (c(th) + abs(conv(a(th)) - conv(b(th)))) & m)


# ================================================================ bit operations

LOGIC_TYPES = ("b16", "b32", "b64", "pred")


def _logic(cx: Ctx, fn: Callable, pred_fn: Callable):
    t = cx.one_type(LOGIC_TYPES)
    if t == "pred":
        ops = cx.operands(3)
        d, a, b = cx.dst(ops[0], "pred"), cx.psrc(ops[1]), cx.psrc(ops[2])
        return ALU, lambda th: d(th, pred_fn(a(th), b(th)))
    return _binary(cx, t, fn)


@op("and", "and.{b16,b32,b64,pred}", desc="bitwise and")
def _and(cx: Ctx):
    return _logic(cx, lambda x, y: x & y, lambda x, y: x and y)


@op("or", "or.{b16,b32,b64,pred}", desc="bitwise or")
def _or(cx: Ctx):
    return _logic(cx, lambda x, y: x | y, lambda x, y: x or y)


@op("xor", "xor.{b16,b32,b64,pred}", desc="bitwise exclusive or")
def _xor(cx: Ctx):
    return _logic(cx, lambda x, y: x ^ y, lambda x, y: x != y)


@op("not", "not.{b16,b32,b64,pred}", desc="bitwise not")
def _not(cx: Ctx):
    t = cx.one_type(LOGIC_TYPES)
    if t == "pred":
        ops = cx.operands(2)
        d, a = cx.dst(ops[0], "pred"), cx.psrc(ops[1])
        return ALU, lambda th: d(th, not a(th))
    return _unary(cx, t, lambda x: ~x)


@op("cnot", "cnot.{b16,b32,b64}", desc="C logical not: 1 if a == 0 else 0")
def _cnot(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:])
    return _unary(cx, t, lambda x: 1 if x == 0 else 0)


@op("shl", "shl.{b16,b32,b64}", desc="shift left (amounts >= width give 0)")
def _shl(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:])
    bits = type_bits(t)
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], "u32")
    m = mask(bits)
    return ALU, lambda th: d(th, (a(th) << min(b(th), bits)) & m)


@op("shr", "shr.{b16,b32,b64,u16,u32,u64,s16,s32,s64}",
    desc="shift right, logical (.b/.u) or arithmetic (.s); amounts >= width clamp")
def _shr(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:] + INT_ARITH)
    bits = type_bits(t)
    ops = cx.operands(3)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], "u32")
    m = mask(bits)
    if is_signed(t):
        return ALU, lambda th: d(th, (signed(a(th), bits) >> min(b(th), bits)) & m)
    return ALU, lambda th: d(th, a(th) >> min(b(th), bits))


@op("shf", "shf.{l,r}.{wrap,clamp}.b32", desc="funnel shift of the 64-bit pair {b, a}",
    mods=("l", "r", "wrap", "clamp"))
def _shf(cx: Ctx):
    cx.one_type(("b32",))
    left, clamp = "l" in cx.mods, "clamp" in cx.mods
    if left == ("r" in cx.mods) or clamp == ("wrap" in cx.mods):
        raise cx.unsupported()
    ops = cx.operands(4)
    d, a, b, c = (cx.dst(ops[0], "b32"), cx.src(ops[1], "b32"), cx.src(ops[2], "b32"),
                  cx.src(ops[3], "u32"))

    def run(th):
        n = min(c(th), 32) if clamp else c(th) & 31
        pair = (b(th) << 32) | a(th)
        d(th, ((pair << n) >> 32) & 0xFFFFFFFF if left else (pair >> n) & 0xFFFFFFFF)
    return ALU, run


@op("popc", "popc.{b32,b64}", desc="population count (.u32 result)")
def _popc(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    return _unary(cx, t, lambda x: bin(x).count("1"), dt="u32")


@op("clz", "clz.{b32,b64}", desc="count leading zeros (.u32 result)")
def _clz(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    bits = type_bits(t)
    return _unary(cx, t, lambda x: bits - x.bit_length(), dt="u32")


@op("bfind", "bfind{.shiftamt}.{u32,s32,u64,s64}",
    desc="position of the most significant non-sign bit (0xFFFFFFFF if none)",
    mods=("shiftamt",))
def _bfind(cx: Ctx):
    t = cx.one_type(("u32", "s32", "u64", "s64"))
    bits, sgn, shiftamt = type_bits(t), is_signed(t), "shiftamt" in cx.mods

    def find(x: int) -> int:
        if sgn and x >> (bits - 1):
            x = ~x & mask(bits)
        if x == 0:
            return 0xFFFFFFFF
        pos = x.bit_length() - 1
        return bits - 1 - pos if shiftamt else pos
    return _unary(cx, t, find, dt="u32")


@op("brev", "brev.{b32,b64}", desc="bit reverse")
def _brev(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    bits = type_bits(t)
    return _unary(cx, t, lambda x: int(format(x, f"0{bits}b")[::-1], 2))


@op("bfe", "bfe.{u32,s32,u64,s64}", desc="bit field extract (sign-extended for .s)")
def _bfe(cx: Ctx):
    t = cx.one_type(("u32", "s32", "u64", "s64"))
    bits, sgn = type_bits(t), is_signed(t)
    msb = bits - 1
    ops = cx.operands(4)
    d, a, b, c = (cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], "u32"),
                  cx.src(ops[3], "u32"))

    def run(th):
        x, pos, length = a(th), b(th) & 0xFF, c(th) & 0xFF
        sbit = (x >> min(pos + length - 1, msb)) & 1 if sgn and length else 0
        field = (x >> pos) & mask(length) if pos <= msb else 0
        taken = max(0, min(length, bits - pos))
        result = field & mask(taken)
        if sbit:
            result |= mask(bits) & ~mask(taken)
        d(th, result)
    return ALU, run


@op("bfi", "bfi.{b32,b64}", desc="bit field insert")
def _bfi(cx: Ctx):
    t = cx.one_type(("b32", "b64"))
    bits = type_bits(t)
    ops = cx.operands(5)
    d, a, b = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t)
    c, e = cx.src(ops[3], "u32"), cx.src(ops[4], "u32")

    def run(th):
        pos, length = c(th) & 0xFF, e(th) & 0xFF
        if pos >= bits:
            d(th, b(th))
            return
        field = mask(min(length, bits - pos)) << pos
        d(th, (b(th) & ~field | (a(th) << pos) & field) & mask(bits))
    return ALU, run


_PRMT_MODES = {  # selector c[1:0] → source byte of d.b0, d.b1, d.b2, d.b3
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


def prmt(a: int, b: int, c: int, mode: str | None) -> int:
    """The byte permute of `prmt.b32{.mode}`."""
    source = (b << 32) | a
    out = 0
    for i in range(4):
        if mode is None:
            sel = (c >> (4 * i)) & 0xF
            byte = (source >> (8 * (sel & 7))) & 0xFF
            if sel & 8:
                byte = 0xFF if byte & 0x80 else 0
        else:
            byte = (source >> (8 * _PRMT_MODES[mode][c & 3][i])) & 0xFF
        out |= byte << (8 * i)
    return out


@op("prmt", "prmt.b32{.f4e,.b4e,.rc8,.ecl,.ecr,.rc16}", desc="byte permute",
    mods=tuple(_PRMT_MODES))
def _prmt(cx: Ctx):
    cx.one_type(("b32",))
    modes = [m for m in cx.code.modifiers if m in _PRMT_MODES]
    mode = modes[0] if modes else None
    ops = cx.operands(4)
    d, a, b, c = (cx.dst(ops[0], "b32"), cx.src(ops[1], "b32"), cx.src(ops[2], "b32"),
                  cx.src(ops[3], "b32"))
    return ALU, lambda th: d(th, prmt(a(th), b(th), c(th), mode))


@op("lop3", "lop3.b32", desc="arbitrary three-input logic function (immLut)")
def _lop3(cx: Ctx):
    cx.one_type(("b32",))
    ops = cx.operands(5)
    if not isinstance(ops[4], Imm):
        raise cx.unsupported("lop3's lookup table must be an immediate")
    lut = ops[4].value & 0xFF
    d, a, b, c = (cx.dst(ops[0], "b32"), cx.src(ops[1], "b32"), cx.src(ops[2], "b32"),
                  cx.src(ops[3], "b32"))
    m = 0xFFFFFFFF

    def run(th):
        x, y, z = a(th), b(th), c(th)
        out = 0
        for k in range(8):
            if lut >> k & 1:
                out |= ((x if k & 4 else ~x) & (y if k & 2 else ~y) & (z if k & 1 else ~z))
        d(th, out & m)
    return ALU, run


@op("dp4a", "dp4a.{u32,s32}.{u32,s32}", desc="four-way byte dot product plus accumulator")
def _dp4a(cx: Ctx):
    return _dot_product(cx, 4)


@op("dp2a", "dp2a.{lo,hi}.{u32,s32}.{u32,s32}",
    desc="two-way 16x8-bit dot product plus accumulator", mods=("lo", "hi"))
def _dp2a(cx: Ctx):
    return _dot_product(cx, 2)


def _dot_product(cx: Ctx, ways: int):
    types = cx.code.types
    if len(types) != 2 or any(t not in ("u32", "s32") for t in types):
        raise cx.unsupported()
    ta, tb = types
    ops = cx.operands(4)
    sgn_c = "s32" in types
    d, a, b = cx.dst(ops[0], "s32" if sgn_c else "u32"), cx.src(ops[1], ta), cx.src(ops[2], tb)
    c = cx.src(ops[3], "s32" if sgn_c else "u32")
    hi = "hi" in cx.mods

    def parts(x: int, width: int, sgn: bool, count: int, start: int) -> list[int]:
        vals = [(x >> (width * (start + i))) & mask(width) for i in range(count)]
        return [signed(v, width) if sgn else v for v in vals]

    def run(th):
        if ways == 4:
            xs, ys = parts(a(th), 8, ta[0] == "s", 4, 0), parts(b(th), 8, tb[0] == "s", 4, 0)
        else:
            xs = parts(a(th), 16, ta[0] == "s", 2, 0)
            ys = parts(b(th), 8, tb[0] == "s", 2, 2 if hi else 0)
        d(th, (sum(x * y for x, y in zip(xs, ys, strict=True)) + c(th)) & 0xFFFFFFFF)
    return ALU, run


# ============================================================ compare and select

_INT_CMP = {
    "eq": lambda x, y: x == y, "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
}
_UNSIGNED_CMP = {"lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
_FLOAT_CMP = {
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y and x == x and y == y,
    "lt": lambda x, y: x < y, "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
    "equ": lambda x, y: not (x < y or x > y),
    "neu": lambda x, y: x != y,
    "ltu": lambda x, y: not x >= y, "leu": lambda x, y: not x > y,
    "gtu": lambda x, y: not x <= y, "geu": lambda x, y: not x < y,
    "num": lambda x, y: x == x and y == y,
    "nan": lambda x, y: x != x or y != y,
}
_BOOL_OPS = {"and": lambda x, y: x and y, "or": lambda x, y: x or y,
             "xor": lambda x, y: x != y}
CMP_MODS = tuple(_FLOAT_CMP) + tuple(_UNSIGNED_CMP) + tuple(_BOOL_OPS) + ("ftz",)


def _comparison(cx: Ctx, t: str) -> Callable:
    """A getter of `a CmpOp b` for the current setp/set instruction."""
    cmps = [m for m in cx.code.modifiers if m in _FLOAT_CMP or m in _UNSIGNED_CMP]
    if len(cmps) != 1:
        raise cx.unsupported()
    cmp = cmps[0]
    a_op, b_op = cx.ops[1], cx.ops[2]
    if t == "f64":
        if cmp not in _FLOAT_CMP or "ftz" in cx.mods:
            raise cx.unsupported()
        return R64.compare(cx, _FLOAT_CMP[cmp], a_op, b_op)
    if t == "f32":
        if cmp not in _FLOAT_CMP:
            raise cx.unsupported()
        ftz = "ftz" in cx.mods
        fn, a, b = _FLOAT_CMP[cmp], cx.fsrc(a_op, ftz), cx.fsrc(b_op, ftz)
        return lambda th: fn(a(th), b(th))
    if cmp in _UNSIGNED_CMP:
        fn, sgn = _INT_CMP[_UNSIGNED_CMP[cmp]], False
    elif cmp in _INT_CMP:
        fn, sgn = _INT_CMP[cmp], is_signed(t)
    else:
        raise cx.unsupported()
    a, b = cx.src(a_op, t), cx.src(b_op, t)
    if sgn:
        bits = type_bits(t)
        return lambda th: fn(signed(a(th), bits), signed(b(th), bits))
    return lambda th: fn(a(th), b(th))


def _combine(cx: Ctx, base_operands: int) -> tuple[Callable | None, Callable | None]:
    """The `.BoolOp` and its third predicate operand, if any."""
    bops = [m for m in cx.code.modifiers if m in _BOOL_OPS]
    if len(bops) > 1 or (bops and len(cx.ops) != base_operands + 1) or \
            (not bops and len(cx.ops) != base_operands):
        raise cx.unsupported()
    if not bops:
        return None, None
    return _BOOL_OPS[bops[0]], cx.psrc(cx.ops[base_operands])


CMP_TYPES = ("b16", "b32", "b64") + INT_ARITH + ("f32", "f64")


@op("setp", "setp.{eq,ne,lt,le,gt,ge}.{b16,b32,b64,u16,u32,u64,s16,s32,s64}",
    "setp.{lo,ls,hi,hs}.{b16,b32,b64,u16,u32,u64}",
    "setp.{eq,ne,lt,le,gt,ge,equ,neu,ltu,leu,gtu,geu,num,nan}{.ftz}.f32",
    "setp.{eq,ne,lt,le,gt,ge,equ,neu,ltu,leu,gtu,geu,num,nan}.f64",
    "setp.CmpOp.{and,or,xor}.type p[|q], a, b, {!}c",
    desc="compare to a predicate (and its complement with p|q), optionally combined "
         "with a third predicate", mods=CMP_MODS)
def _setp(cx: Ctx):
    t = cx.one_type(CMP_TYPES)
    bop, c = _combine(cx, 3)
    cmp = _comparison(cx, t)
    target = cx.ops[0]
    if isinstance(target, Pair):
        p, q = cx.dst(target.first, "pred"), cx.dst(target.second, "pred")
    else:
        p, q = cx.dst(target, "pred"), None
    if bop is None:
        if q is None:
            return ALU, lambda th: p(th, cmp(th))
        def run2(th):
            r = cmp(th)
            p(th, r)
            q(th, not r)
        return ALU, run2

    def run(th):
        r, cv = cmp(th), c(th)
        p(th, bop(r, cv))
        if q is not None:
            q(th, bop(not r, cv))
    return ALU, run


@op("set", "set.CmpOp{.BoolOp}{.ftz}.{u32,s32,f32}.stype",
    desc="compare to an integer mask (0xFFFFFFFF/0) or to 1.0f/0.0f", mods=CMP_MODS)
def _set(cx: Ctx):
    types = cx.code.types
    if len(types) != 2 or types[0] not in ("u32", "s32", "b32", "f32") or \
            types[1] not in CMP_TYPES:
        raise cx.unsupported()
    dt, st = types
    bop, c = _combine(cx, 3)
    cmp = _comparison(cx, st)
    d = cx.dst(cx.ops[0], dt)
    true = 0x3F800000 if dt == "f32" else 0xFFFFFFFF
    if bop is None:
        return ALU, lambda th: d(th, true if cmp(th) else 0)
    return ALU, lambda th: d(th, true if bop(cmp(th), c(th)) else 0)


@op("selp", "selp.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32,f64}",
    desc="select: d = c ? a : b")
def _selp(cx: Ctx):
    t = cx.one_type(BIT_TYPES[1:] + INT_ARITH + ("f32", "f64"))
    ops = cx.operands(4)
    d, a, b, c = cx.dst(ops[0], t), cx.src(ops[1], t), cx.src(ops[2], t), cx.psrc(ops[3])
    return ALU, lambda th: d(th, a(th) if c(th) else b(th))


@op("slct", "slct.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32}.s32",
    "slct{.ftz}.{b16,b32,b64,u16,u32,u64,s16,s32,s64,f32}.f32",
    desc="select on sign: d = c >= 0 ? a : b", mods=("ftz",))
def _slct(cx: Ctx):
    types = cx.code.types
    if len(types) != 2 or types[1] not in ("s32", "f32") or \
            types[0] not in BIT_TYPES[1:] + INT_ARITH + ("f32",):
        raise cx.unsupported()
    dt, ct = types
    ops = cx.operands(4)
    d, a, b = cx.dst(ops[0], dt), cx.src(ops[1], dt), cx.src(ops[2], dt)
    if ct == "f32":
        c = cx.fsrc(ops[3], "ftz" in cx.mods)
        return ALU, lambda th: d(th, a(th) if c(th) >= 0.0 else b(th))
    c = cx.src(ops[3], "s32")
    return ALU, lambda th: d(th, b(th) if c(th) >> 31 else a(th))
