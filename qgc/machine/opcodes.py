"""The machine's opcodes: one entry per opcode, the one place every level reads.

An ALU opcode (`simt.alu`) says here how many sources it takes and of which
kind, which PTX instructions instruction selection maps onto it, whether its
sources commute (`simt-cse`), how constant operands fold (selection), what it
computes on 32-bit words (the `simt` engine) and which circuit computes it
for one lane (`convert-simt-to-tensor`, over `Alu` of
`passes/simt_to_tensor/circuits`). `setp` conditions, predicate logic and
atomic operations have their semantics here too.

Adding an integer instruction to the machine is one entry in `ALU_OPCODES`
(and, when no circuit exists yet, a method of the circuit library). The `ref`
engine keeps its own definitions of PTX: `ref` against `simt` stays a
differential test.

Words are unsigned Python ints below 2^32 (`M32`); `evaluate` returns one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from qgc.machine import approx_programs as ap
from qgc.machine import float64_programs as f64
from qgc.machine import float_programs as fp
from qgc.machine import softfloat as sf
from qgc.runtime import float64 as f64_spec
from qgc.runtime.float32 import saturate

if TYPE_CHECKING:
    from xdsl.ir import SSAValue

M32 = 0xFFFF_FFFF

#: What a source holds: a 32-bit word (register or immediate) or a predicate.
Kind = Literal["word", "pred"]


def signed(x: int) -> int:
    """A word read as a two's complement 32-bit integer."""
    return x - (1 << 32) if x & 0x8000_0000 else x


@dataclass(frozen=True)
class PtxForm:
    """PTX instructions `base{.modifiers}.type` (one of `types`) that
    instruction selection maps onto an opcode, sources in order."""

    base: str
    modifiers: tuple[str, ...] = ()
    types: tuple[str, ...] = ("s32", "u32")


@dataclass(frozen=True)
class LowerHints:
    """What convert-simt-to-tensor knows about one op beyond its sources:
    whether a later op of the block needs the high word of the same product
    (a narrow `mul.lo` then keeps it)."""

    high_later: bool | None = None


#: (circuit library, the sources' bit values of one lane, hints) → the result
Lowering = Callable[[Any, Sequence["SSAValue"], LowerHints], "SSAValue"]


@dataclass(frozen=True)
class AluOpcode:
    """One ALU opcode of the machine."""

    name: str
    evaluate: Callable[..., int]
    """The result word from the source words (predicates as bools)."""
    lower: Lowering | None
    """The circuit for one lane; None where a pass expands the op first
    (`simt-expand-divrem` for div/rem, `simt-expand-float` for f32)."""
    sources: tuple[Kind, ...] = ("word", "word")
    ptx: tuple[PtxForm, ...] = ()
    commutative: bool = False
    """The first two sources commute (`simt-cse` shares commuted ops)."""
    folds: bool = False
    """Selection computes the op when every source is a constant."""
    identity: int | None = None
    """x op identity = x (and identity op x = x when commutative): selection folds it."""
    absorbing: int | None = None
    """x op z = z op x = z: selection folds it."""
    doc: str = field(default="", compare=False)
    expand: Callable[..., Any] | None = field(default=None, compare=False)
    """f32 ops: the program of integer ops that `simt-expand-float` puts in
    its place (`qgc.machine.float_programs`), from an `IntOps` and the
    sources."""
    composite: bool = False
    """The program computes with f32 ops too (the `.approx` algorithms of
    `qgc.machine.approx_programs`): expanded first."""
    both_words: Callable[..., Any] | None = field(default=None, compare=False)
    """A `.lo` opcode of an f64 program: the program giving both result
    words, which `simt-expand-float` runs once where the `.hi` opcode on the
    same sources follows."""

    @property
    def arity(self) -> int:
        return len(self.sources)


# ------------------------------------------------------------------ semantics

def _shl(a: int, b: int) -> int:
    return (a << b) & M32 if b < 32 else 0


def _shr_u(a: int, b: int) -> int:
    return a >> b if b < 32 else 0


def _shr_s(a: int, b: int) -> int:
    return (signed(a) >> min(b, 31)) & M32


def _div_s(a: int, b: int) -> int:
    """Toward zero; x / 0 = all ones, INT_MIN / −1 = INT_MIN (as `ref`)."""
    if b == 0:
        return M32
    q = abs(signed(a)) // abs(signed(b))
    return (-q if (signed(a) < 0) != (signed(b) < 0) else q) & M32


def _rem_s(a: int, b: int) -> int:
    """The sign of the dividend; x rem 0 = x."""
    if b == 0:
        return a
    r = abs(signed(a)) % abs(signed(b))
    return (-r if signed(a) < 0 else r) & M32


def _bfe(is_signed: bool) -> Callable[[int, int, int], int]:
    """Bit field extract: len bits from pos (sign-extended for `.s`)."""
    def bfe(a: int, b: int, c: int) -> int:
        pos, length = b & 0xFF, c & 0xFF
        sbit = (a >> min(pos + length - 1, 31)) & 1 if is_signed and length else 0
        taken = max(0, min(length, 32 - pos))
        field_ = (a >> pos) & ((1 << taken) - 1) if pos <= 31 else 0
        return field_ | (M32 & ~((1 << taken) - 1) if sbit else 0)
    return bfe


def _bfi(a: int, b: int, c: int, d: int) -> int:
    """Bit field insert: a's low len bits into b at pos."""
    pos, length = c & 0xFF, d & 0xFF
    if pos >= 32:
        return b
    field_ = ((1 << min(length, 32 - pos)) - 1) << pos
    return (b & ~field_ | (a << pos) & field_) & M32


def _shf(left: bool, clamp: bool) -> Callable[[int, int, int], int]:
    """Funnel shift of the 64-bit pair {b, a}."""
    def shf(a: int, b: int, c: int) -> int:
        n = min(c, 32) if clamp else c & 31
        pair = (b << 32) | a
        return ((pair << n) >> 32) & M32 if left else (pair >> n) & M32
    return shf


def _bfind(is_signed: bool, shiftamt: bool) -> Callable[[int], int]:
    """The most significant non-sign bit (0xFFFFFFFF if none; `shiftamt`:
    counted from the top)."""
    def find(a: int) -> int:
        if is_signed and a >> 31:
            a = ~a & M32
        if a == 0:
            return M32
        pos = a.bit_length() - 1
        return 31 - pos if shiftamt else pos
    return find


#: prmt's modes, as the PTX ISA tabulates them: selector c[1:0] → the source
#: byte of d.b3, d.b2, d.b1, d.b0 (bytes 0-3 are a's, 4-7 b's).
PRMT_MODES: dict[str, tuple[tuple[int, int, int, int], ...]] = {
    "f4e": ((3, 2, 1, 0), (4, 3, 2, 1), (5, 4, 3, 2), (6, 5, 4, 3)),
    "b4e": ((5, 6, 7, 0), (6, 7, 0, 1), (7, 0, 1, 2), (0, 1, 2, 3)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((3, 2, 1, 0), (3, 2, 1, 1), (3, 2, 2, 2), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (1, 1, 1, 0), (2, 2, 1, 0), (3, 2, 1, 0)),
    "rc16": ((1, 0, 1, 0), (3, 2, 3, 2), (1, 0, 1, 0), (3, 2, 3, 2)),
}


@dataclass(frozen=True)
class ByteChoice:
    """How a byte permute picks result byte `i`: the selector bits it reads
    and, for each value v of them, the source `codes[v]`: 0-7 a byte of the
    pair {b, a}, 8 + k byte k's sign bit replicated."""

    bits: tuple[int, ...]
    codes: tuple[int, ...]


def prmt_choices(mode: str | None) -> tuple[ByteChoice, ...]:
    """Result bytes 0-3 of `prmt.b32{.mode}`: without a mode, byte i is named
    by the selector's nibble i (bit 3: replicate the sign); a mode names it by
    c[1:0] through its pattern."""
    if mode is None:
        return tuple(ByteChoice(tuple(range(4 * i, 4 * i + 4)), tuple(range(16)))
                     for i in range(4))
    return tuple(ByteChoice((0, 1), tuple(PRMT_MODES[mode][v][3 - i] for v in range(4)))
                 for i in range(4))


def _prmt(mode: str | None) -> Callable[[int, int, int], int]:
    choices = prmt_choices(mode)

    def prmt(a: int, b: int, c: int) -> int:
        pair, out = (b << 32) | a, 0
        for i, choice in enumerate(choices):
            code = choice.codes[sum(((c >> bit) & 1) << k for k, bit in enumerate(choice.bits))]
            byte = (pair >> (8 * (code & 7))) & 0xFF
            if code & 8:
                byte = 0xFF if byte & 0x80 else 0
            out |= byte << (8 * i)
        return out
    return prmt


def _prmt_opcode(mode: str | None) -> AluOpcode:
    choices = prmt_choices(mode)
    mods = (mode,) if mode else ()
    return AluOpcode(".".join(("prmt", *mods)), _prmt(mode),
                     lambda alu, x, h: alu.byte_select(x[0], x[1], x[2], choices),
                     THREE, (PtxForm("prmt", mods, _B),))


# ------------------------------------------------------------------ f32

_F = ("f32",)


def _float_name(*parts: str | None) -> str:
    return ".".join(p for p in (*parts, "f32") if p)


def _flags(*names: str) -> list[tuple[str, ...]]:
    """Every subset of the optional modifiers `names`, in PTX's order."""
    out: list[tuple[str, ...]] = [()]
    for name in names:
        out += [have + (name,) for have in out]
    return out


def _rounded_opcodes() -> list[AluOpcode]:
    """add sub mul fma {.rnd}{.ftz}{.sat}.f32 (add/sub/mul without a rounding
    round to nearest; `mad.rnd.f32` is `fma`)."""
    out = []
    for base, arity in (("add", 2), ("sub", 2), ("mul", 2), ("fma", 3)):
        for mode in sf.MODES:
            for flags in _flags("ftz", "sat"):
                ftz, sat = "ftz" in flags, "sat" in flags
                forms = [PtxForm(base, (mode, *flags), _F)]
                if base == "fma":
                    forms.append(PtxForm("mad", (mode, *flags), _F))
                elif mode == "rn":
                    forms.append(PtxForm(base, flags, _F))
                out.append(AluOpcode(
                    _float_name(base, mode, *flags),
                    lambda *x, b=base, m=mode, f=ftz, s=sat: _sat(getattr(sf, b)(*x, m, f), s),
                    None, ("word",) * arity, tuple(forms), commutative=base in ("add", "mul", "fma"),
                    expand=lambda o, *x, b=base, m=mode, f=ftz, s=sat:
                        getattr(fp, b)(o, *x, m, f, s)))
    return out


def _quotient_opcodes() -> list[AluOpcode]:
    """div.RND{.ftz}.f32, rcp.RND{.ftz}.f32 (1 / x), sqrt.RND{.ftz}.f32:
    correctly rounded, by digit recurrences in loops of machine blocks."""
    out = []
    for mode in sf.MODES:
        for flags in _flags("ftz"):
            f = bool(flags)
            out += [
                AluOpcode(_float_name("div", mode, *flags), lambda a, b, m=mode, f=f: sf.div(a, b, m, f),
                          None, TWO, (PtxForm("div", (mode, *flags), _F),),
                          expand=lambda o, a, b, m=mode, f=f: fp.div(o, a, b, m, f)),
                AluOpcode(_float_name("rcp", mode, *flags),
                          lambda a, m=mode, f=f: sf.div(fp.ONE, a, m, f), None, ONE,
                          (PtxForm("rcp", (mode, *flags), _F),),
                          expand=lambda o, a, m=mode, f=f: fp.div(o, fp.ONE, a, m, f)),
                AluOpcode(_float_name("sqrt", mode, *flags), lambda a, m=mode, f=f: sf.sqrt(a, m, f),
                          None, ONE, (PtxForm("sqrt", (mode, *flags), _F),),
                          expand=lambda o, a, m=mode, f=f: fp.sqrt(o, a, m, f))]
    return out


def _evaluated(program: Callable[..., int], *options: Any) -> Callable[..., int]:
    """A program's semantics on words: run at once (`Evaluate`, below)."""
    return lambda *x: program(Evaluate(), *x, *options)


def _approx_opcodes() -> list[AluOpcode]:
    """BASE.approx{.ftz}.f32 (tanh without .ftz), div.approx and div.full:
    the float32 algorithms of `approx_programs`, which `ref` runs too."""
    out = []
    for base, program in ap.UNARY.items():
        for flags in _flags("ftz") if base != "tanh" else [()]:
            f = bool(flags)
            out.append(AluOpcode(
                _float_name(base, "approx", *flags), _evaluated(program, f), None, ONE,
                (PtxForm(base, ("approx", *flags), _F),), composite=True,
                expand=lambda o, a, p=program, f=f: p(o, a, f)))
    for kind, program in (("approx", ap.div_approx), ("full", ap.div_full)):
        for flags in _flags("ftz"):
            f = bool(flags)
            out.append(AluOpcode(
                _float_name("div", kind, *flags), _evaluated(program, f), None, TWO,
                (PtxForm("div", (kind, *flags), _F),), composite=True,
                expand=lambda o, a, b, p=program, f=f: p(o, a, b, f)))
    return out


def _sat(bits: int, sat: bool) -> int:
    return saturate(bits) if sat else bits


def _sign_opcodes() -> list[AluOpcode]:
    """neg abs {.ftz}, min max {.ftz}{.NaN}, copysign (.f32)."""
    out = []
    for base, fn in (("neg", "neg"), ("abs", "abs_")):
        for flags in _flags("ftz"):
            f = bool(flags)
            out.append(AluOpcode(_float_name(base, *flags),
                                 lambda a, fn=fn, f=f: getattr(sf, fn)(a, f), None, ONE,
                                 (PtxForm(base, flags, _F),),
                                 expand=lambda o, a, fn=fn, f=f: getattr(fp, fn)(o, a, f)))
    for base in ("min", "max"):
        for flags in _flags("ftz", "NaN"):
            f, n, pick = "ftz" in flags, "NaN" in flags, base == "max"
            out.append(AluOpcode(
                _float_name(base, *flags), lambda a, b, p=pick, f=f, n=n: sf.minmax(a, b, p, f, n),
                None, TWO, (PtxForm(base, flags, _F),), commutative=True,
                expand=lambda o, a, b, p=pick, f=f, n=n: fp.minmax(o, a, b, p, f, n)))
    out.append(AluOpcode("copysign.f32", sf.copysign, None, TWO, (PtxForm("copysign", (), _F),),
                         expand=fp.copysign))
    return out


def _convert_opcodes() -> list[AluOpcode]:
    """cvt between f32 and s32/u32 (every rounding, `.sat`, `.ftz`), f32 to
    an integral f32, and f16 to and from f32. Selection names them (`cvt`
    has two types)."""
    out = []
    for it in ("s32", "u32"):
        signed_ = it == "s32"
        for mode in sf.MODES:
            for flags in _flags("sat"):
                s = bool(flags)
                out.append(AluOpcode(
                    ".".join(("cvt", mode, *flags, "f32", it)),
                    lambda a, m=mode, g=signed_, s=s: _sat(sf.from_int(
                        signed(a) if g else a, m), s), None, ONE,
                    expand=lambda o, a, m=mode, g=signed_, s=s: fp.from_int(o, a, g, m, s)))
            for flags in _flags("ftz"):
                f = bool(flags)
                # .sat is implied: float to integer always saturates
                out.append(AluOpcode(
                    ".".join(("cvt", mode + "i", *flags, it, "f32")),
                    lambda a, m=mode, g=signed_, f=f: sf.to_int(a, m, 32, g, f) & M32, None, ONE,
                    expand=lambda o, a, m=mode, g=signed_, f=f: fp.to_int(o, a, m, g, f)))
    for flags in _flags("ftz", "sat")[1:]:     # no rounding: flush, clamp
        f, s = "ftz" in flags, "sat" in flags
        out.append(AluOpcode(".".join(("cvt", *flags, "f32", "f32")),
                             lambda a, f=f, s=s: _sat(sf.flush(a) if f else a, s), None, ONE,
                             expand=lambda o, a, f=f, s=s: fp.finish(o, a, f, s)))
    for mode in sf.MODES:
        for flags in _flags("ftz", "sat"):
            f, s = "ftz" in flags, "sat" in flags
            out.append(AluOpcode(
                ".".join(("cvt", mode + "i", *flags, "f32", "f32")),
                lambda a, m=mode, f=f, s=s: _sat(sf.round_integral(a, m, f), s), None, ONE,
                expand=lambda o, a, m=mode, f=f, s=s: fp.round_integral(o, a, m, f, s)))
    out.append(AluOpcode("cvt.f32.f16", lambda a: sf.from_f16(a & 0xFFFF), None, ONE,
                         expand=fp.from_f16))
    for flags in _flags("ftz"):
        f = bool(flags)
        out.append(AluOpcode(".".join(("cvt", "rn", *flags, "f16", "f32")),
                             lambda a, f=f: sf.to_f16(a, f), None, ONE,
                             expand=lambda o, a, f=f: fp.to_f16(o, a, f)))
    return out


def _word_pair(name: str, sources: int, program: Callable[..., tuple],
               spec: Callable[..., int]) -> list[AluOpcode]:
    """`NAME.lo` and `NAME.hi`: the low and high result word of an f64
    program on `sources` words. They evaluate by `spec`, `ref`'s binary64
    on the 64-bit result (`qgc.runtime.float64`), not by the program: the
    `simt` engine before and after `simt-expand-float` checks one against
    the other."""
    return [AluOpcode(f"{name}.lo", lambda *w: spec(*w) & M32, None, ("word",) * sources,
                      expand=lambda o, *w: program(o, *w)[0], both_words=program),
            AluOpcode(f"{name}.hi", lambda *w: spec(*w) >> 32 & M32, None, ("word",) * sources,
                      expand=lambda o, *w: program(o, *w)[1])]


def _double(lo: int, hi: int) -> float:
    return f64_spec.to_float(lo | hi << 32)


def _int64(lo: int, hi: int, signed_: bool) -> int:
    n = lo | hi << 32
    return n - (1 << 64) if signed_ and n >> 63 else n


def double_opcodes() -> list[AluOpcode]:
    """The f64 programs long enough to share a routine
    (`float64_programs`): fma, which add, sub and mul select too, div (rcp
    too: 1 / x) and sqrt (digit recurrences in loops of machine blocks),
    rounding to integral, and the conversions between f64 and 64-bit
    integers (a 32-bit one extended to a pair), each a pair of opcodes by
    result word; f64 to a 32-bit integer has one word. The other f64 ops
    are short programs that selection emits in place."""
    D = f64_spec
    out = []
    for mode in sf.MODES:
        out += _word_pair(f"fma.{mode}.f64", 6, lambda o, al, ah, bl, bh, cl, ch, m=mode:
                          f64.fma(o, (al, ah), (bl, bh), (cl, ch), m),
                          lambda al, ah, bl, bh, cl, ch, m=mode: D.fma(
                              _double(al, ah), _double(bl, bh), _double(cl, ch), m))
        out += _word_pair(f"div.{mode}.f64", 4, lambda o, al, ah, bl, bh, m=mode:
                          f64.div(o, (al, ah), (bl, bh), m),
                          lambda al, ah, bl, bh, m=mode: D.div(_double(al, ah),
                                                               _double(bl, bh), m))
        out += _word_pair(f"sqrt.{mode}.f64", 2, lambda o, lo, hi, m=mode:
                          f64.sqrt(o, (lo, hi), m),
                          lambda lo, hi, m=mode: D.sqrt(_double(lo, hi), m))
        for it in ("s64", "u64"):
            out += _word_pair(f"cvt.{mode}.f64.{it}", 2, lambda o, lo, hi, m=mode, s=it == "s64":
                              f64.from_int(o, (lo, hi), s, m),
                              lambda lo, hi, m=mode, s=it == "s64":
                              D.from_int(_int64(lo, hi, s), m))
    for mode in ("rni", "rzi", "rmi", "rpi"):
        out += _word_pair(f"cvt.{mode}.f64.f64", 2, lambda o, lo, hi, m=mode:
                          f64.round_integral(o, (lo, hi), m),
                          lambda lo, hi, m=mode: D.round_integral(_double(lo, hi), m))
        for it in ("s64", "u64"):
            out += _word_pair(f"cvt.{mode}.{it}.f64", 2, lambda o, lo, hi, m=mode, s=it == "s64":
                              f64.to_int(o, (lo, hi), m, 64, s),
                              lambda lo, hi, m=mode, s=it == "s64":
                              D.to_int(_double(lo, hi), m, 64, s) & (1 << 64) - 1)
        for it in ("s32", "u32"):
            out.append(AluOpcode(f"cvt.{mode}.{it}.f64",
                                 lambda lo, hi, m=mode, s=it == "s32":
                                 D.to_int(_double(lo, hi), m, 32, s) & M32,
                                 None, TWO, expand=_to_word(mode, it == "s32")))
    return out


def _to_word(mode: str, signed: bool) -> Callable[..., Any]:
    """`cvt.MODE.{s,u}32.f64`: one result word."""
    def program(o, lo, hi):
        return f64.to_int(o, (lo, hi), mode, 32, signed)[0]
    return program


def float_opcodes() -> list[AluOpcode]:
    """The f32 opcodes: evaluated by `softfloat`, expanded into integer ops
    by `simt-expand-float` before the tensor level."""
    return [*_rounded_opcodes(), *_quotient_opcodes(), *_sign_opcodes(), *_convert_opcodes(),
            *_approx_opcodes()]


# ------------------------------------------------------------------ the table

_INT = ("s32", "u32", "b32")
_S, _U, _B = ("s32",), ("u32",), ("b32",)
_UB = ("u32", "b32")
ONE, TWO, THREE = ("word",), ("word", "word"), ("word", "word", "word")


def _opcodes(*entries: AluOpcode) -> dict[str, AluOpcode]:
    return {e.name: e for e in entries}


def _bfind_opcodes() -> list[AluOpcode]:
    out = []
    for shiftamt in (False, True):
        for sign in ("u", "s"):
            mods = ("shiftamt",) if shiftamt else ()
            out.append(AluOpcode(
                ".".join(("bfind", *mods, sign)), _bfind(sign == "s", shiftamt),
                lambda alu, x, h, s=sign == "s", k=shiftamt: alu.bfind(x[0], s, k),
                ONE, (PtxForm("bfind", mods, _S if sign == "s" else _U),)))
    return out


def _shf_opcodes() -> list[AluOpcode]:
    return [AluOpcode(f"shf.{d}.{m}", _shf(d == "l", m == "clamp"),
                      lambda alu, x, h, left=d == "l", clamp=m == "clamp":
                      alu.shf(x[0], x[1], x[2], left, clamp),
                      THREE, (PtxForm("shf", (d, m), _B),))
            for d in ("l", "r") for m in ("wrap", "clamp")]


#: Every ALU opcode of the machine, in the order diagnostics list them.
ALU_OPCODES: dict[str, AluOpcode] = _opcodes(
    AluOpcode("mov", lambda a: a, lambda alu, x, h: x[0], ONE),
    AluOpcode("not", lambda a: ~a & M32, lambda alu, x, h: alu.not_(x[0]), ONE,
              (PtxForm("not", (), _INT),), folds=True),
    AluOpcode("neg", lambda a: -a & M32, lambda alu, x, h: alu.neg(x[0]), ONE,
              (PtxForm("neg", (), _S),)),
    AluOpcode("abs", lambda a: abs(signed(a)) & M32, lambda alu, x, h: alu.abs(x[0]), ONE,
              (PtxForm("abs", (), _S),)),
    AluOpcode("popc", lambda a: bin(a).count("1"), lambda alu, x, h: alu.popc(x[0]), ONE,
              (PtxForm("popc", (), _B),)),
    AluOpcode("clz", lambda a: 32 - a.bit_length(), lambda alu, x, h: alu.clz(x[0]), ONE,
              (PtxForm("clz", (), _B),)),
    AluOpcode("brev", lambda a: int(f"{a:032b}"[::-1], 2), lambda alu, x, h: alu.brev(x[0]),
              ONE, (PtxForm("brev", (), _B),)),
    *_bfind_opcodes(),
    AluOpcode("add", lambda a, b: (a + b) & M32, lambda alu, x, h: alu.add(x[0], x[1]), TWO,
              (PtxForm("add"),), commutative=True, folds=True, identity=0),
    AluOpcode("sub", lambda a, b: (a - b) & M32, lambda alu, x, h: alu.sub(x[0], x[1]), TWO,
              (PtxForm("sub"),), folds=True, identity=0),
    AluOpcode("mul.lo", lambda a, b: (a * b) & M32,
              lambda alu, x, h: alu.mul_lo(x[0], x[1], high_later=h.high_later), TWO,
              (PtxForm("mul", ("lo",)),), commutative=True, folds=True, identity=1,
              absorbing=0),
    AluOpcode("mul.hi.s", lambda a, b: ((signed(a) * signed(b)) >> 32) & M32,
              lambda alu, x, h: alu.mul_hi(x[0], x[1], True), TWO,
              (PtxForm("mul", ("hi",), _S),), commutative=True, absorbing=0),
    AluOpcode("mul.hi.u", lambda a, b: (a * b) >> 32,
              lambda alu, x, h: alu.mul_hi(x[0], x[1], False), TWO,
              (PtxForm("mul", ("hi",), _U),), commutative=True, folds=True, absorbing=0),
    AluOpcode("and", lambda a, b: a & b, lambda alu, x, h: alu.and_(x[0], x[1]), TWO,
              (PtxForm("and", (), _INT),), commutative=True, folds=True, absorbing=0),
    AluOpcode("or", lambda a, b: a | b, lambda alu, x, h: alu.or_(x[0], x[1]), TWO,
              (PtxForm("or", (), _INT),), commutative=True, folds=True, identity=0),
    AluOpcode("xor", lambda a, b: a ^ b, lambda alu, x, h: alu.xor(x[0], x[1]), TWO,
              (PtxForm("xor", (), _INT),), commutative=True, folds=True, identity=0),
    AluOpcode("shl", _shl, lambda alu, x, h: alu.shl(x[0], x[1]), TWO,
              (PtxForm("shl", (), _INT),), folds=True, identity=0),
    AluOpcode("shr.u", _shr_u, lambda alu, x, h: alu.shr(x[0], x[1], False), TWO,
              (PtxForm("shr", (), _UB),), folds=True, identity=0),
    AluOpcode("shr.s", _shr_s, lambda alu, x, h: alu.shr(x[0], x[1], True), TWO,
              (PtxForm("shr", (), _S),), identity=0),
    AluOpcode("min.s", lambda a, b: a if signed(a) <= signed(b) else b,
              lambda alu, x, h: alu.min(x[0], x[1], True), TWO,
              (PtxForm("min", (), _S),), commutative=True),
    AluOpcode("min.u", min, lambda alu, x, h: alu.min(x[0], x[1], False), TWO,
              (PtxForm("min", (), _U),), commutative=True),
    AluOpcode("max.s", lambda a, b: a if signed(a) >= signed(b) else b,
              lambda alu, x, h: alu.max(x[0], x[1], True), TWO,
              (PtxForm("max", (), _S),), commutative=True),
    AluOpcode("max.u", max, lambda alu, x, h: alu.max(x[0], x[1], False), TWO,
              (PtxForm("max", (), _U),), commutative=True),
    AluOpcode("div.s", _div_s, None, TWO, (PtxForm("div", (), _S),)),
    AluOpcode("div.u", lambda a, b: a // b if b else M32, None, TWO, (PtxForm("div", (), _U),)),
    AluOpcode("rem.s", _rem_s, None, TWO, (PtxForm("rem", (), _S),)),
    AluOpcode("rem.u", lambda a, b: a % b if b else a, None, TWO, (PtxForm("rem", (), _U),)),
    AluOpcode("mad.lo", lambda a, b, c: (a * b + c) & M32,
              lambda alu, x, h: alu.mad_lo(x[0], x[1], x[2]), THREE,
              (PtxForm("mad", ("lo",)),)),
    AluOpcode("selp", lambda a, b, p: a if p else b,
              lambda alu, x, h: alu.select(x[2], x[0], x[1]), ("word", "word", "pred")),
    AluOpcode("bfe.u", _bfe(False), lambda alu, x, h: alu.bfe(x[0], x[1], x[2], False), THREE,
              (PtxForm("bfe", (), _U),)),
    AluOpcode("bfe.s", _bfe(True), lambda alu, x, h: alu.bfe(x[0], x[1], x[2], True), THREE,
              (PtxForm("bfe", (), _S),)),
    AluOpcode("bfi", _bfi, lambda alu, x, h: alu.bfi(x[0], x[1], x[2], x[3]),
              ("word",) * 4, (PtxForm("bfi", (), _B),)),
    *_shf_opcodes(),
    *(_prmt_opcode(mode) for mode in (None, *PRMT_MODES)),
    *float_opcodes(),
    *double_opcodes(),
)

#: (PTX base, modifiers, type) → the ALU opcode that instruction selects
PTX_SELECTION: dict[tuple[str, tuple[str, ...], str], AluOpcode] = {
    (form.base, form.modifiers, t): code
    for code in ALU_OPCODES.values() for form in code.ptx for t in form.types}


def select_alu(base: str, modifiers: tuple[str, ...], t: str | None) -> AluOpcode | None:
    """The ALU opcode of a plain 32-bit PTX instruction, or None."""
    return PTX_SELECTION.get((base, modifiers, t or ""))


# ------------------------------------------------------------ compares, logic, atomics

#: `simt.setp` conditions (`.s` signed, `.u` unsigned) and what they decide.
SETP_CONDITIONS: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt.s": lambda a, b: signed(a) < signed(b), "le.s": lambda a, b: signed(a) <= signed(b),
    "gt.s": lambda a, b: signed(a) > signed(b), "ge.s": lambda a, b: signed(a) >= signed(b),
    "lt.u": lambda a, b: a < b, "le.u": lambda a, b: a <= b,
    "gt.u": lambda a, b: a > b, "ge.u": lambda a, b: a >= b,
    **{_float_name(cmp, *flags): lambda a, b, c=cmp, f=bool(flags): sf.compare(c, a, b, f)
       for cmp in sf.COMPARES for flags in _flags("ftz")},
}

#: The f32 conditions' programs of integer ops (`simt-expand-float`).
SETP_EXPANSIONS: dict[str, Callable[..., Any]] = {
    _float_name(cmp, *flags): lambda o, a, b, c=cmp, f=bool(flags): fp.compare(o, c, a, b, f)
    for cmp in sf.COMPARES for flags in _flags("ftz")}

#: `simt.pred` logic on predicates: (sources, semantics).
PRED_OPCODES: dict[str, tuple[int, Callable[..., bool]]] = {
    "mov": (1, lambda a: a), "not": (1, lambda a: not a),
    "and": (2, lambda a, b: a and b), "or": (2, lambda a, b: a or b),
    "xor": (2, lambda a, b: a != b),
}

#: `simt.atom` operations: (old, value, swap) → the new word, PTX's semantics
#: (`.s`/`.u`: signed/unsigned compare; `cas` compares with its second source).
ATOM_OPERATIONS: dict[str, Callable[[int, int, int], int]] = {
    "add": lambda o, v, _: o + v,
    "min.s": lambda o, v, _: o if signed(o) <= signed(v) else v,
    "min.u": lambda o, v, _: min(o, v),
    "max.s": lambda o, v, _: o if signed(o) >= signed(v) else v,
    "max.u": lambda o, v, _: max(o, v),
    "and": lambda o, v, _: o & v,
    "or": lambda o, v, _: o | v,
    "xor": lambda o, v, _: o ^ v,
    "exch": lambda o, v, _: v,
    "inc": lambda o, v, _: 0 if o >= v else o + 1,
    "dec": lambda o, v, _: v if o == 0 or o > v else o - 1,
    "cas": lambda o, v, s: s if o == v else o,
    # a byte or halfword store into its word (v: the element in place, s: its
    # bits), atomic so lanes storing into one word in one step keep each other's
    "ins": lambda o, v, s: (o & ~s & 0xFFFFFFFF) | v,
    # f32 add, rounded to nearest, subnormals flushed (PTX's atom.add.f32);
    # simt-expand-float makes it a compare-and-swap loop
    "add.f32": lambda o, v, _: sf.add(o, v, "rn", True),
}

#: The f32 add an `add.f32` atomic's compare-and-swap loop computes.
ATOM_FLOAT_ADD = "add.rn.ftz.f32"


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >> 63 & 1 else v


#: Atomics on a pair of words, one 64-bit value (low word first); the ones
#: whose words interact (exch, and, or, xor, add are a 32-bit atomic per word)
ATOM_PAIR_OPERATIONS: dict[str, Callable[[int, int, int], int]] = {
    "min.s": lambda o, v, _: o if _signed64(o) <= _signed64(v) else v,
    "min.u": lambda o, v, _: min(o, v),
    "max.s": lambda o, v, _: o if _signed64(o) >= _signed64(v) else v,
    "max.u": lambda o, v, _: max(o, v),
    "cas": lambda o, v, s: s if o == v else o,
}


# ------------------------------------------------------------ programs, run at once

class Evaluate(fp.IntOps[int, bool]):
    """Runs a program at once on Python ints with the machine's semantics."""

    def __init__(self) -> None:
        from qgc.machine import opcodes  # the table holds the programs
        self.opcodes = opcodes

    def alu(self, opcode: str, *srcs: int) -> int:
        return ALU_OPCODES[opcode].evaluate(*(s & 0xFFFF_FFFF for s in srcs))

    def setp(self, cond: str, a: int, b: int) -> bool:
        return SETP_CONDITIONS[cond](a & 0xFFFF_FFFF, b & 0xFFFF_FFFF)

    def pred(self, opcode: str, *srcs: bool) -> bool:
        return PRED_OPCODES[opcode][1](*srcs)

    def select(self, a: int, b: int, p: bool) -> int:
        return (a if p else b) & 0xFFFF_FFFF

    def loop(self, trips: int, state: tuple, body: Callable[..., tuple]) -> tuple:
        for _ in range(trips):
            state = body(self, *state)
        return state
