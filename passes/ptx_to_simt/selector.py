"""The selector: one PTX entry to one `simt.kernel`, its parts composed from the
mixins beside it (one per concern)."""

from __future__ import annotations

from collections import Counter

from xdsl.dialects.builtin import ArrayAttr, IntAttr, IntegerAttr, StringAttr, UnitAttr, i64
from xdsl.ir import Block, Operation

from qgc.analysis.dataflow import sweep_dead_ops
from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.machine.opcodes import select_alu
from qgc.passes.ptx_to_simt.addresses import AddressArithmetic
from qgc.passes.ptx_to_simt.blocks import (
    ControlFlow,
    basic_blocks,
    dests,
    ends_block,
    has_backward_branch,
    is_warp_sync,
)
from qgc.passes.ptx_to_simt.carry import CarryOps, is_carry_op
from qgc.passes.ptx_to_simt.common import INT32, SUBWORD, WIDE, WORD32, unsupported
from qgc.passes.ptx_to_simt.composite import CompositeOps
from qgc.passes.ptx_to_simt.doubles import DoubleOps, as_bits
from qgc.passes.ptx_to_simt.floats import FloatOps
from qgc.passes.ptx_to_simt.legalize import Emitter, Wide
from qgc.passes.ptx_to_simt.memory import MemoryAccesses
from qgc.passes.ptx_to_simt.ordering import Ordering
from qgc.passes.ptx_to_simt.parameters import KernelParameters
from qgc.passes.ptx_to_simt.scalar import ScalarOps
from qgc.passes.ptx_to_simt.subword import SubwordOps
from qgc.passes.ptx_to_simt.warp import WarpOps
from qgc.passes.ptx_to_simt.wide import WideOps


class Selector(KernelParameters, ControlFlow, ScalarOps, CompositeOps, FloatOps, DoubleOps,
               SubwordOps, WarpOps, MemoryAccesses, Ordering, WideOps, AddressArithmetic,
               CarryOps):
    """Selects the machine ops of one PTX entry (`run` gives its `simt.kernel`)."""

    def __init__(self, entry: ptx.EntryOp, mem_words: int, values: frozenset[str] = frozenset()):
        """`values`: the 64-bit registers that hold pointers as values."""
        self.entry = entry
        self.values = values
        self.pointer_values = False     # the kernel reads translation words
        self.mem_words = mem_words
        self.reg_types: dict[str, str] = {}
        self.params: list[tuple[str, str]] = []
        self.param_index: dict[str, int] = {}
        self.vregs: dict[str, RegAttr] = {}
        self.counts = {"v": 0, "vp": 0}
        self.wide: dict[str, Wide] = {}
        self.own: dict[str, RegAttr] = {}
        self.def_count: Counter[str] = Counter()
        self.may_alias = True
        self.shared: dict[str, simt.SharedVar] = {}  # .shared variables, declaration order
        self.units: dict[int, int] = {}     # pointer parameter -> bytes per machine word
        self.high_words: dict[int, int] = {}  # 64-bit scalar parameter -> its high word
        self.ref_words: dict[int, int] = {}   # pointer parameter -> its translation word
        self.locals: dict[str, int] = {}      # .local variable -> its byte offset in the frame
        self.constants: dict[str, ptx.VarOp] = {}   # .const variables, by name
        self.module_data: list[simt.ModuleVar] = []  # module variables as parameters
        self.local_bytes = 0
        self.own_high: dict[str, RegAttr] = {}

    # ----------------------------------------------------------- registers
    def fresh(self, kind: str = "v") -> RegAttr:
        r = RegAttr(kind, self.counts[kind])
        self.counts[kind] += 1
        return r

    def vreg(self, name: str) -> RegAttr:
        if name not in self.vregs:
            self.vregs[name] = self.fresh("vp" if self.reg_types.get(name) == "pred" else "v")
        return self.vregs[name]

    def own_vreg(self, name: str) -> RegAttr:
        """The virtual register a 64-bit PTX register owns (when not aliased)."""
        if name not in self.own:
            self.own[name] = self.fresh()
        return self.own[name]

    def own_hi(self, name: str) -> RegAttr:
        """The virtual register holding the high word of a 64-bit integer."""
        if name not in self.own_high:
            self.own_high[name] = self.fresh()
        return self.own_high[name]

    def emitter(self, guard: GuardAttr | None, dst: str | None = None) -> Emitter:
        avoid = (self.own_vreg(dst), self.own_hi(dst)) if dst else ()
        return Emitter(self.fresh, guard, avoid)

    def bits(self, name: str) -> int:
        t = self.reg_types.get(name)
        return 1 if t == "pred" else ptx.TYPE_BITS.get(t, 0) if t else 0

    def guard(self, inst: ptx.InstOp) -> GuardAttr | None:
        g = inst.guard_reg
        if g is None:
            return None
        return GuardAttr(self.vreg(g.name), g.negated)

    # ---------------------------------------------------------------- run
    def run(self) -> simt.KernelOp:
        entry = self.entry
        items: list[ptx.LabelOp | ptx.InstOp] = []
        module = entry.parent_op()
        outer = list(module.body.ops) if isinstance(module, ptx.ModuleOp) else []
        shared_vars = [op for op in outer + list(entry.body.ops)
                       if isinstance(op, ptx.VarOp) and op.space.data == "shared"]
        for op in shared_vars:
            self._shared_var(op)
        self.constants = {op.sym_name.data: op for op in outer + list(entry.body.ops)
                          if isinstance(op, ptx.VarOp) and op.space.data == "const"}
        for op in entry.body.ops:
            if isinstance(op, ptx.VarOp) and op.space.data == "local":
                self._local_var(op)
        for op in entry.body.ops:
            if isinstance(op, ptx.RegOp):
                for name in op.names():
                    self.reg_types[name] = op.type.data
            elif isinstance(op, ptx.ParamOp):
                self._param(op)
            elif isinstance(op, ptx.LabelOp | ptx.InstOp):
                items.append(op)
        insts = [op for op in items if isinstance(op, ptx.InstOp)]
        for inst in insts:
            for name in dests(inst):
                self.def_count[name] += 1
        if isinstance(module, ptx.ModuleOp):
            self._module_vars(outer, insts, lambda: _reference_addresses(module, entry))
        self._classify_params(insts)
        self.may_alias = not has_backward_branch(items)
        pblocks = basic_blocks(items)
        blocks = [Block() for _ in pblocks]
        by_label = {label: blocks[i] for i, pb in enumerate(pblocks) for label in pb.labels}
        exit_block: list[Block] = []

        def exit_target() -> Block:
            if not exit_block:
                exit_block.append(Block([simt.ExitOp()]))
            return exit_block[0]

        def fallthrough(i: int) -> Block:
            return blocks[i + 1] if i + 1 < len(blocks) else exit_target()

        self.exit_target = exit_target

        for i, (pb, block) in enumerate(zip(pblocks, blocks, strict=True)):
            body = pb.insts
            last = body[-1] if body else None
            ends = last is not None and ends_block(last)
            for inst in body[:-1] if ends else body:
                block.add_ops(self.select(inst))
            if ends:
                assert last is not None
                term = self.terminator(last, by_label, lambda i=i: fallthrough(i))
            elif i + 1 < len(blocks):
                term = simt.NextOp(blocks[i + 1])
            else:
                term = simt.ExitOp()
            block.add_op(term)
        blocks += exit_block
        sweep_dead_ops(blocks)
        if pblocks and any(isinstance(t, simt.NextOp | simt.BranchOp) and
                           blocks[0] in t.successors
                           for b in blocks for t in [b.last_op]):
            blocks.insert(0, Block([simt.NextOp(blocks[0])]))
        if not blocks:
            blocks = [Block([simt.ExitOp()])]
        kernel = simt.KernelOp(entry.kernel_name, self.params, blocks, self.mem_words)
        if self.pointer_values:
            kernel.properties["pointer_values"] = UnitAttr()
        if self.module_data:
            kernel.properties["module_vars"] = ArrayAttr([simt.module_var(*var)
                                                          for var in self.module_data])
        if self.local_bytes:
            kernel.properties["local_words"] = IntegerAttr(-(-self.local_bytes // 4), i64)
        if self.shared:
            kernel.properties["shared_vars"] = ArrayAttr(
                [ArrayAttr([StringAttr(n), IntAttr(b), IntAttr(a)])
                 for n, b, a in self.shared.values()])
        kernel.location = entry.location
        return kernel

    # ------------------------------------------------------------ selection
    def select(self, inst: ptx.InstOp) -> list[Operation]:
        try:
            ops = self._select(inst)
            held = [n for n in dests(inst) if n in self.values and n in self.wide and
                    self.wide[n].kind == "ptr"]
            for name in held:
                ops += self.as_value(inst, self.guard(inst), name)
        except (ValueError, IndexError, AssertionError):  # an operand shape v0 does not know
            raise unsupported(inst, inst.opcode.data) from None
        for op in ops:
            op.location = inst.location
        return ops

    def red_as_atom(self, inst: ptx.InstOp) -> ptx.InstOp:
        """`red.OP.T [a], b` is `atom.OP.T d, [a], b` whose old value `d`
        (a register of its own, never read) nothing reads."""
        name = f"%red.{len(self.reg_types)}"
        self.reg_types[name] = inst.op.type or "b32"
        atom = ptx.InstOp("atom" + inst.opcode.data[len("red"):],
                          [name, *(a.data for a in inst.args.data)])
        atom.location = inst.location
        return atom

    def _select(self, inst: ptx.InstOp) -> list[Operation]:
        opc = inst.op
        base, t, mods = opc.base, opc.type, opc.modifiers
        args = inst.operands_decoded
        guard = self.guard(inst)
        if base in ("ld", "st") and t == "f64":
            return self.memory(as_bits(inst), guard)
        if base in ("ld", "st", "atom"):
            return self.memory(inst, guard)
        if "f64" in opc.types:
            return self.float64(inst, guard)
        if is_carry_op(inst):
            return self.carry_op(inst, guard)
        if base == "red":
            return self.memory(self.red_as_atom(inst), guard)
        if base in ("membar", "fence") or is_warp_sync(inst):
            return self.ordering(inst)
        if base == "cvta" and mods in (("global",), ("const",)) and \
                isinstance(args[1], ptx.Sym) and self.is_module_var(args[1].name):
            return self.pointer_param(inst, guard, args[0].name, self.param_index[args[1].name])
        if base == "cvta":
            space = mods[-1] if mods in (("to", "global"), ("global",), ("to", "local"),
                                         ("local",)) else None
            src = self.wide_src(inst, args[1]) if space is not None and t in WIDE else None
            if src is None or space == "local" and src.kind != "local":
                raise unsupported(inst, inst.opcode.data)
            return self.view(inst, guard, src)
        if base == "cvt" and "f32" in opc.types and set(opc.types) <= {"f32", "s32", "u32"}:
            return self.cvt_f32(inst, guard)
        if base == "cvt" and "f32" in opc.types and set(opc.types) & {"s8", "u8", "s16", "u16"}:
            return self.cvt_f32_narrow(inst, guard)
        if base == "cvt" and "f16" in opc.types:
            return self.cvt_f16(inst, guard)
        if base == "cvt" and "f32" in opc.types and set(opc.types) & {"s64", "u64"}:
            return self.cvt_f32_wide(inst, guard)
        if base == "cvt" and len(opc.types) == 2 and opc.types[0] in INT32 and \
                opc.types[1] in WIDE and not mods:
            return self.narrow(inst, guard)
        if t in SUBWORD or base == "cvt" and set(opc.types) & set(SUBWORD) or \
                base == "mul" and mods == ("wide",) and t in ("s16", "u16"):
            return self.subword(inst, guard)
        if base == "setp":
            return self.setp(inst, guard)
        if base == "testp":
            return self.testp(inst, guard)
        if base == "mov" and t == "b32" and any(isinstance(a, ptx.Vec) for a in args):
            return self.vector_mov(inst, guard)
        if t in WIDE or (base in ("mul", "mad") and "wide" in mods) or \
                (base == "cvt" and opc.types and opc.types[0] in WIDE):
            return self.wide_op(inst, guard)
        if t == "pred" and base in simt.PRED_ARITY:
            return self.pred_logic(inst, guard)
        if base in ("shfl", "vote", "activemask"):
            return self.warp_op(inst, guard)
        if base == "sad":
            return self.sad(inst, guard)
        if base == "dp4a":
            return self.dp4a(inst, guard)
        if base == "mov":
            return self.mov(inst, guard)
        if base == "setp":
            return self.setp(inst, guard)
        if base == "selp" and t in WORD32 and not mods:
            d = self.dst32(inst, args[0])
            pre: list[Operation] = []
            a, b = self.src32(inst, args[1], pre), self.src32(inst, args[2], pre)
            p = args[3]
            if not isinstance(p, ptx.Reg) or p.negated or self.bits(p.name) != 1:
                raise unsupported(inst, inst.opcode.data)
            return pre + [simt.AluOp("selp", d, [a, b, self.vreg(p.name)], guard)]
        machine = select_alu(base, mods, t)
        if machine is None or len(args) != machine.arity + 1:
            raise unsupported(inst, inst.opcode.data)
        d = self.dst32(inst, args[0])
        pre = []
        srcs = [self.src32(inst, a, pre) for a in args[1:]]
        return pre + [simt.AluOp(machine.name, d, srcs, guard)]


def _reference_addresses(module: ptx.ModuleOp, entry: ptx.EntryOp) -> dict[str, int]:
    """The address the reference engine gives each module variable."""
    from qgc.runtime.ref import build_layout
    return {name: slot.address for name, slot in build_layout(module, entry).vars.items()}
