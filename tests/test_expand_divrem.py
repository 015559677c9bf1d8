"""`simt-expand-divrem`: division and remainder as loops of machine blocks,
bit-exact with the machine's `div`/`rem` (the simt engine runs both).

- random 32-bit operands, edge values among them (0, ±1, INT_MIN, INT_MAX,
  powers of two and their neighbours), for each of the four ops, guarded or
  not, by a register, an immediate or a register set by a `mov`, with the
  destination a source or not, the sources dying at the division or not, in
  a divergent branch or not: the kernel's buffers are the same before and
  after the pass, and after register allocation and block formation too
  (also with 6 registers, so that the loop spills, and blocks of 5 ops);
- every example and shared kernel whose simt program divides gives its
  expected buffers with the pass in the simt pipeline, and keeps no div/rem.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest

from conftest import EXAMPLES, SHARED_KERNELS, shared_kernel_files, shared_params
from qgc import driver
from qgc.context import make_context
from qgc.dialects import simt
from qgc.pipeline import insert_after, parse_pipeline, stage, up_to
from qgc.runtime.launch import load_launch
from qgc.runtime.simt_engine import run_simt

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

M32 = 0xFFFF_FFFF
OPS = ("div.u", "rem.u", "div.s", "rem.s")
EDGES = sorted({0, 1, 2, 3, 7, 10, 0x7FFF_FFFF, 0x8000_0000, 0x8000_0001, M32, M32 - 1,
                *(1 << i for i in range(32)), *((1 << i) - 1 for i in range(33)),
                *(-(1 << i) & M32 for i in range(32)), *(-(1 << i) - 1 & M32 for i in range(31))})
WORDS = st.one_of(st.sampled_from(EDGES), st.integers(0, M32))
PASS = "simt-expand-divrem"
#: after the pass; then as the simt pipeline goes on; then on a tight machine
PIPELINES = (PASS,
             f"{PASS},simt-layout-memory,simt-allocate-registers,simt-form-blocks",
             f"{PASS}{{max-ops=8 regs=6}},simt-layout-memory,simt-allocate-registers{{regs=6}},"
             "simt-form-blocks{max-ops=5}")
LANES = 8       # two warps
LAUNCHES = 3    # per program (compiling costs more than running)


def _kernel(opcode: str, guarded: bool, divisor: str, dst: str, dividend: str, keep: bool,
            branch: bool) -> str:
    """Per thread: a, b, g, out from four buffers; out = a op b (guarded by
    g != 0, or in a branch on it); a and b stored back when `keep`. The
    divisor is v6 (`reg`), an immediate, or v6 set by a `mov` just before."""
    b = "v6"
    div = ""
    if divisor.startswith("mov "):
        div = f'    simt.alu "mov" v6, {divisor[4:]}\n'
    elif divisor != "reg":
        b = divisor
    guard = " guard vp0" if guarded else ""
    div += f'    simt.alu "{opcode}" {dst}, {dividend}, {b}{guard}\n'
    if branch:
        div = f"    simt.branch vp0, ^bb1, ^bb2\n  ^bb1:\n{div}    simt.next ^bb2\n  ^bb2:\n"
    stores = "    simt.st global[v0 + 0], v5 buffer 0\n    simt.st global[v1 + 0], v6 buffer 1\n" \
        if keep else ""
    return f"""builtin.module {{
  simt.kernel @k(ptr a, ptr b, ptr g, ptr out) lanes 4 mem_words 128 {{
    simt.ld v0, param[0]
    simt.ld v1, param[1]
    simt.ld v2, param[2]
    simt.ld v3, param[3]
    simt.special v4, "tid.x"
    simt.alu "add" v0, v0, v4
    simt.ld v5, global[v0 + 0] buffer 0
    simt.alu "add" v1, v1, v4
    simt.ld v6, global[v1 + 0] buffer 1
    simt.alu "add" v2, v2, v4
    simt.ld v7, global[v2 + 0] buffer 2
    simt.setp "ne" vp0, v7, 0
    simt.alu "add" v3, v3, v4
    simt.ld v8, global[v3 + 0] buffer 3
{div}    simt.st global[v3 + 0], {dst} buffer 3
{stores}    simt.exit
  }}
}}
"""


@lru_cache(maxsize=64)
def _parsed(text: str):
    return driver.parse_ir(make_context(), text, "divrem.mlir")


def _compiled(text: str, pipeline: str):
    module = _parsed(text).clone()
    driver.apply(make_context(), module, pipeline)
    return module


def _signed(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


def _launch(a, b, g, out):
    arg = lambda data: {"type": "u32*", "data": list(data)}  # noqa: E731
    return load_launch({"kernel": "k", "grid": [1, 1, 1], "block": [LANES, 1, 1],
                        "args": [arg(a), arg(b), arg(g), arg(out)]})


@st.composite
def _programs(draw, opcode: str, guarded: bool):
    divisor = draw(st.sampled_from(["reg", "reg", "imm", "mov"]))
    if divisor != "reg":
        divisor = f"{'mov ' if divisor == 'mov' else ''}{_signed(draw(WORDS))}"
    dividend = draw(st.sampled_from(["v5", "v5", "v5", "imm"]))
    if dividend == "imm":
        dividend = str(_signed(draw(WORDS)))
    text = _kernel(opcode, guarded, divisor, draw(st.sampled_from(["v8", "v8", "v5", "v6"])),
                   dividend, draw(st.booleans()), draw(st.sampled_from([False, False, True])))
    lanes = st.lists(WORDS, min_size=LANES, max_size=LANES)
    guards = st.lists(st.integers(0, 1), min_size=LANES, max_size=LANES)
    launches = [_launch(draw(lanes), draw(lanes), draw(guards), draw(lanes))
                for _ in range(LAUNCHES)]
    return text, launches


@pytest.mark.parametrize("guarded", [False, True], ids=["unguarded", "guarded"])
@pytest.mark.parametrize("opcode", OPS)
def test_expansion_is_bit_exact(opcode, guarded):
    @hypothesis.settings(max_examples=12, deadline=None)
    @hypothesis.given(_programs(opcode, guarded))
    def check(program):
        text, launches = program
        wants = [run_simt(_parsed(text), launch).buffers for launch in launches]
        for pipeline in PIPELINES:
            module = _compiled(text, pipeline)
            assert not _divides(module), pipeline
            for launch, want in zip(launches, wants, strict=True):
                assert run_simt(module, launch).buffers == want, (pipeline, text, launch)
    check()


def _divides(module) -> bool:
    return any(isinstance(op, simt.AluOp) and op.opcode.data in OPS
               for kernel in simt.kernels_of(module) for op in kernel.walk())


# ------------------------------------------------------------ the suites

DIVIDES = re.compile(r"\b(div|rem)\.[su](8|16|32|64)\b")
WITH_PASS = insert_after(stage("simt"), "simt-rename-webs", parse_pipeline(PASS).passes)


def _dividing_kernels(paths):
    """Examples and shared kernels with an integer div/rem (those the machine
    runs: float kernels are refused before the pass)."""
    for path in paths:
        if DIVIDES.search(path.read_text()) and not path.stem.endswith("_f") and \
                not path.stem.endswith("_f.clang"):
            yield pytest.param(path, id=path.name)


@pytest.mark.parametrize("path", [*_dividing_kernels(sorted(EXAMPLES.glob("*/*.ptx"))),
                                  *shared_params(list(_dividing_kernels(shared_kernel_files())))])
def test_dividing_kernels_give_their_expected_buffers(path):
    from test_ref_engine import check_buffer
    ctx, module = driver.load(str(path))
    driver.apply(ctx, module, WITH_PASS)
    assert not _divides(module)
    if path.parent == SHARED_KERNELS:
        info = json.loads((SHARED_KERNELS / f"{path.name.split('.')[0]}.json").read_text())
        result = run_simt(module, load_launch(info, path.name))
        expected = info.get("expected_warp4", info["expected"])
        for param, got in zip(info["params"], result.buffers, strict=True):
            if param["kind"] == "ptr":
                check_buffer(param["name"], param["elem"], got, expected[param["name"]],
                             info.get("checks", {}).get(param["name"], {}))
    else:
        result = run_simt(module, load_launch(path.parent / "launch.json"))
        expected = json.loads((path.parent / "expected.json").read_text())["buffers"]
        assert result.buffers == expected


def test_new_ops_keep_the_division_location():
    from collections import Counter
    path = EXAMPLES / "histogram_atomic" / "histogram_atomic.ptx"
    front = up_to(stage("simt"), "simt-layout-memory")
    ctx, module = driver.load(str(path))
    driver.apply(ctx, module, front)

    def locations(m) -> Counter:
        return Counter(str(op.location) for k in simt.kernels_of(m) for b in k.body.blocks
                       for op in b.ops)
    before = locations(module)
    (rem,) = [str(op.location) for op in module.walk()
              if isinstance(op, simt.AluOp) and op.opcode.data in OPS]
    driver.apply(ctx, module, PASS)
    after = locations(module)
    assert {loc for loc in after if after[loc] != before[loc]} == {rem}
    assert ":42:2" in rem


def test_refused_after_register_allocation():
    from qgc.diagnostics import QgcError
    text = _kernel("div.u", False, "reg", "v8", "v5", True, False)
    module = _compiled(text, "simt-allocate-registers")
    with pytest.raises(QgcError, match="simt-expand-divrem runs on virtual registers, before "
                       "simt-allocate-registers"):
        driver.apply(make_context(), module, PASS)
