"""Random PTX kernels with an independent oracle, as hypothesis strategies.

A strategy builds a kernel as a small list of instruction records (`Inst`,
`Label`), prints it as PTX in nvcc's style, and computes the expected output
buffers by interpreting *the same records* thread by thread (`run_oracle`).
The oracle never parses PTX and never runs a qgc engine: 32/64-bit integers wrap
as Python ints, f32 arithmetic is numpy float32 (IEEE round to nearest even),
`fma.rn` is rounded once from the exact value (fractions.Fraction).

    from ptxgen import programs
    @given(programs("int32"))            # or programs() for any family;
    def test(p):                         # programs(f, max_threads=4, max_ops=6) for
        p.ptx, p.launch, p.expected      # smaller kernels (slow engines, small machines)

`p.launch` is DESIGN §3's launch JSON as a dict; `p.expected` holds, per launch
argument, the final contents of a pointer's buffer (ints as the element type's
signed/unsigned value, f32 as Python floats: compare them by bit pattern) and None
for a scalar.

Modules: `values` (bit patterns and the strategies that draw them), `records`
(instruction records, `Kernel`, PTX printing), `oracle`, `common` (pieces every
family uses), and the families: `integer` (int32, int64), `floating` (f32),
`control_flow` (branch), `memory` (shared, local, atomic), `pointers` (pointer).

Families (FAMILIES):
  int32   straight-line 32-bit integer DAGs: add sub mul.lo/hi mad.lo and or xor not
          neg shl shr(.b32/.u32/.s32, immediate and register amounts, >= 32 too)
          min max abs popc clz brev setp(every comparison)+selp div rem mov, and
          earlier ops again (commuted, or through a copy of a source)
  f32     straight-line f32: add sub mul (with and without .rn) fma.rn div.rn sqrt.rn
          abs neg min max setp(ordered, unordered, num, nan)+selp mov mov.b32(f32 bits)
          cvt.rn.f32.s32 cvt.rzi.s32.f32 cvt.rn.f32.{s,u}64 cvt.rzi.{s,u}64.f32, testp+selp,
          hex immediates 0fXXXXXXXX; x/x, x*inf, x+inf
          and sqrt(-x) make NaNs on purpose; the f64 of float code with double
          literals (0dXXXXXXXXXXXXXXXX): cvt.f64.f32, add sub mul fma.rn div.rn
          sqrt.rn abs min max setp+selp .f64, cvt.rn.f32.f64 cvt.rzi.s32.f64
  branch  divergent if/else (`@%p bra`, `@!%p bra`, `bra.uni`), bounded loops with
          data-dependent trip counts (<= 8), registers reassigned in branches and
          loops, stores in branches, early `ret`
  shared  a `.shared` array of words, halfwords or bytes (packed: neighbours store
          into one word): every thread writes its slot, `bar.sync 0`, reads a
          neighbour's ((tid + k) % ntid) or a fixed slot; one or two rounds;
          32-bit (`mov.u32 %r, smem`) and 64-bit shared addresses
  atomic  atom.global.{add,min,max,and,or,xor} with lane conflicts (word tid % k or
          a data-dependent word; one operation per word so the order never matters),
          and atom.global.cas on one word per thread (its old value is stored)
  int64   add sub mul.lo/hi and or xor not neg shl shr min max setp+selp on
          .s64/.u64/.b64, popc/clz/brev.b64, mul.wide.s32/.u32, cvt between widths,
          ld/st.global.u64
  local   a per-thread array in a .local frame (nvcc's depot): every slot stored, then
          ld/st.local at data-dependent indices, the frame's contents folded into the output
  pointer pointers held as values: a pointer into one of 2-3 buffers or null, picked by
          a loaded selector (selp.b64 or a guarded mov.b64), parked in a .shared table
          of 64-bit slots, read back by a neighbour after `bar.sync`, compared with
          null (setp.ne.u64) and read through (a guarded ld.global.u32); with one CTA
          also atom.global.add through it after a second barrier

Every launch has 1-16 threads in 1-2 CTAs; the results never depend on the warp
size (no shuffles or votes, barriers only in uniform code). No computed value is
dead (but the old values order-independent atomics return): before the final stores, every value nothing reads is folded (xor/add, bijective in
each operand) into a stored one, and a branch or loop body folds its own dead values
into a live register, so a wrong bit anywhere reaches memory. Conventions that keep
every answer defined:
  - a register divisor is made non-zero, and INT_MIN / -1 is steered away, by
    setp/selp/xor/not/or instructions that are part of the program;
  - no NaN is ever stored or fed to arithmetic: an f32 register that may hold a NaN
    (a result of add/sub/mul/div/fma/sqrt) is read only by setp, min/max and selp
    until a sanitizer (setp.nan/num/neu/eq + selp, or max with -inf / min with
    +inf) makes a NaN-free copy, so NaN payloads never matter (the oracle checks it);
  - min/max.f32 return the other operand for one NaN, and order -0.0 below +0.0
    (PTX ISA: "If values of both inputs are 0.0, then +0.0 > -0.0");
  - cvt.rzi.s32.f32 saturates (PTX: float-to-integer conversions clamp by default);
  - no add/sub.f32 without a rounding modifier reads the result of a mul.f32 without
    one (ptxas may fuse such a pair into an fma); maybe-NaN products are always
    sanitized into a new register first, and `finish` checks it.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ptxgen.common import Limits
from ptxgen.control_flow import branch_programs
from ptxgen.floating import f32_programs
from ptxgen.integer import int32_programs, int64_programs
from ptxgen.memory import atomic_programs, local_programs, shared_programs
from ptxgen.oracle import run_oracle
from ptxgen.pointers import pointer_programs
from ptxgen.records import MAX_THREADS, GeneratedProgram

__all__ = ["FAMILIES", "GeneratedProgram", "programs", "run_oracle"]

_FAMILY_STRATEGIES = {
    "int32": int32_programs,
    "f32": f32_programs,
    "branch": branch_programs,
    "shared": shared_programs,
    "atomic": atomic_programs,
    "int64": int64_programs,
    "pointer": pointer_programs,
    "local": local_programs,
}
FAMILIES: list[str] = list(_FAMILY_STRATEGIES)


def programs(family: str | None = None, *, max_threads: int = MAX_THREADS,
             max_ops: int = 16) -> st.SearchStrategy[GeneratedProgram]:
    """Random whole kernels of one family (all families if None), with their launch
    and the oracle's expected buffers. max_threads (1-16) bounds the launch, max_ops
    the random instructions (smaller programs for the slower engines)."""
    if not 1 <= max_threads <= MAX_THREADS or max_ops < 1:
        raise ValueError(f"need 1 <= max_threads <= {MAX_THREADS} and max_ops >= 1")
    limits = Limits(max_threads, max_ops)
    if family is None:
        return st.one_of([s(limits) for s in _FAMILY_STRATEGIES.values()])
    if family not in _FAMILY_STRATEGIES:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    return _FAMILY_STRATEGIES[family](limits)
