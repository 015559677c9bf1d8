"""The machine's data-flow analyses (qgc/analysis/dataflow.py) and `simt-rename-webs`,
the SSA construction that splits virtual registers into their webs.

- reaching definitions and liveness on small kernels: a guarded write adds to
  the definitions before it and reads what it keeps, a loop carries its value;
- renaming is exact: random programs (straight-line, branches and loops,
  shared memory, atomics) run on the `simt` engine with virtual registers give
  the generator oracle's buffers before it and the same buffers after it, and after it no virtual register is
  written by definitions of two webs."""

from __future__ import annotations

from xdsl.parser import Parser

from conftest import on_random_programs
from qgc import driver
from qgc.analysis.dataflow import (
    Cfg,
    Definition,
    kept_by_guarded_writes,
    liveness,
    reaching_definitions,
    register_access,
)
from qgc.context import make_context
from qgc.dialects import simt
from qgc.dialects.simt import RegAttr
from qgc.runtime.simt_engine import run_simt

LOOP = """
builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {
    simt.ld v0, param[0]
    simt.special v1, "tid.x"
    simt.setp "lt.u" vp0, v1, 2
    simt.alu "mov" v2, 5
    simt.alu "mov" v2, 7 guard vp0
    simt.next ^bb1
  ^bb1:
    simt.alu "add" v2, v2, 1
    simt.setp "lt.u" vp1, v2, 9
    simt.branch vp1, ^bb1, ^bb2
  ^bb2:
    simt.st global[v0 + 0], v2 buffer 0
    simt.exit
  }
}
"""


def _kernel(text: str) -> simt.KernelOp:
    module = Parser(make_context(), text).parse_module()
    (kernel,) = simt.kernels_of(module)
    return kernel


def v(i: int) -> RegAttr:
    return RegAttr("v", i)


def test_a_guarded_write_adds_to_the_definitions_before_it():
    kernel = _kernel(LOOP)
    cfg = Cfg.of(kernel)
    entry, loop, _ = cfg.blocks
    reach = reaching_definitions(cfg, register_access)
    first_mov, guarded_mov = [op for op in entry.ops if isinstance(op, simt.AluOp)]
    (add,) = [op for op in loop.ops if isinstance(op, simt.AluOp)]
    assert reach[entry][v(2)] == {Definition(None, v(2))}
    # the loop head sees both movs (the guarded one does not kill) and the add
    assert reach[loop][v(2)] == {Definition(first_mov, v(2)), Definition(guarded_mov, v(2)),
                                 Definition(add, v(2))}


def test_liveness_carries_the_loop_value_and_what_a_guard_keeps():
    kernel = _kernel(LOOP)
    cfg = Cfg.of(kernel)
    entry, loop, tail = cfg.blocks
    keeps = kept_by_guarded_writes(cfg, register_access)
    guarded_mov = [op for op in entry.ops if isinstance(op, simt.AluOp)][1]
    assert keeps[guarded_mov] == {v(2)}
    live_in, live_out = liveness(cfg, register_access, keeps)
    assert live_in[loop] == {v(0), v(2)} and live_out[loop] == {v(0), v(2)}
    assert live_in[tail] == {v(0), v(2)} and live_out[tail] == set()
    assert live_in[entry] == set()


def _web_count(kernel: simt.KernelOp) -> int:
    """How many webs the kernel's virtual registers split into."""
    from qgc.passes.simt_rename_webs import Webs, join_webs, virtual_access
    webs = Webs()
    join_webs(kernel, webs)
    for block in kernel.body.blocks:
        for op in block.ops:
            for reg in virtual_access(op)[1]:
                webs.find(Definition(op, reg))
    return len({webs.find(d) for d in list(webs.parent)})


def test_random_programs_run_the_same_after_renaming():
    before = "ptx-remove-dead-functions,convert-ptx-to-simt{mem-words=1024},simt-if-convert"

    def check(p, module, launch):
        renamed = module.clone()
        driver.apply(make_context(), renamed, "simt-rename-webs")
        (kernel,) = simt.kernels_of(renamed)
        # one register per web, and renaming again finds the same webs
        names = {r for b in kernel.body.blocks for op in b.ops
                 for r in register_access(op)[0] + register_access(op)[1] if r.is_virtual}
        assert _web_count(kernel) == len(names)
        again = renamed.clone()
        driver.apply(make_context(), again, "simt-rename-webs")
        assert str(again) == str(renamed)
        want = run_simt(module, launch).buffers
        assert want == p.expected, p.ptx     # the integer families: no f32 to compare by bits
        assert run_simt(renamed, launch).buffers == want, p.ptx

    assert on_random_programs(["int32", "branch", "shared", "atomic"], 60, before, check) > 0
