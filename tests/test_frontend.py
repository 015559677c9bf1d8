"""The PTX frontend reads every example and shared kernel, and the IR round-trips."""

import io

import pytest
from xdsl.parser import Parser
from xdsl.printer import Printer

from conftest import (
    EXAMPLES,
    SHARED_KERNELS,
    needs_shared_kernels,
    shared_kernel_files,
    shared_params,
)
from qgc.diagnostics import SourceError
from qgc.dialects import ptx
from qgc.frontend import parse_ptx

PTX_FILES = sorted(EXAMPLES.glob("*/*.ptx")) + shared_params(shared_kernel_files())


def _print(module, generic=False) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic, print_debuginfo=True).print_op(module)
    return out.getvalue()


@needs_shared_kernels
def test_suites_are_present():
    assert len(list(SHARED_KERNELS.glob("*.ptx"))) >= 48
    assert len(PTX_FILES) >= 48 + 30


@pytest.mark.parametrize("path", PTX_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_parses_verifies_and_roundtrips(path, ctx):
    module = parse_ptx(path.read_text(), str(path))
    module.verify()
    kernels = [op for op in module.walk() if isinstance(op, ptx.EntryOp)]
    assert len(kernels) == 1
    assert any(isinstance(op, ptx.InstOp) for op in kernels[0].body.ops)
    text = _print(module)
    assert _print(Parser(ctx, text).parse_module()) == text
    generic = Parser(ctx, _print(module, generic=True)).parse_module()
    assert _print(generic) == text


@needs_shared_kernels
def test_instruction_count_matches_the_suite_metadata():
    import json
    for meta in sorted(SHARED_KERNELS.glob("*.json")):
        info = json.loads(meta.read_text())
        for compiler, suffix in (("nvcc", ".ptx"), ("clang", ".clang.ptx")):
            path = meta.with_name(meta.stem + suffix)
            module = parse_ptx(path.read_text(), str(path))
            insts = [op for op in module.walk() if isinstance(op, ptx.InstOp)]
            opcodes = sorted({op.opcode.data for op in insts})
            assert opcodes == info["opcodes"][compiler], path.name
            assert len(insts) == info["ptx_stats"][compiler]["instructions"], path.name


@pytest.mark.parametrize("text, expected", [
    ("%r1", ptx.Reg("%r1")),
    ("!%p2", ptx.Reg("%p2", negated=True)),
    ("%tid.x", ptx.Reg("%tid.x")),
    ("-1", ptx.Imm(-1)),
    ("0x10", ptx.Imm(16)),
    ("0f3F800000", ptx.Imm(0x3F800000, is_float=True, bits=32)),
    ("[%rd1+8]", ptx.Addr(ptx.Reg("%rd1"), 8)),
    ("[%rd1-8]", ptx.Addr(ptx.Reg("%rd1"), -8)),
    ("[sym]", ptx.Addr(ptx.Sym("sym"), 0)),
    ("[64]", ptx.Addr(None, 64)),
    ("{%r1, %r2}", ptx.Vec((ptx.Reg("%r1"), ptx.Reg("%r2")))),
    ("%r1|%p1", ptx.Pair(ptx.Reg("%r1"), ptx.Reg("%p1"))),
    ("$L__BB0_2", ptx.Sym("$L__BB0_2")),
    ("WARP_SZ", ptx.Sym("WARP_SZ")),
])
def test_decode_operand(text, expected):
    assert ptx.decode_operand(text) == expected


def test_decode_opcode():
    op = ptx.decode_opcode("setp.lt.and.s32")
    assert (op.base, op.modifiers, op.types) == ("setp", ("lt", "and"), ("s32",))
    cvt = ptx.decode_opcode("cvt.rzi.s32.f32")
    assert cvt.types == ("s32", "f32") and cvt.has("rzi")


def test_address_spellings_normalise():
    text = """.version 8.5\n.target sm_75\n.address_size 64
.visible .entry k(.param .u64 p)\n{\n .reg .b64 %rd<3>;\n .reg .b32 %r<3>;
 ld.global.u32 %r1, [%rd1+-8];\n ld.global.u32 %r2, [%rd1 + 4];\n ret;\n}\n"""
    module = parse_ptx(text, "k.ptx")
    args = [op.args.data[1].data for op in module.walk()
            if isinstance(op, ptx.InstOp) and op.op.base == "ld"]
    assert args == ["[%rd1-8]", "[%rd1+4]"]


def test_nested_scopes_flatten_with_fresh_names():
    text = """.version 8.5\n.target sm_75\n.address_size 64
.visible .entry k()\n{\n .reg .b64 %x;\n mov.u64 %x, 1;\n {\n  .reg .b64 %x;\n  mov.u64 %x, 2;\n }
 add.u64 %x, %x, 3;\n ret;\n}\n"""
    module = parse_ptx(text, "k.ptx")
    insts = [(op.opcode.data, [a.data for a in op.args.data]) for op in module.walk()
             if isinstance(op, ptx.InstOp)]
    assert insts[:3] == [("mov.u64", ["%x", "1"]), ("mov.u64", ["%x_1", "2"]),
                         ("add.u64", ["%x", "%x", "3"])]


def test_syntax_error_has_position_and_caret():
    text = ".version 8.5\n.target sm_75\n.address_size 64\n.visible .entry k()\n{\n\tmov.u32 %r1 5;\n}\n"
    with pytest.raises(SourceError) as err:
        parse_ptx(text, "bad.ptx")
    lines = str(err.value).splitlines()
    assert lines[0] == "bad.ptx:6:14: error: unexpected '5', expected ',' or ';'"
    assert lines[2].index("^") == 13
