"""`Lowering`: one simt kernel as one machine step (`convert-simt-to-tensor`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import builtin
from xdsl.ir import Block, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from qgc import protocol as P
from qgc.analysis.dataflow import Cfg, kept_by_guarded_writes, liveness, register_access
from qgc.analysis.uniformity import uniform_addresses
from qgc.diagnostics import location_prefix
from qgc.dialects import simt
from qgc.dialects import tensor as T
from qgc.machine.abi import bank_bits
from qgc.passes.simt_to_tensor.atomics import Atomics
from qgc.passes.simt_to_tensor.blocks import Blocks
from qgc.passes.simt_to_tensor.circuits import Alu
from qgc.passes.simt_to_tensor.gates import Gates
from qgc.passes.simt_to_tensor.lane_control import LaneControl
from qgc.passes.simt_to_tensor.memory_access import MemoryAccess
from qgc.passes.simt_to_tensor.outbox import Outbox
from qgc.passes.simt_to_tensor.registers import Registers
from qgc.passes.simt_to_tensor.state_heads import StateHeads
from qgc.passes.simt_to_tensor.step_values import KEY_BITS, MAX_WARPS, SLOTS
from qgc.passes.simt_to_tensor.warp_ops import WarpOps


@dataclass
class Lowering(Gates, StateHeads, Registers, Blocks, LaneControl, WarpOps,
               MemoryAccess, Atomics, Outbox):
    """One kernel's machine step as a `tensor.program`. Each mixin holds one
    concern and works on the state set up here: `b` (the builder), `alu` (the
    block's circuits; `common_alu` outside blocks), `inp`, `vocab`, `blocks`,
    `live_in`/`live_out`, `uniform_loads`, `sites`, `bank_bits`/`address_bits`; `Blocks` adds
    the block's `active` lanes, `pending` writes, `faults` and `bounds_of`."""

    kernel: simt.KernelOp
    warps: int
    b: T.ProgramBuilder = field(init=False)
    alu: Alu = field(init=False)

    def __post_init__(self) -> None:
        self.blocks = self.kernel.machine_blocks()
        self.check_fits()
        self.bank_bits = bank_bits(self.kernel.mem_words.value.data)
        self.address_bits = KEY_BITS + self.bank_bits
        cfg = Cfg.of(self.kernel)
        keeps = kept_by_guarded_writes(cfg, register_access)
        self.live_in, self.live_out = liveness(cfg, register_access, keeps)
        self.uniform_loads = uniform_addresses(self.kernel)
        ports = tuple(tuple(sorted(r.index.data for r in self.live_in[bl] if not r.is_pred))
                      for bl in self.blocks)
        records = max([self._record_count(bl) for bl in self.blocks] + [1])
        self.sites = {op: i for i, op in enumerate(self.kernel.memory_sites())}
        self.vocab = P.Vocabulary(records, len(self.blocks), self.warps, ports, len(self.sites),
                                  P.address_bits_for(self.bank_bits))
        self.b = T.ProgramBuilder(f"{self.kernel.kernel_name}_step")
        self.alu = self.common_alu = Alu(self.b)
        widths = {name: len(v) for name, v in self.vocab.inputs(P.Token("END")).items()}
        self.inp = {name: self.b.input(name, w) for name, w in widths.items() if w}
        self.n_ports = 0
        self.launch_reads: dict[str, SSAValue] = {}
        self.param_reads: dict[int, SSAValue] = {}

    def check_fits(self) -> None:
        k = self.kernel
        if k.mem_words.value.data > P.MAX_MEMORY_WORDS:
            raise DiagnosticException(
                f"{location_prefix(k)}error: kernel '{k.kernel_name}' has "
                f"{k.mem_words.value.data} memory words; the tensor level holds "
                f"{P.MAX_MEMORY_WORDS} ({1 << P.MAX_BANK_BITS} banks of {SLOTS}; "
                f"option mem-words of convert-ptx-to-simt)")
        if not 1 <= self.warps <= MAX_WARPS:
            raise DiagnosticException(f"error: convert-simt-to-tensor: max-warps must be "
                                      f"1..{MAX_WARPS}")
        if len(self.blocks) > 1 << P.BLOCK_BITS:
            raise DiagnosticException(
                f"{location_prefix(k)}error: kernel '{k.kernel_name}' has {len(self.blocks)} "
                f"blocks; the tensor level numbers at most {1 << P.BLOCK_BITS}")
        regs = k.limit("regs")
        if regs is None or regs > P.MAX_REGISTERS:
            raise DiagnosticException(
                f"{location_prefix(k)}error: the tensor level takes a kernel with at most "
                f"{P.MAX_REGISTERS} physical registers per lane (run simt-allocate-registers"
                f"{{regs={P.MAX_REGISTERS}}} first)")

    def _record_count(self, block: Block) -> int:
        writes = sum(simt.LANES * (1 + (isinstance(op, simt.AtomOp) and op.is_pair))
                     for op in block.ops if isinstance(op, simt.StOp | simt.AtomOp))
        regs = len(self.written_live_out(block))
        return writes + simt.LANES * regs + 3     # + the preds, lanes and flags words

    def written_live_out(self, block: Block) -> list[simt.RegAttr]:
        written = {d for op in block.ops if isinstance(op, simt.MachineOp) for d in op.defs()}
        return sorted((r for r in written if r in self.live_out[block] and not r.is_pred),
                      key=lambda r: r.index.data)

    def lower(self) -> T.ProgramOp:
        self.stage()
        ctl = self.control()
        results = [self.lower_block(i, bl, ctl) for i, bl in enumerate(self.blocks)]
        control = self.next_state(ctl, results)
        self.outbox([r.records for r in results], control)
        self.next_token(self.by_block([r.trap for r in results]))
        program = self.b.program
        if len(self.blocks) > 1:
            program.properties["groups"] = builtin.StringAttr("exec_b")
        remove_dead_ops(program)
        program.attributes["qgc.vocab"] = self.vocab.to_attr()
        return program


def remove_dead_ops(program: T.ProgramOp) -> None:
    """Erase thresholds and reads nobody uses, and memories nobody reads."""
    changed = True
    while changed:
        changed = False
        for op in reversed(program.ops()):
            if isinstance(op, T.ThresholdOp | T.SliceOp | T.ConcatOp | T.MergeOp |
                          T.KvReadOp) and \
                    not op.results[0].uses:
                op.detach()
                op.erase()
                changed = True
        read = {op.memory_name for op in program.ops() if isinstance(op, T.KvReadOp)}
        for op in program.ops():
            if isinstance(op, T.KvWriteOp | T.MemoryOp) and op.memory_name not in read:
                op.detach()
                op.erase()
                changed = True
