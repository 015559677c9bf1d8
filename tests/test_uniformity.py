"""Warp-uniform addresses (qgc/analysis/uniformity.py): which loads read one
word for the whole warp. The analysis must never call a load uniform where two
lanes running it together may address different words — the tensor level
then reads one word for all of them (examples/uniform_loads runs both kinds
on every engine). Each kernel here has one load `ld v9, ...` to classify."""

from __future__ import annotations

import pytest
from xdsl.parser import Parser

from qgc.analysis.uniformity import uniform_addresses
from qgc.context import make_context
from qgc.dialects import simt


def _classify(body: str) -> bool:
    text = ("builtin.module {\n  simt.kernel @k(ptr a, u32 n) lanes 4 mem_words 128 {\n"
            "    simt.ld v0, param[0]\n    simt.special v1, \"tid.x\"\n"
            "    simt.setp \"lt.u\" vp0, v1, 2\n" + body + "\n    simt.exit\n  }\n}\n")
    (kernel,) = simt.kernels_of(Parser(make_context(), text).parse_module())
    (load,) = [op for op in kernel.walk() if isinstance(op, simt.LdOp) and op.dst.index.data == 9]
    return load in uniform_addresses(kernel)


UNIFORM = {
    "a parameter": "simt.ld v9, global[v0 + 1] buffer 0",
    "arithmetic on parameters and the CTA's geometry": """
    simt.special v2, "ctaid.x"
    simt.special v3, "ntid.x"
    simt.alu "mad.lo" v4, v2, v3, v0
    simt.ld v9, global[v4 + 0] buffer 0""",
    "equal computations on both sides of a branch": """
    simt.branch vp0, ^bb1, ^bb2
  ^bb1:
    simt.alu "add" v2, v0, 3
    simt.next ^bb3
  ^bb2:
    simt.alu "add" v2, v0, 3
    simt.next ^bb3
  ^bb3:
    simt.ld v9, global[v2 + 0] buffer 0""",
    "a guarded write read under the same guard": """
    simt.alu "mov" v2, v1
    simt.alu "add" v2, v0, 4 guard vp0
    simt.ld v9, global[v2 + 0] buffer 0 guard vp0""",
    "a spill slot's value reloaded": """
    simt.st spill[0], v0
    simt.alu "mov" v0, v1
    simt.ld v2, spill[0]
    simt.ld v9, global[v2 + 2] buffer 0""",
    "a loop-invariant base inside a loop": """
    simt.alu "mov" v2, 0
    simt.next ^bb1
  ^bb1:
    simt.ld v9, global[v0 + 5] buffer 0
    simt.alu "add" v2, v2, 1
    simt.setp "lt.u" vp1, v2, v1
    simt.branch vp1, ^bb1, ^bb2
  ^bb2:""",
}

DIVERGENT = {
    "the thread index": """
    simt.alu "add" v2, v0, v1
    simt.ld v9, global[v2 + 0] buffer 0""",
    "different values on the two sides of a branch": """
    simt.branch vp0, ^bb1, ^bb2
  ^bb1:
    simt.alu "add" v2, v0, 3
    simt.next ^bb3
  ^bb2:
    simt.alu "add" v2, v0, 4
    simt.next ^bb3
  ^bb3:
    simt.ld v9, global[v2 + 0] buffer 0""",
    "a guarded write read by every lane": """
    simt.alu "mov" v2, v1
    simt.alu "add" v2, v0, 4 guard vp0
    simt.ld v9, global[v2 + 0] buffer 0""",
    "a guarded write read under the opposite guard": """
    simt.alu "mov" v2, v1
    simt.alu "add" v2, v0, 4 guard vp0
    simt.ld v9, global[v2 + 0] buffer 0 guard !vp0""",
    "a guard whose predicate changed": """
    simt.alu "mov" v2, v1
    simt.alu "add" v2, v0, 4 guard vp0
    simt.setp "lt.u" vp0, v1, 3
    simt.ld v9, global[v2 + 0] buffer 0 guard vp0""",
    "a counter after a loop with a trip count per lane": """
    simt.alu "mov" v2, 0
    simt.next ^bb1
  ^bb1:
    simt.alu "add" v2, v2, 1
    simt.setp "lt.u" vp1, v2, v1
    simt.branch vp1, ^bb1, ^bb2
  ^bb2:
    simt.ld v9, global[v2 + 0] buffer 0""",
    "a counter inside the loop": """
    simt.alu "mov" v2, v0
    simt.next ^bb1
  ^bb1:
    simt.ld v9, global[v2 + 0] buffer 0
    simt.alu "add" v2, v2, 1
    simt.setp "lt.u" vp1, v2, v1
    simt.branch vp1, ^bb1, ^bb2
  ^bb2:""",
    "a word loaded from memory": """
    simt.ld v2, global[v0 + 0] buffer 0
    simt.ld v9, global[v2 + 0] buffer 0""",
    "a spill slot written under a guard": """
    simt.st spill[0], v1
    simt.st spill[0], v0 guard vp0
    simt.ld v2, spill[0]
    simt.ld v9, global[v2 + 0] buffer 0""",
    "the lane's own number": """
    simt.special v2, "laneid"
    simt.alu "add" v2, v2, v0
    simt.ld v9, global[v2 + 0] buffer 0""",
}


@pytest.mark.parametrize("case", UNIFORM)
def test_uniform(case):
    assert _classify(UNIFORM[case])


@pytest.mark.parametrize("case", DIVERGENT)
def test_divergent(case):
    assert not _classify(DIVERGENT[case])
