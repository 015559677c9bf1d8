"""Module variables on the machine: `__device__` and `__constant__` data the
kernel addresses through registers become trailing pointer parameters whose
buffers the launch fills from the module's initializers
(`simt.KernelOp.module_vars`). examples/device_globals runs them at every
level (test_simt, test_tensor_kernels, test_model_kernels); here: the
launch's arity, a trap inside a table, the IR's round trip and the
diagnostics."""

from __future__ import annotations

import json

import pytest
from test_simt import compile_simt

from conftest import EXAMPLES
from qgc.diagnostics import QgcError
from qgc.frontend import parse_ptx
from qgc.runtime.launch import LaunchError, load_launch
from qgc.runtime.memory import Trap
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import run_simt

GLOBALS = EXAMPLES / "device_globals"

#: `out[i] = tab[in[i]]` over a 4-word `__device__` table: an index past it
#: reads outside the variable
TABLE = """
.version 8.5
.target sm_75
.address_size 64
.global .align 4 .b8 tab[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0};
.visible .entry lookup(.param .u64 lookup_in, .param .u64 lookup_out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [lookup_in];
    ld.param.u64 %rd2, [lookup_out];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    ld.global.u32 %r2, [%rd4];
    mul.wide.u32 %rd5, %r2, 4;
    mov.u64 %rd6, tab;
    add.s64 %rd7, %rd6, %rd5;
    ld.global.u32 %r3, [%rd7];
    add.s64 %rd8, %rd2, %rd3;
    st.global.u32 [%rd8], %r3;
    ret;
}
"""


def _table_launch(indices: list[int]):
    return load_launch({"kernel": "lookup", "grid": [1, 1, 1], "block": [4, 1, 1], "args": [
        {"type": "u32*", "data": indices}, {"type": "u32*", "data": [0, 0, 0, 0]}]})


def _table_kernel(tmp_path, text: str = TABLE):
    path = tmp_path / "lookup.ptx"
    path.write_text(text)
    return compile_simt(path)


def test_a_table_lookup_equals_ref(tmp_path):
    launch = _table_launch([3, 0, 2, 1])
    assert run_simt(_table_kernel(tmp_path), launch).buffers == \
        run_ref(parse_ptx(TABLE, "lookup.ptx"), launch).buffers == [[3, 0, 2, 1], [4, 1, 3, 2]]


def test_a_read_past_the_table_traps_naming_it(tmp_path):
    launch = _table_launch([3, 0, 4, 1])
    with pytest.raises(Trap) as err:
        run_simt(_table_kernel(tmp_path), launch)
    message = str(err.value)
    assert "tid (2,0,0)" in message and "ld.global.u32" in message
    assert "outside buffer 2 'tab'" in message
    with pytest.raises(Trap):            # ref agrees that the launch faults
        run_ref(parse_ptx(TABLE, "lookup.ptx"), launch)


def test_the_launch_gives_the_kernels_own_arguments_only():
    module = compile_simt(GLOBALS / "device_globals.ptx")
    obj = json.loads((GLOBALS / "launch.json").read_text())
    obj["args"].append({"type": "s32*", "data": [0] * 16})
    with pytest.raises(LaunchError, match="takes 4 arguments, the launch gives 5"):
        run_simt(module, load_launch(obj))


def test_module_vars_print_and_parse_back():
    from xdsl.parser import Parser

    from qgc.context import make_context
    module = compile_simt(GLOBALS / "device_globals.ptx")
    text = str(module)
    assert 'module_vars (c_lut at 0x0 = "07000000' in text
    assert "d_total at 0x" in text and "= zeros 4" in text
    assert str(Parser(make_context(), text).parse_module()) == text


def test_an_external_variable_is_refused_by_name(tmp_path):
    text = TABLE.replace(".global .align 4 .b8 tab[16] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, "
                         "4, 0, 0, 0};", ".extern .global .align 4 .b8 tab[16];")
    with pytest.raises(QgcError, match=r"lookup.ptx:\d+:\d+: error: .*'tab'"):
        _table_kernel(tmp_path, text)
