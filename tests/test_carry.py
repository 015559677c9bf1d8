"""Extended-precision arithmetic with PTX's carry flag (`add.cc`/`addc`,
`sub.cc`/`subc`, `mad.cc`/`madc`): multi-word sums, differences and a
schoolbook product row, as bignum code and CUDA's headers write them (clang's
`sinf` reduction), checked against Python's integers on hypothesis-drawn
words: `ref` gives the integers' answer, and the machine (every stage before
the tensor lowering) gives `ref`'s."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qgc import driver
from qgc.context import make_context
from qgc.frontend import parse_ptx
from qgc.pipeline import stage, up_to
from qgc.runtime.launch import load_launch
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import run_simt

M32 = 0xFFFF_FFFF
THREADS = 4
#: per thread: a (3 words), b (3 words) in; out: the 4-word sum, the 3-word
#: difference and its borrow word, the 4-word product row a0 · b, the signed
#: `mad.hi.cc.s32` and its carry, and a carry kept across a guarded `add.cc`
OUT_WORDS = 16

PTX = """
.version 8.5
.target sm_75
.address_size 64

.visible .entry carry(.param .u64 carry_a, .param .u64 carry_b, .param .u64 carry_out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [carry_a];
    ld.param.u64 %rd2, [carry_b];
    ld.param.u64 %rd3, [carry_out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 12;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    mul.wide.u32 %rd7, %r1, 64;
    add.s64 %rd8, %rd3, %rd7;
    ld.global.u32 %r2, [%rd5];
    ld.global.u32 %r3, [%rd5+4];
    ld.global.u32 %r4, [%rd5+8];
    ld.global.u32 %r5, [%rd6];
    ld.global.u32 %r6, [%rd6+4];
    ld.global.u32 %r7, [%rd6+8];
    add.cc.u32 %r10, %r2, %r5;
    addc.cc.u32 %r11, %r3, %r6;
    addc.cc.u32 %r12, %r4, %r7;
    addc.u32 %r13, 0, 0;
    st.global.u32 [%rd8], %r10;
    st.global.u32 [%rd8+4], %r11;
    st.global.u32 [%rd8+8], %r12;
    st.global.u32 [%rd8+12], %r13;
    sub.cc.u32 %r14, %r2, %r5;
    subc.cc.u32 %r15, %r3, %r6;
    subc.cc.u32 %r16, %r4, %r7;
    subc.u32 %r17, 0, 0;
    st.global.u32 [%rd8+16], %r14;
    st.global.u32 [%rd8+20], %r15;
    st.global.u32 [%rd8+24], %r16;
    st.global.u32 [%rd8+28], %r17;
    mul.lo.u32 %r20, %r2, %r5;
    mul.lo.u32 %r21, %r2, %r6;
    mad.hi.cc.u32 %r21, %r2, %r5, %r21;
    mul.lo.u32 %r22, %r2, %r7;
    madc.hi.cc.u32 %r22, %r2, %r6, %r22;
    madc.hi.u32 %r23, %r2, %r7, 0;
    st.global.u32 [%rd8+32], %r20;
    st.global.u32 [%rd8+36], %r21;
    st.global.u32 [%rd8+40], %r22;
    st.global.u32 [%rd8+44], %r23;
    mad.hi.cc.s32 %r24, %r3, %r6, %r4;
    madc.lo.u32 %r25, %r3, %r7, %r5;
    st.global.u32 [%rd8+48], %r24;
    st.global.u32 [%rd8+52], %r25;
    add.cc.u32 %r26, %r2, %r5;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 add.cc.u32 %r27, %r4, %r7;
    addc.u32 %r28, %r6, 0;
    st.global.u32 [%rd8+56], %r28;
    mad.lo.cc.u32 %r29, %r4, %r5, %r6;
    madc.hi.u32 %r30, %r4, %r5, %r7;
    st.global.u32 [%rd8+60], %r30;
    ret;
}
"""


def expected_words(a: list[int], b: list[int]) -> list[int]:
    """One thread's outputs, from Python's integers (the kernel's meaning)."""
    def number(words):
        return words[0] | words[1] << 32 | words[2] << 64

    def words(value, n):
        return [value >> (32 * k) & M32 for k in range(n)]

    def s32(x):
        return x - (1 << 32) if x >> 31 else x
    total = number(a) + number(b)
    difference = number(a) - number(b)
    row = a[0] * number(b)
    high = (s32(a[1]) * s32(b[1]) >> 32 & M32) + a[2]
    signed_mad = [high & M32, (a[1] * b[2] + b[0] + (high >> 32)) & M32]
    carry = (a[2] + b[2] >> 32) if a[1] else (a[0] + b[0] >> 32)
    low = (a[2] * b[0] & M32) + b[1]
    return (words(total, 4) + words(difference, 3) + [M32 if difference < 0 else 0] +
            words(row, 4) + signed_mad + [(b[1] + carry) & M32] +
            [(a[2] * b[0] >> 32) + b[2] + (low >> 32) & M32])


def launch_for(a: list[int], b: list[int]):
    return load_launch({"kernel": "carry", "grid": [1, 1, 1], "block": [THREADS, 1, 1],
                        "args": [{"type": "u32*", "data": a}, {"type": "u32*", "data": b},
                                 {"type": "u32*", "data": [0] * (OUT_WORDS * THREADS)}]})


_WORD = st.one_of(st.sampled_from([0, 1, 2, M32, M32 - 1, 1 << 31, (1 << 31) - 1]),
                  st.integers(0, M32))
_OPERANDS = st.lists(_WORD, min_size=3 * THREADS, max_size=3 * THREADS)


def _machine(launch):
    module = parse_ptx(PTX, "carry.ptx")
    driver.apply_for_launch(make_context(), module,
                            up_to(stage("tensor"), "convert-simt-to-tensor"), launch)
    return run_simt(module, launch).buffers


@settings(max_examples=40, deadline=None)
@given(_OPERANDS, _OPERANDS)
def test_carry_chains_give_the_integers_answer_on_ref_and_the_machine(a, b):
    launch = launch_for(a, b)
    want = [w for t in range(THREADS)
            for w in expected_words(a[3 * t:3 * t + 3], b[3 * t:3 * t + 3])]
    got = run_ref(parse_ptx(PTX, "carry.ptx"), launch).buffers
    assert got[2] == want
    assert _machine(launch)[2] == want
