"""Register spilling (`simt-allocate-registers`, docs/machine.md "Spilling"):
spilled code must compute exactly what the unspilled code does.

- random programs of tests/ptxgen (int32, branch, shared, atomic) compiled
  with 4 registers (atomic: 3) agree with the generator's oracle;
- every example the machine runs equals `ref` with 6 registers (most spill);
- the lit kernels of testsuite/passes run the same spilled and not, with partial
  warps and several CTAs (every thread has its own slots);
- the spill area is counted in the launch's memory (`--stats`, the mem-words
  diagnostic), refused by the tensor level, checked by the verifier.
"""

from __future__ import annotations

import re

import pytest
from test_simt import _bits, accepted_cases, compile_simt
from xdsl.utils.exceptions import VerifyException

from conftest import EXAMPLES, REPO, on_random_programs
from qgc import driver
from qgc.diagnostics import QgcError, location_prefix
from qgc.dialects import simt
from qgc.machine.abi import bank_bits
from qgc.pipeline import pipeline_text, stage, up_to, with_options
from qgc.runtime.launch import LaunchError, load_launch
from qgc.runtime.ref import run_ref
from qgc.runtime.simt_engine import run_simt

PIPELINE = stage("simt")


def with_regs(regs: int, pipeline=PIPELINE):
    return with_options(pipeline, "simt-allocate-registers", regs=regs)


def spill_ops(kernel: simt.KernelOp) -> list[simt.MemoryOp]:
    return [op for op in kernel.walk()
            if isinstance(op, simt.LdOp | simt.StOp) and op.space.data == "spill"]


# ------------------------------------------------------------ the examples

@pytest.mark.parametrize("name, compiler, suffix", accepted_cases(),
                         ids=[f"{n}-{c}" for n, c, _ in accepted_cases()])
def test_example_with_six_registers_equals_ref(name, compiler, suffix):
    path = EXAMPLES / name / f"{name}{suffix}"
    launch = load_launch(EXAMPLES / name / "launch.json")
    ctx, module = driver.load(str(path))
    ref = run_ref(module, launch, warp_size=4)
    driver.apply(ctx, module, with_regs(6))
    (kernel,) = simt.kernels_of(module)
    assert kernel.limit("regs") == 6
    assert (kernel.spilled is None) == (kernel.spill_size == 0) == (not spill_ops(kernel))
    result = run_simt(module, launch)
    assert _bits(result.buffers, launch) == _bits(ref.buffers, launch)


#: examples with an op that reads five registers at once (atom.cas.b64)
FIVE_AT_ONCE = {"atomic64_cas_exch"}


def test_four_registers_spill_most_examples_and_share_slots():
    spilled = shared_slots = 0
    for name, _, suffix in accepted_cases():
        path = EXAMPLES / name / f"{name}{suffix}"
        try:
            # verified once, at the end (test_simt verifies each pass of every example)
            (kernel,) = simt.kernels_of(compile_simt(path, with_regs(4), verify_each=False))
        except QgcError as err:    # one op reads more: a 64-bit cas, its address and 4 words
            assert name in FIVE_AT_ONCE and "even after spilling, the machine has 4" in str(err)
            continue
        if kernel.spilled is None:
            continue
        spilled += 1
        shared_slots += kernel.spill_size < kernel.limit("spilled")
        for op in spill_ops(kernel):     # spill code keeps its op's PTX location
            assert location_prefix(op).startswith(f"{path}:")
    assert spilled >= 20 and shared_slots >= 2


# ------------------------------------------------------------ the lit kernels

def _lit_module(ctx, name: str, pipeline: str | None):
    text = (REPO / "testsuite" / "passes" / name).read_text()
    module = driver.parse_ir(ctx, text, name)
    if pipeline:
        driver.apply(ctx, module, pipeline)
    return module


@pytest.mark.parametrize("kernel, n", [("k", 2), ("k", 5), ("loop", 3), ("loop", 1)])
@pytest.mark.parametrize("grid, block", [(1, 4), (2, 3), (3, 7)])
def test_lit_kernels_run_the_same_spilled(ctx, kernel, n, grid, block):
    """Guarded writes of spilled registers, a loop, partial warps, several CTAs
    (which store the same values to the same words)."""
    args = [{"type": "u32*", "data": [7] * block}, {"type": "u32", "value": n}]
    if kernel == "k":
        args.append({"type": "u32*", "data": [9] * block})
    launch = load_launch({"kernel": kernel, "grid": [grid, 1, 1], "block": [block, 1, 1],
                          "args": args})
    plain = run_simt(_lit_module(ctx, "simt-allocate-registers-spill.mlir", None), launch)
    spilled = _lit_module(ctx, "simt-allocate-registers-spill.mlir",
                          "simt-allocate-registers{regs=3},simt-form-blocks{max-ops=4}")
    result = run_simt(spilled, launch)
    assert result.buffers == plain.buffers
    # whole warps (an absent lane's slots stay unused), each warp's slots a
    # whole number of the memory's 2 banks (mem_words 128)
    words = [k for k in simt.kernels_of(spilled) if k.kernel_name == kernel][0].spill_size
    warps = grid * -(-block // 4)
    assert result.stats["memory"]["spill"] == warps * (-(-4 * words // 2) * 2)


# ------------------------------------------------------------ random programs

def _random_programs_agree(family: str, examples: int, regs: int = 4) -> None:
    spilled = [0]

    def check(p, module, launch):
        got = run_simt(module, launch).buffers
        assert _bits(got, launch) == _bits(p.expected, launch), p.ptx
        spilled[0] += simt.kernels_of(module)[0].spilled is not None

    # with 4 registers never "even after spilling"
    refusals = ("is not yet supported by the machine",) + \
        (("even after spilling",) if regs < 4 else ())
    assert on_random_programs([family], examples, with_regs(regs), check, refusals) > 0
    assert spilled[0] > 0


@pytest.mark.parametrize("family, examples, regs", [
    ("int32", 30, 4), ("branch", 40, 4), ("shared", 25, 4),
    ("atomic", 25, 3)])     # atomic programs are small: with 4 registers few spill
def test_random_spilled_programs_agree_with_the_oracle(family, examples, regs):
    _random_programs_agree(family, examples, regs)


@pytest.mark.parametrize("family", ["int32", "int64", "branch", "shared", "atomic"])
def test_random_programs_in_small_blocks_with_spills_agree(family):
    """Spill code and block formation together: 4 registers and blocks of at
    most 3 ops, so spills, reloads and the ops they serve land in different
    blocks (and EXEC steps); the buffers stay the oracle's."""
    pipeline = with_options(with_regs(4), "simt-form-blocks", max_ops=3, max_blocks=512)

    def check(p, module, launch):
        got = run_simt(module, launch).buffers
        assert _bits(got, launch) == _bits(p.expected, launch), p.ptx

    assert on_random_programs([family], 20, pipeline, check) > 0


# ------------------------------------------------------------ limits and memory

DOT = EXAMPLES / "dot" / "dot.ptx"
FRONT = "ptx-remove-dead-functions,convert-ptx-to-simt,simt-if-convert"


def test_spill_area_must_fit_the_memory():
    """dot with 3 registers: 4 slots for each of 4 threads after its 17 words."""
    module = compile_simt(DOT, with_options(with_regs(3), "convert-ptx-to-simt", mem_words=32))
    (kernel,) = simt.kernels_of(module)
    assert kernel.spill_size == 4
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    with pytest.raises(LaunchError, match=r"^the launch needs 33 words of machine memory \(.*"
                       r", 4 spill words for each of 4 threads\), the machine has 32 "
                       r"\(option mem-words\)$"):
        run_simt(module, launch)
    module = compile_simt(DOT, with_options(with_regs(3), "convert-ptx-to-simt", mem_words=33))
    result = run_simt(module, launch)
    assert result.buffers[2] == [32] and result.stats["memory"]["spill"] == 16
    assert result.stats["memory_words"] == 33


def test_spill_area_follows_the_shared_windows():
    path = EXAMPLES / "reduce_shared" / "reduce_shared.ptx"
    module = compile_simt(path, with_regs(6))
    (kernel,) = simt.kernels_of(module)
    launch = load_launch(EXAMPLES / "reduce_shared" / "launch.json")
    memory = run_simt(module, launch).stats["memory"]
    assert list(memory)[-3:] == ["shared", "bank alignment", "spill"]
    ctas = launch.grid[0] * launch.grid[1] * launch.grid[2]
    assert memory["shared"] == kernel.shared_size * ctas
    # each warp's slots start at a bank boundary: a slot's bank is fixed at compile time
    banks = 1 << bank_bits(kernel.mem_words.value.data)
    start = sum(memory.values()) - memory["spill"]
    assert banks > 1 and start % banks == 0 and memory["bank alignment"] < banks
    warps = ctas * -(-launch.threads_per_block // 4)
    assert memory["spill"] == warps * -(-4 * kernel.spill_size // banks) * banks


def test_too_few_registers_for_one_op():
    with pytest.raises(QgcError) as err:
        compile_simt(DOT, FRONT + ",simt-allocate-registers{regs=2}")
    assert f"kernel 'dot' needs 3 registers per lane at {DOT}:34:2 even after spilling, the " \
           "machine has 2 (option regs)" in str(err.value)


def test_blocks_formed_before_spilling_are_refused():
    with pytest.raises(QgcError) as err:
        compile_simt(DOT, FRONT + ",simt-form-blocks,simt-allocate-registers{regs=3}")
    assert re.search(r"error: block \^bb0 of kernel 'dot' needs \d+ ops with its spill code, "
                     r"the machine runs at most 16 per block \(option max-ops\); run "
                     r"simt-allocate-registers before simt-form-blocks", str(err.value))


def test_stats_report_the_spills(capsys):
    from qgc.cli import main
    assert main([str(DOT), "-p", pipeline_text(with_regs(3)), "--stats", "--launch",
                 str(EXAMPLES / "dot" / "launch.json")]) == 0
    out = capsys.readouterr().err
    assert "registers 3 of 3 per lane, registers spilled 4 (spill words 4 per thread)" in out
    # 17 words before it, the spill area starts at a boundary of the 16 banks
    assert re.search(r"memory 48 of 1024 words \(.*, bank alignment 15, spill 16\)", out)
    from qgc.stats import simt_lines
    assert "registers spilled 0 (spill words 0 per thread)" in simt_lines(compile_simt(DOT))[0]


def test_spill_code_runs_at_the_tensor_level():
    """Spill slots are machine memory words (the warp's `spill` launch word
    plus lane × spill words + slot): dot with 3 registers spills its
    parameters and gives its buffers on the ideal tensor engine."""
    from qgc.dialects import tensor
    from qgc.machine.abi import pick_kernel
    from qgc.passes.convert_simt_to_tensor import vocabulary_of
    from qgc.runtime.trace import run_trace, tensor_stepper
    lower = up_to(stage("tensor"), "tensor-schedule-layers")
    pipeline = with_options(with_options(lower, "simt-allocate-registers", regs=3),
                            "simt-expand-divrem", regs=3)
    module = compile_simt(DOT, pipeline)
    assert pick_kernel(module, None).spill_size > 0
    (program,) = tensor.programs_of(module)
    vocab = vocabulary_of(program)
    launch = load_launch(EXAMPLES / "dot" / "launch.json")
    result = run_trace(pick_kernel(module, None), vocab, launch, tensor_stepper(program, vocab))
    assert result.buffers == [[1, 2, 3], [4, 5, 6], [32], None]


KERNEL = """builtin.module {{
  simt.kernel @k(ptr a) lanes 4 mem_words 128 {spill} {{
    {op}
    simt.exit
  }}
}}"""


@pytest.mark.parametrize("spill, op, message", [
    ("spill_words 2", "simt.st spill[2], 1", "spill[2] is outside the kernel's 2 spill slots"),
    ("", "simt.ld v0, spill[0]", "spill[0] is outside the kernel's 0 spill slots"),
    ("spill_words 2", "simt.ld v0, spill[v1 + 0]", "no base register, no buffer"),
    ("spill_words 2", 'simt.atom "add" v0, spill[0], 1', "take only simt.ld and simt.st"),
])
def test_the_verifier_checks_spill_accesses(ctx, spill, op, message):
    module = driver.parse_ir(ctx, KERNEL.format(spill=spill, op=op), "k.mlir")
    with pytest.raises(VerifyException, match=re.escape(message)):
        module.verify()
