"""`simt-expand-float`: every f32 op as a program of integer machine ops,
bit-exact with the machine's f32 ops (the simt engine runs both).

- hypothesis-generated programs of f32 ops (every float opcode and compare,
  sources chained from earlier results, immediates among them, guarded or
  not, the destination a source or not) on operands from the special
  classes and random patterns: the kernel's buffers are the same before and
  after the pass, inline and as shared routines, and through register
  allocation and block formation (also on a tight machine that spills);
- every example and shared float kernel the machine runs gives its expected
  buffers with the pass in the simt pipeline, and keeps no f32 op;
- the routines: one copy per opcode, placed first in layout order.
"""

from __future__ import annotations

import json
import math
import re
import struct
from functools import lru_cache
from pathlib import Path

import pytest
from test_softfloat import SPECIALS
from xdsl.dialects.builtin import IntAttr

from conftest import EXAMPLES, SHARED_KERNELS, shared_kernel_files
from qgc import driver
from qgc.context import make_context
from qgc.dialects import simt
from qgc.machine.opcodes import ALU_OPCODES, SETP_EXPANSIONS
from qgc.pipeline import insert_after, parse_pipeline, stage, up_to, with_options
from qgc.runtime.expected import check_expected
from qgc.runtime.launch import load_launch
from qgc.runtime.simt_engine import run_simt

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

M32 = 0xFFFF_FFFF
FLOAT_OPS = sorted(name for name, code in ALU_OPCODES.items() if code.expand)
COMPARES = sorted(SETP_EXPANSIONS)
PASS = "simt-expand-float"
#: inline and shared; then as the simt pipeline goes on; then on a tight machine
PIPELINES = (f"{PASS}{{routine-ops=0}}", PASS,
             f"{PASS},simt-cse,simt-layout-memory,simt-allocate-registers,"
             "simt-form-blocks{max-blocks=1024}",
             f"{PASS}{{routine-ops=8}},simt-layout-memory,simt-allocate-registers{{regs=8}},"
             "simt-form-blocks{max-ops=6 max-blocks=1024}")
LANES = 8       # two warps
WORDS = st.one_of(st.sampled_from(SPECIALS), st.integers(0, M32),
                  st.tuples(st.integers(0, 1), st.integers(100, 154),
                            st.integers(0, 0x7F_FFFF)).map(
                      lambda t: t[0] << 31 | t[1] << 23 | t[2]))
INPUTS = ("v10", "v11", "v12")


def _signed(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


@st.composite
def _ops(draw) -> tuple[list[str], int]:
    """2-5 f32 ops, each result stored; sources are the inputs, earlier
    results or immediates; some guarded by vp0 (per lane, from buffer g)."""
    lines, values = [], list(INPUTS)
    count = draw(st.integers(2, 5))
    for i in range(count):
        compare = draw(st.integers(0, 4)) == 0
        opcode = draw(st.sampled_from(COMPARES if compare else FLOAT_OPS))
        arity = 2 if compare else ALU_OPCODES[opcode].arity
        srcs = [draw(st.sampled_from(values)) if draw(st.integers(0, 5)) else
                str(_signed(draw(WORDS))) for _ in range(arity)]
        guard = draw(st.sampled_from(["", "", " guard vp0", " guard !vp0"]))
        dst = f"v{20 + i}" if draw(st.integers(0, 3)) else draw(st.sampled_from(values))
        if compare:
            lines.append(f'    simt.setp "{opcode}" vp1, {", ".join(srcs)}{guard}')
            lines.append(f'    simt.alu "selp" {dst}, 1, 0, vp1')
        else:
            lines.append(f'    simt.alu "{opcode}" {dst}, {", ".join(srcs)}{guard}')
        lines.append(f"    simt.st global[v4 + {i}], {dst} buffer 4")
        values.append(dst)
    return lines, count


def _kernel(lines: list[str], count: int) -> str:
    """The ops after the loads; every result register written first (a
    guarded write keeps the old value, which must be defined)."""
    body = "\n".join([f'    simt.alu "mov" v{20 + i}, {i + 7}' for i in range(count)] +
                      ['    simt.setp "ne" vp1, v5, 7'] + lines)
    return f"""builtin.module {{
  simt.kernel @k(ptr a, ptr b, ptr c, ptr g, ptr out) lanes 4 mem_words 1024 {{
    simt.ld v0, param[0]
    simt.ld v1, param[1]
    simt.ld v2, param[2]
    simt.ld v3, param[3]
    simt.ld v4, param[4]
    simt.special v5, "tid.x"
    simt.alu "add" v0, v0, v5
    simt.ld v10, global[v0 + 0] buffer 0
    simt.alu "add" v1, v1, v5
    simt.ld v11, global[v1 + 0] buffer 1
    simt.alu "add" v2, v2, v5
    simt.ld v12, global[v2 + 0] buffer 2
    simt.alu "add" v3, v3, v5
    simt.ld v13, global[v3 + 0] buffer 3
    simt.setp "ne" vp0, v13, 0
    simt.alu "mul.lo" v6, v5, {count}
    simt.alu "add" v4, v4, v6
{body}
    simt.exit
  }}
}}
"""


def _launch(a, b, c, g, count: int):
    arg = lambda data: {"type": "u32*", "data": list(data)}  # noqa: E731
    return load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [LANES, 1, 1],
                        "args": [arg(a), arg(b), arg(c), arg(g), arg([0] * (LANES * count))]})


@st.composite
def _programs(draw):
    lines, count = draw(_ops())
    lanes = st.lists(WORDS, min_size=LANES, max_size=LANES)
    guards = st.lists(st.integers(0, 1), min_size=LANES, max_size=LANES)
    launch = _launch(draw(lanes), draw(lanes), draw(lanes), draw(guards), count)
    return _kernel(lines, count), launch


@lru_cache(maxsize=64)
def _parsed(text: str):
    return driver.parse_ir(make_context(), text, "float.mlir")


def _compiled(text: str, pipeline: str):
    module = _parsed(text).clone()
    driver.apply(make_context(), module, pipeline)
    return module


def _has_floats(module) -> bool:
    return any(isinstance(op, simt.AluOp) and ALU_OPCODES[op.opcode.data].expand or
               isinstance(op, simt.SetpOp) and op.cond.data in SETP_EXPANSIONS
               for kernel in simt.kernels_of(module) for op in kernel.walk())


def _expands_bit_exactly(program) -> None:
    text, launch = program
    want = run_simt(_parsed(text), launch).buffers
    for pipeline in PIPELINES:
        module = _compiled(text, pipeline)
        assert not _has_floats(module), pipeline
        assert run_simt(module, launch).buffers == want, (pipeline, text, launch)


@pytest.mark.parametrize("examples", [40, pytest.param(400, marks=pytest.mark.full)])
def test_expansion_is_bit_exact(examples):
    hypothesis.settings(max_examples=examples, deadline=None)(
        hypothesis.given(_programs())(_expands_bit_exactly))()


# ------------------------------------------------------------ routines

SHARED_TWICE = """builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.alu "add" v0, v0, v1
    simt.ld v2, global[v0 + 0] buffer 0
    simt.alu "fma.rn.f32" v3, v2, v2, v2
    simt.alu "fma.rn.f32" v4, v3, v2, 1065353216
    simt.alu "fma.rn.f32" v5, v4, v3, v2
    simt.st global[v0 + 0], v5 buffer 0
    simt.exit
  }
}
"""


def test_a_program_run_at_several_sites_is_one_routine_placed_first():
    module = _compiled(SHARED_TWICE, PASS)
    (kernel,) = simt.kernels_of(module)
    blocks = list(kernel.body.blocks)
    # a jump to the entry, the routine (its last block tests the site), the kernel
    assert isinstance(blocks[0].first_op, simt.NextOp) and len(blocks[0].ops) == 1
    products = [op for op in kernel.walk()
                if isinstance(op, simt.AluOp) and op.opcode.data == "mul.hi.u"]
    assert len(products) == 1
    assert products[0].parent_block() is blocks[1]
    sites = [op for op in kernel.walk() if isinstance(op, simt.AluOp) and
             op.opcode.data == "mov" and op.srcs.data[0] in (IntAttr(0), IntAttr(1), IntAttr(2))]
    assert len(sites) >= 3
    inline = _compiled(SHARED_TWICE, f"{PASS}{{routine-ops=0}}")
    assert sum(isinstance(op, simt.AluOp) and op.opcode.data == "mul.hi.u"
               for op in inline.walk()) == 3
    launch = load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [LANES, 1, 1],
                          "args": [{"type": "f32*", "data": [0.5, -2.0, 3.0, 1e30, 0.0, -0.0,
                                                              1e-40, 7.25]}]})
    want = run_simt(_parsed(SHARED_TWICE), launch).buffers
    assert run_simt(module, launch).buffers == want == run_simt(inline, launch).buffers


def test_refused_after_register_allocation():
    module = _compiled(SHARED_TWICE, "simt-allocate-registers")
    with pytest.raises(Exception, match="simt-expand-float runs on virtual registers"):
        driver.apply(make_context(), module, PASS)


# ------------------------------------------------------------ the suites

#: the simt pipeline with the pass, blocks without a count limit: what is
#: checked here is the expansion (the tensor level's 64 blocks are its own)
WITH_PASS = with_options(insert_after(stage("simt"), "simt-rename-webs",
                                      parse_pipeline(PASS).passes),
                         "simt-form-blocks", max_blocks=1024)


def _float_kernels():
    for d in sorted(EXAMPLES.iterdir()):
        if d.is_dir() and d.name.endswith("_f32"):
            for path in sorted(d.glob("*.ptx")):
                yield pytest.param(path, d / "launch.json", d / "expected.json",
                                   id=path.name)
    if SHARED_KERNELS.is_dir():
        for path in shared_kernel_files():
            if path.name.split(".")[0].endswith("_f"):
                info = path.parent / (path.name.split(".")[0] + ".json")
                yield pytest.param(path, info, info, id=path.name)


@pytest.mark.parametrize("path, launch_file, expected", list(_float_kernels()))
def test_float_kernels_give_their_expected_buffers(path, launch_file, expected):
    ctx, module = driver.load(str(path))
    try:
        driver.apply(ctx, module, WITH_PASS)
    except Exception as e:         # an op the machine does not run yet
        if "is not yet supported by the machine" in str(e):
            pytest.skip(str(e).splitlines()[0])
        raise
    assert not _has_floats(module)
    info = json.loads(launch_file.read_text())
    if path.name.endswith(".clang.ptx") and (info.get("warp4_undefined") or
                                             "expected_warp4" in info):
        pytest.skip("clang's PTX hard-codes 32-lane warps")
    launch = load_launch(launch_file)
    assert check_expected(expected, launch, run_simt(module, launch).buffers) > 0


# ------------------------------------------------------------ atomics

ATOMIC = """builtin.module {{
  simt.kernel @k(ptr a, ptr g, ptr sums, ptr olds) lanes 4 mem_words 128 {{
    simt.ld v0, param[0]
    simt.ld v1, param[1]
    simt.ld v2, param[2]
    simt.ld v3, param[3]
    simt.special v4, "tid.x"
    simt.alu "add" v0, v0, v4
    simt.ld v5, global[v0 + 0] buffer 0
    simt.alu "add" v1, v1, v4
    simt.ld v6, global[v1 + 0] buffer 1
    simt.setp "ne" vp0, v6, 0
    simt.alu "and" v7, v4, {mask}
    simt.alu "add" v2, v2, v7
    simt.alu "mov" v8, 7
    simt.atom "add.f32" v8, global[v2 + 0], v5 buffer 2{guard}
    simt.alu "add" v3, v3, v4
    simt.st global[v3 + 0], v8 buffer 3
    simt.exit
  }}
}}
"""


def _atomic_launch(lanes: int, values, guards, sums):
    arg = lambda t, data: {"type": t, "data": list(data)}  # noqa: E731
    return load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [lanes, 1, 1],
                        "args": [arg("u32*", values), arg("u32*", guards), arg("u32*", sums),
                                 arg("u32*", [0] * lanes)]})


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(st.lists(WORDS, min_size=4, max_size=4), st.lists(st.integers(0, 1), min_size=4,
                  max_size=4), st.lists(WORDS, min_size=4, max_size=4),
                  st.sampled_from([0, 1, 3]), st.booleans())
def test_a_float_atomic_is_a_compare_and_swap_loop_in_lane_order(values, guards, sums, mask,
                                                                  guarded):
    """One warp: lanes adding into one word apply in lane order, bit for bit
    (the returned old values too); a guarded-off lane adds nothing."""
    text = ATOMIC.format(mask=mask, guard=" guard vp0" if guarded else "")
    launch = _atomic_launch(4, values, guards, sums)
    want = run_simt(_parsed(text), launch).buffers
    for pipeline in PIPELINES:
        module = _compiled(text, pipeline)
        assert not any(isinstance(op, simt.AtomOp) and op.op.data == "add.f32"
                       for op in module.walk())
        assert run_simt(module, launch).buffers == want, pipeline


def test_float_atomics_of_several_warps_lose_no_update():
    """Four warps add small integers into two words: exact in any order."""
    text = ATOMIC.format(mask=1, guard="")
    ones = [0x3F80_0000, 0x4000_0000, 0x4040_0000, 0x4080_0000] * 4
    launch = _atomic_launch(16, ones, [1] * 16, [0, 0, 0, 0])
    module = _compiled(text, PIPELINES[2])
    sums = run_simt(module, launch).buffers[2]
    assert sums[:2] == [0x4180_0000, 0x41C0_0000]     # 8 · (1 + 3) / 2, 8 · (2 + 4) / 2


@pytest.mark.skipif(not SHARED_KERNELS.is_dir(), reason="needs ../shared/kernels")
def test_five_approx_algorithms_fit_the_machines_blocks():
    """fastmath_f's five `.approx` algorithms expand into more blocks than
    the 64 of the old 6-bit block field and fit the 256 of today's: with
    `max-blocks=64` it is refused, saying which limit and by how much."""
    from qgc.diagnostics import QgcError
    tensor_machine = up_to(stage("tensor"), "convert-simt-to-tensor")
    ctx, module = driver.load(str(SHARED_KERNELS / "fastmath_f.ptx"))
    driver.apply(ctx, module, tensor_machine)
    (kernel,) = simt.kernels_of(module)
    assert 64 < len(kernel.machine_blocks()) <= 256
    ctx, module = driver.load(str(SHARED_KERNELS / "fastmath_f.ptx"))
    with pytest.raises(QgcError, match=r"kernel 'fastmath_f' needs \d+ blocks, the machine "
                                       r"has 64 \(option max-blocks\)"):
        driver.apply(ctx, module, with_options(tensor_machine, "simt-form-blocks", max_blocks=64))


def test_the_f32_ops_of_a_shared_approx_routine_are_expanded_too():
    """Regression (hypothesis): two `sin.approx` sites share one routine,
    whose own f32 ops were left unexpanded (the routine was placed after the
    second round looked for them)."""
    text = SHARED_TWICE.replace('"fma.rn.f32" v3, v2, v2, v2', '"sin.approx.f32" v3, v2') \
        .replace('"fma.rn.f32" v4, v3, v2, 1065353216', '"sin.approx.f32" v4, v2')
    module = _compiled(text, PASS)
    assert not _has_floats(module)
    launch = load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [4, 1, 1],
                          "args": [{"type": "f32*", "data": [0.5, -2.0, 3.0, 100.0]}]})
    assert run_simt(module, launch).buffers == run_simt(_parsed(text), launch).buffers


# ------------------------------------------------------------ CUDA's libm

LIBM = Path(__file__).parent / "inputs" / "libm_f.ptx"
LIBM_PTX = (LIBM, LIBM.with_suffix(".clang.ptx"))       # nvcc's, clang's
LIBM_KERNELS = ("exp_f", "log1_f", "tanh_f", "erf_f", "atan2_f", "cbrt_f", "fmod_f", "expm1_f",
                "hypot_f", "sigmoid_f", "pow_f", "exp2_f", "log2_f", "log10_f", "sinh_f", "asin_f",
                "acos_f", "atan_f", "remainder_f", "frexp_f", "sin_f", "cos_f", "tan_f",
                "sincos_f")
#: the special classes and values across each function's ranges (overflow of
#: expf at 88.7, its underflow, the subnormals, huge and tiny arguments)
LIBM_INPUTS = [0.5, -1.5, 3.0, 100.0, -0.0, 1e-40, 88.7, -104.0, 1e30, math.inf, -math.inf,
               2.5e-3, -7.75, 0.125, 42.0, -3e5]


def libm_launch(name: str):
    """Kernel `name` of libm_f on `LIBM_INPUTS`, one input a thread."""
    return load_launch({"kernel": name, "grid": [4, 1, 1], "block": [4, 1, 1], "args": [
        {"type": "f32*", "data": LIBM_INPUTS}, {"type": "f32*", "data": [0.0] * 16}]})


def _one_entry(text: str, name: str) -> str:
    """The module's header, its variables and kernel `name` alone (nvcc
    inlines every device function, so each entry stands by itself): the
    others are not compiled."""
    variables = "\n".join(re.findall(r"^\.(?:global|const) .*$", text, re.MULTILINE))
    header, *entries = re.sub(r"^\.(?:global|const) .*$", "", text,
                              flags=re.MULTILINE).split("\n\t// .globl\t")
    (entry,) = [e for e in entries if re.match(rf"{name}\b", e)]
    return f"{header}\n{variables}\n\t// .globl\t{entry}"


@pytest.mark.parametrize("ptx", LIBM_PTX, ids=("nvcc", "clang"))
@pytest.mark.parametrize("name", LIBM_KERNELS)
def test_cuda_math_functions_run_equal_to_ref_after_expansion(name, ptx):
    """expf, logf, tanhf, erff, atan2f, cbrtf, fmodf, expm1f, hypotf, a
    sigmoid, powf (nine predicates live at once: one is kept as a word),
    exp2f, log2f, log10f, sinhf, asinf, acosf, atanf, remainderf,
    frexpf/ldexpf, sinf, cosf, tanf and sincosf (their reduction of a large
    argument reads the module table `__cudart_i2opi_f`; clang's with
    `mad.lo.cc`/`madc.hi`) as the compilers inline them: the tensor stages' machine program
    (every f32 op expanded, blocks formed) gives `ref`'s bits on every input."""
    from qgc.frontend import parse_ptx
    from qgc.runtime.ref import run_ref
    launch = libm_launch(name)
    text = _one_entry(ptx.read_text(), name)
    want = run_ref(parse_ptx(text, ptx.name), launch).buffers
    module = parse_ptx(text, ptx.name)
    driver.apply_for_launch(make_context(), module,
                            up_to(stage("tensor"), "convert-simt-to-tensor"), launch)
    got = run_simt(module, launch).buffers
    assert [struct.pack("<f", v) for v in got[1]] == [struct.pack("<f", v) for v in want[1]]
