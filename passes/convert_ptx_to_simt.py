"""`convert-ptx-to-simt{mem-words=127}`: instruction selection from `ptx` to `simt`.

Each PTX entry becomes a `simt.kernel` whose blocks are the PTX basic blocks
(a conditional `@%p bra` becomes `simt.branch`, a plain `bra` or a fallthrough
`simt.next`, `ret` `simt.exit`). Instructions become machine ops on *virtual*
registers: every 32-bit PTX register is one virtual register `vN`, every
predicate one `vpN`; they stay mutable locations (no SSA), which is what
`simt-allocate-registers` expects.

64-bit address arithmetic is narrowed to 32-bit word addresses. A 64-bit PTX
register holds either a *pointer* into the buffer of pointer parameter N (its
provenance), whose word address lives in a virtual register, or an *integer*
`ext(v) * scale` bytes (from `mul.wide`, `cvt` to 64 bits, `shl`/`mul.lo` by a
constant). `cvta.to.global` is the identity; `ptr + int` adds `v * scale / 4`
words (a byte offset that is not a multiple of 4 is refused); every
`ld/st/atom.global` carries the provenance of its pointer (`buffer N`), which
the machine checks against that buffer's bounds. Where the kernel has no
backward branch, an identity-like 64-bit instruction whose source and
destination are each written once costs no op (the destination aliases the
source's register). `ld.param` is a load from the parameter area at the
parameter's word. `.shared` variables are declared on the kernel
(`shared_vars`) and their addresses named by `simt.shared_addr`;
`simt-layout-memory` places them.

Anything else is refused at its PTX location:
`file.ptx:L:C: error: 'OPCODE' is not yet supported by the machine`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc import legalize as lg
from qgc.dataflow import sweep_dead_ops
from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.legalize import Emitter, Wide, to_i32

INT32 = ("s32", "u32", "b32")
WORD32 = ("s32", "u32", "b32", "f32")
WIDE = ("s64", "u64", "b64")
SUBWORD = ("s8", "u8", "b8", "s16", "u16", "b16")
#: sub-word ops by how they read their sources: as the low bits (the result's
#: low bits do not depend on the rest) or sign-extended
_SUB_PLAIN = {"add": "add", "sub": "sub", "mul": "mul.lo", "and": "and", "or": "or",
              "xor": "xor", "not": "not", "shl": "shl", "mov": "mov", "selp": "selp"}
_SUB_BY_SIGN = {"shr": "shr", "min": "min", "max": "max", "div": "div", "rem": "rem"}
#: results that stay within the width of their sources
_FITS = {"and", "or", "xor", "shr.u", "selp", "mov", "min.u", "max.u", "div.u", "rem.u"}
NO_DEST = {"st", "red", "bra", "brx", "ret", "exit", "bar", "barrier", "membar", "fence",
           "trap", "brkpt", "prefetch", "prefetchu", "call", "nanosleep", "pmevent"}
#: Modifiers of ld/st/atom that change nothing on the machine (caching, scope, order).
HARMLESS_MEMORY_MODS = {"nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "volatile", "relaxed",
                        "weak", "gpu", "cta", "sys"}
SPECIAL_NAMES = {f"%{s}": s for s in simt.SPECIALS}

_SETP_SIGNED = {"eq": "eq", "ne": "ne", "lt": "lt.s", "le": "le.s", "gt": "gt.s", "ge": "ge.s",
                "lo": "lt.u", "ls": "le.u", "hi": "gt.u", "hs": "ge.u"}
_SETP_UNSIGNED = {"eq": "eq", "ne": "ne", "lt": "lt.u", "le": "le.u", "gt": "gt.u",
                  "ge": "ge.u", "lo": "lt.u", "ls": "le.u", "hi": "gt.u", "hs": "ge.u"}


def unsupported(op: Operation, what: str, reason: str = "") -> DiagnosticException:
    """The diagnostic for anything the machine cannot run yet."""
    tail = f" ({reason})" if reason else ""
    return DiagnosticException(f"{ptx.location_prefix(op)}error: '{what}' is not yet "
                               f"supported by the machine{tail}")


@dataclass
class _PBlock:
    labels: list[str] = field(default_factory=list)
    insts: list[ptx.InstOp] = field(default_factory=list)


class _Selector:
    def __init__(self, entry: ptx.EntryOp, mem_words: int):
        self.entry = entry
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
            for name in _dests(inst):
                self.def_count[name] += 1
        self._classify_params(insts)
        self.may_alias = not _has_backward_branch(items)
        pblocks = _basic_blocks(items)
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
            ends = last is not None and last.op.base in ("bra", "ret", "exit", "bar", "barrier")
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
        if self.shared:
            kernel.properties["shared_vars"] = ArrayAttr(
                [ArrayAttr([StringAttr(n), IntAttr(b), IntAttr(a)])
                 for n, b, a in self.shared.values()])
        kernel.location = entry.location
        return kernel

    def _shared_var(self, op: ptx.VarOp) -> None:
        """Declare a `.shared` variable; `simt-layout-memory` places it."""
        name = op.sym_name.data
        align = max(4, op.align.value.data if op.align is not None else 4)
        self.shared[name] = (name, 0 if op.elements == 0 else op.size_bytes, align)

    def _classify_params(self, insts: list[ptx.InstOp]) -> None:
        """A 64-bit parameter is a pointer when its value is converted by
        `cvta` or used as an address, else a 64-bit scalar; a pointer's
        buffer is word-addressed unless every access is 1 or 2 bytes wide
        (then one element per word: `ptr8`, `ptr16`)."""
        wide = {name: i for i, (name, t) in enumerate(self.params) if t == "ptr"}
        pointers, sizes = _pointer_uses(insts, wide)
        for name, i in wide.items():
            if i not in pointers and self._loaded(insts, name):
                self.params[i] = (name, "u64")
                continue
            widths = sizes.get(i, set())
            if len(widths - {4, 8}) and len(widths) > 1:
                listed = " and ".join(f"{8 * w}-bit" for w in sorted(widths))
                raise DiagnosticException(
                    f"{ptx.location_prefix(self.entry)}error: buffer '{name}' is accessed "
                    f"with {listed} elements, which the machine does not mix in one buffer")
            unit = min(widths, default=4)
            self.params[i] = (name, {1: "ptr8", 2: "ptr16"}.get(unit, "ptr"))
        self.units = {i: simt.POINTER_TYPES[t] for i, (_, t) in enumerate(self.params)
                      if t in simt.POINTER_TYPES}
        wide_scalars = [i for i, (_, t) in enumerate(self.params) if t in simt.WIDE_SCALARS]
        first = len(self.params) + 2 * len(self.units)
        self.high_words = {i: first + k for k, i in enumerate(wide_scalars)}

    @staticmethod
    def _loaded(insts: list[ptx.InstOp], name: str) -> bool:
        return any(inst.op.base == "ld" and any(
            isinstance(a, ptx.Addr) and isinstance(a.base, ptx.Sym) and a.base.name == name
            for a in inst.operands_decoded) for inst in insts)

    def _param(self, op: ptx.ParamOp) -> None:
        name, ptype = op.param_name.data, op.type.data
        if op.ret is not None:
            return
        bits = ptx.TYPE_BITS.get(ptype, 0)
        if op.count is not None:
            raise unsupported(op, f".param .{ptype} {name}[{op.count.value.data}]",
                              "an aggregate parameter")
        if bits == 64 and ptype[0] != "f":
            mtype = "ptr"
        elif bits in (8, 16, 32) and ptype not in ("f16", "bf16"):
            mtype = ptype
        else:
            raise unsupported(op, f".param .{ptype}", f"parameter '{name}'")
        self.param_index[name] = len(self.params)
        self.params.append((name, mtype))

    # ---------------------------------------------------------- terminators
    def terminator(self, inst: ptx.InstOp, by_label: dict[str, Block], fallthrough) -> Operation:
        base = inst.op.base
        guard = self.guard(inst)
        if base in ("bar", "barrier"):
            args = inst.operands_decoded
            if inst.opcode.data not in ("bar.sync", "barrier.sync", "bar.sync.aligned",
                                        "barrier.sync.aligned") or guard is not None or \
                    len(args) != 1 or not isinstance(args[0], ptx.Imm) or args[0].value != 0:
                raise unsupported(inst, inst.opcode.data, "only `bar.sync 0` (every thread "
                                  "of the CTA, barrier 0)")
            term: Operation = simt.BarrierOp(fallthrough())
        elif base in ("ret", "exit"):
            # a guarded return sends its lanes to an exit block, the rest on
            term = simt.ExitOp() if guard is None else \
                simt.BranchOp(guard, self.exit_target(), fallthrough())
        else:
            if inst.opcode.data not in ("bra", "bra.uni"):
                raise unsupported(inst, inst.opcode.data)
            target = inst.operands_decoded[0] if inst.args.data else None
            if not isinstance(target, ptx.Sym) or target.name not in by_label:
                raise unsupported(inst, inst.opcode.data, "an indirect branch")
            dest = by_label[target.name]
            term = simt.NextOp(dest) if guard is None else \
                simt.BranchOp(guard, dest, fallthrough())
        term.location = inst.location
        return term

    def guard(self, inst: ptx.InstOp) -> GuardAttr | None:
        g = inst.guard_reg
        if g is None:
            return None
        return GuardAttr(self.vreg(g.name), g.negated)

    # ------------------------------------------------------------ selection
    def select(self, inst: ptx.InstOp) -> list[Operation]:
        try:
            ops = self._select(inst)
        except (ValueError, IndexError, AssertionError):  # an operand shape v0 does not know
            raise unsupported(inst, inst.opcode.data) from None
        for op in ops:
            op.location = inst.location
        return ops

    def _select(self, inst: ptx.InstOp) -> list[Operation]:
        opc = inst.op
        base, t, mods = opc.base, opc.type, opc.modifiers
        args = inst.operands_decoded
        guard = self.guard(inst)
        if base in ("ld", "st", "atom"):
            return self.memory(inst, guard)
        if base == "cvta":
            if mods not in (("to", "global"), ("global",)) or t not in WIDE:
                raise unsupported(inst, inst.opcode.data)
            return self.view(inst, guard, self.wide_src(inst, args[1]))
        if base == "cvt" and len(opc.types) == 2 and opc.types[0] in INT32 and \
                opc.types[1] in WIDE and not mods:
            return self.narrow(inst, guard)
        if t in SUBWORD or base == "cvt" and set(opc.types) & set(SUBWORD) or \
                base == "mul" and mods == ("wide",) and t in ("s16", "u16"):
            return self.subword(inst, guard)
        if base == "setp":
            return self.setp(inst, guard)
        if t in WIDE or (base == "mul" and "wide" in mods) or \
                (base == "cvt" and opc.types and opc.types[0] in WIDE):
            return self.wide_op(inst, guard)
        if t == "pred" and base in simt.PRED_ARITY:
            return self.pred_logic(inst, guard)
        if base in ("shfl", "vote", "activemask"):
            return self.warp_op(inst, guard)
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
        machine = _alu_opcode(base, mods, t)
        if machine is None:
            raise unsupported(inst, inst.opcode.data)
        if len(args) != simt.ALU_ARITY[machine] + 1:
            raise unsupported(inst, inst.opcode.data)
        d = self.dst32(inst, args[0])
        pre = []
        srcs = [self.src32(inst, a, pre) for a in args[1:]]
        return pre + [simt.AluOp(machine, d, srcs, guard)]

    # ------------------------------------------------------ sub-word values
    def subword(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """8- and 16-bit arithmetic, compares, conversions and widening
        multiplies on registers that hold their value zero-extended (a signed
        value written to a wider register is sign-extended first, as PTX does)."""
        opc, args = inst.op, inst.operands_decoded
        base, mods, t = opc.base, opc.modifiers, opc.type or ""
        e = Emitter(self.fresh, guard)
        if base == "cvt" and len(opc.types) == 2 and not mods:
            dt, at = opc.types
            signed = at[0] == "s"
            self.put_sub(inst, e, args[0], dt, self.get_sub(inst, e, args[1], at, signed),
                         None if signed else at)
            return e.ops
        if base == "mul" and mods == ("wide",):
            a, b = (self.get_sub(inst, e, x, t, t[0] == "s") for x in args[1:])
            self.put_sub(inst, e, args[0], "s32", e.alu("mul.lo", [a, b]), "s32")
            return e.ops
        if base == "setp" and len(mods) == 1 and len(args) == 3:
            table = _SETP_SIGNED if t[0] == "s" else _SETP_UNSIGNED
            p = args[0]
            if mods[0] not in table or not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
                raise unsupported(inst, inst.opcode.data)
            a, b = (self.get_sub(inst, e, x, t, t[0] == "s") for x in args[1:])
            e.ops.append(simt.SetpOp(table[mods[0]], self.vreg(p.name), a, b, guard))
            return e.ops
        sign = ("s" if t[0] == "s" else "u") if base in _SUB_BY_SIGN else None
        machine = _SUB_PLAIN.get(base) or (f"{_SUB_BY_SIGN[base]}.{sign}" if sign else None)
        if machine is None or mods not in ((), ("lo",)) or (mods and base != "mul") or \
                machine not in simt.ALU_ARITY or \
                len(args) != simt.ALU_ARITY[machine] + 1:
            raise unsupported(inst, inst.opcode.data)
        srcs = [self.vreg(a.name) if machine == "selp" and i == 2 and isinstance(a, ptx.Reg)
                else self.get_sub(inst, e, a, t, sign == "s" and i < 1 + (base != "shr"))
                for i, a in enumerate(args[1:])]
        value = e.alu(machine, srcs)
        self.put_sub(inst, e, args[0], t, value, t if machine in _FITS else None)
        return e.ops

    def get_sub(self, inst: ptx.InstOp, e: Emitter, operand: ptx.Operand, t: str,
                signed: bool) -> lg.Src:
        """A source read as a `t`-wide value, sign-extended to 32 bits if asked."""
        bits = ptx.TYPE_BITS[t]
        if isinstance(operand, ptx.Imm) and not operand.is_float:
            value = operand.value & ((1 << bits) - 1)
            return to_i32(value - (1 << bits) if signed and value >> (bits - 1) else value)
        if not isinstance(operand, ptx.Reg) or operand.negated or \
                self.bits(operand.name) not in (8, 16, 32):
            raise unsupported(inst, inst.opcode.data, _why_not_32(operand, self))
        if operand.name in SPECIAL_NAMES:
            raise unsupported(inst, inst.opcode.data, f"special register {operand.name}")
        reg = self.vreg(operand.name)
        if bits >= 32:
            return reg
        if signed:
            return e.alu("bfe.s", [reg, 0, bits])
        return reg if self.bits(operand.name) <= bits else e.alu("and", [reg, (1 << bits) - 1])

    def put_sub(self, inst: ptx.InstOp, e: Emitter, operand: ptx.Operand, t: str,
                value: lg.Src, fits: str | None) -> None:
        """Write a `t`-wide result (computed in 32 bits; `fits`: already within
        that type's width) to a register of its width or wider."""
        if not isinstance(operand, ptx.Reg) or self.bits(operand.name) not in (8, 16, 32):
            raise unsupported(inst, inst.opcode.data, _why_not_32(operand, self))
        width, bits = self.bits(operand.name), ptx.TYPE_BITS[t]
        if bits < width and t[0] == "s":
            value = e.alu("bfe.s", [value, 0, bits])
            bits = 32
        keep = min(width, bits)
        if keep < 32 and (fits is None or ptx.TYPE_BITS[fits] > keep):
            value = e.alu("and", [value, (1 << keep) - 1])
        e.assign(self.vreg(operand.name), value)

    # 32-bit operands
    def dst32(self, inst: ptx.InstOp, operand: ptx.Operand) -> RegAttr:
        if not isinstance(operand, ptx.Reg) or self.bits(operand.name) != 32:
            raise unsupported(inst, inst.opcode.data, _why_not_32(operand, self))
        return self.vreg(operand.name)

    def src32(self, inst: ptx.InstOp, operand: ptx.Operand,
              pre: list[Operation]) -> RegAttr | int:
        if isinstance(operand, ptx.Imm):
            if operand.is_float and operand.bits != 32:
                raise unsupported(inst, inst.opcode.data, "a 64-bit float immediate")
            return to_i32(operand.value)
        if isinstance(operand, ptx.Sym) and operand.name == "WARP_SZ":
            return simt.LANES
        if isinstance(operand, ptx.Reg) and not operand.negated:
            if operand.name in SPECIAL_NAMES:
                tmp = self.fresh()
                op = simt.SpecialOp(tmp, SPECIAL_NAMES[operand.name])
                op.location = inst.location
                pre.append(op)
                return tmp
            if self.bits(operand.name) == 32:
                return self.vreg(operand.name)
        raise unsupported(inst, inst.opcode.data, _why_not_32(operand, self))

    def mov(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        t = inst.op.type
        dst, src = inst.operands_decoded
        if t not in WORD32 or inst.op.modifiers:
            raise unsupported(inst, inst.opcode.data)
        d = self.dst32(inst, dst)
        if isinstance(src, ptx.Reg) and src.name in SPECIAL_NAMES:
            return [simt.SpecialOp(d, SPECIAL_NAMES[src.name], guard)]
        if isinstance(src, ptx.Sym) and src.name in self.shared:
            return [simt.SharedAddrOp(d, src.name, guard)]
        pre: list[Operation] = []
        return pre + [simt.AluOp("mov", d, [self.src32(inst, src, pre)], guard)]

    def pred_logic(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """and/or/xor/not/mov on predicates (`and.pred %p3, %p1, %p2`)."""
        args = inst.operands_decoded
        if inst.op.modifiers or len(args) != simt.PRED_ARITY[inst.op.base] + 1:
            raise unsupported(inst, inst.opcode.data)
        dst = args[0]
        if not isinstance(dst, ptx.Reg) or dst.negated or self.bits(dst.name) != 1:
            raise unsupported(inst, inst.opcode.data, "a non-predicate destination")
        srcs: list[GuardAttr | int] = []
        for a in args[1:]:
            if isinstance(a, ptx.Imm) and not a.is_float and a.value in (0, 1):
                srcs.append(int(a.value))
            elif isinstance(a, ptx.Reg) and self.bits(a.name) == 1:
                srcs.append(GuardAttr(self.vreg(a.name), a.negated))
            else:
                raise unsupported(inst, inst.opcode.data, "a non-predicate source")
        return [simt.PredOp(inst.op.base, self.vreg(dst.name), srcs, guard)]

    def warp_op(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """shfl.sync.{up,down,bfly,idx}.b32, vote.sync.{any,all,uni,ballot},
        activemask.b32 on the 4 lanes; the member mask is not modelled (as `ref`)."""
        opc, args = inst.op, inst.operands_decoded
        mode = [m for m in opc.modifiers if m not in ("sync",)]
        sync = "sync" in opc.modifiers
        if opc.base == "activemask" and not opc.modifiers and len(args) == 1:
            return [simt.WarpOp("activemask", self.dst32(inst, args[0]), [], guard)]
        if len(mode) != 1 or len(args) != (2 if opc.base == "vote" else 4) + sync:
            raise unsupported(inst, inst.opcode.data)
        if opc.base == "shfl":
            pre: list[Operation] = []
            srcs = [self.src32(inst, a, pre) for a in args[1:4]]
            dst = args[0]
            if isinstance(dst, ptx.Pair):       # d|p: p says the source lane was in range
                p = dst.second
                if not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
                    raise unsupported(inst, inst.opcode.data)
                pre.append(simt.WarpOp(f"shfl.{mode[0]}.p", self.vreg(p.name), srcs[1:],
                                       guard))
                dst = dst.first
            return pre + [simt.WarpOp(f"shfl.{mode[0]}", self.dst32(inst, dst), srcs, guard)]
        vote = args[1]
        if not isinstance(vote, ptx.Reg) or self.bits(vote.name) != 1:
            raise unsupported(inst, inst.opcode.data, "a non-predicate vote")
        cond = GuardAttr(self.vreg(vote.name), vote.negated)
        if mode[0] == "ballot":
            return [simt.WarpOp("ballot", self.dst32(inst, args[0]), [cond], guard)]
        dst = args[0]
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 1:
            raise unsupported(inst, inst.opcode.data)
        return [simt.WarpOp(mode[0], self.vreg(dst.name), [cond], guard)]

    def setp(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc = inst.op
        args = inst.operands_decoded
        if opc.type in WIDE:
            return self.setp64(inst, guard)
        table = _SETP_SIGNED if opc.type == "s32" else _SETP_UNSIGNED
        if opc.type not in INT32 or len(opc.modifiers) != 1 or len(args) != 3 or \
                opc.modifiers[0] not in table or \
                (opc.type == "b32" and opc.modifiers[0] not in ("eq", "ne")):
            raise unsupported(inst, inst.opcode.data)
        p = args[0]
        if not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
            raise unsupported(inst, inst.opcode.data, "a dual or non-predicate destination")
        pre: list[Operation] = []
        a, b = self.src32(inst, args[1], pre), self.src32(inst, args[2], pre)
        return pre + [simt.SetpOp(table[opc.modifiers[0]], self.vreg(p.name), a, b, guard)]

    def setp64(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """A 64-bit compare of integers (by words), or of two pointers into
        one buffer (by word addresses)."""
        opc, args = inst.op, inst.operands_decoded
        table = _SETP_SIGNED if opc.type == "s64" else _SETP_UNSIGNED
        p = args[0]
        if len(opc.modifiers) != 1 or opc.modifiers[0] not in table or len(args) != 3 or \
                not isinstance(p, ptx.Reg) or self.bits(p.name) != 1:
            raise unsupported(inst, inst.opcode.data)
        cond, dst = table[opc.modifiers[0]], self.vreg(p.name)
        kinds = {self.wide[a.name].kind for a in args[1:]
                 if isinstance(a, ptx.Reg) and a.name in self.wide}
        e = Emitter(self.fresh, guard)
        if kinds == {"ptr"} and all(isinstance(a, ptx.Reg) for a in args[1:]):
            a, b = (self.wide_src(inst, x) for x in args[1:])
            if a.prov != b.prov:
                raise unsupported(inst, inst.opcode.data, "a compare of pointers into "
                                  "different buffers")
            return [simt.SetpOp(cond.replace(".s", ".u"), dst, a.vreg, b.vreg, guard)]
        a, b = (self.pair_of(inst, e, x) for x in args[1:])
        lg.compare_pairs(e, cond, a, b, dst)
        return e.ops

    # ------------------------------------------------------------- memory
    def memory(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc = inst.op
        base, mods, t = opc.base, opc.modifiers, opc.type
        args = inst.operands_decoded
        space = "param" if "param" in mods else "global" if "global" in mods else \
            "shared" if "shared" in mods else None
        rest = [m for m in mods if m not in ("param", "global", "shared")]
        if space == "shared":
            return self.shared_memory(inst, guard, rest)
        if base == "atom":
            if space != "global" or len(rest) < 1 or \
                    _atom_op(rest[0], t) is None and (rest[0], t) != ("add", "u64") \
                    or len(args) != (4 if rest[0] == "cas" else 3) \
                    or not _harmless(rest[1:]):
                raise unsupported(inst, inst.opcode.data)
        elif space is None or not _harmless(rest) or len(opc.types) != 1:
            raise unsupported(inst, inst.opcode.data)
        if base == "ld" and space == "param":
            return self.ld_param(inst, guard)
        addr = args[1] if base in ("ld", "atom") else args[0]
        if not isinstance(addr, ptx.Addr) or not isinstance(addr.base, ptx.Reg):
            raise unsupported(inst, inst.opcode.data, "an address that is not a pointer "
                              "register plus an offset")
        ptr = self.wide_src(inst, addr.base)
        if ptr.kind != "ptr":
            raise unsupported(inst, inst.opcode.data, "an address that does not derive from "
                              "a pointer parameter")
        assert ptr.prov is not None
        unit = self.units.get(ptr.prov, 4)
        if addr.offset % unit:
            raise unsupported(inst, inst.opcode.data, f"a byte offset ({addr.offset}) that is "
                              f"not a multiple of {unit}")
        words = addr.offset // unit
        if t in WIDE:
            return self.memory64(inst, guard, ptr, words, rest)
        if t in SUBWORD and base in ("ld", "st"):
            return self.memory_sub(inst, guard, ptr, words)
        if t not in WORD32:
            raise unsupported(inst, inst.opcode.data, f"{ptx.TYPE_BITS.get(t or '', 0)}-bit "
                              "data accesses")
        pre: list[Operation] = []
        if base == "ld":
            return [simt.LdOp(self.dst32(inst, args[0]), "global", ptr.vreg, words, ptr.prov,
                              guard)]
        if base == "st":
            value = self.src32(inst, args[1], pre)
            return pre + [simt.StOp("global", ptr.vreg, words, value, ptr.prov, guard)]
        value = self.src32(inst, args[2], pre)
        swap = self.src32(inst, args[3], pre) if len(args) == 4 else None
        op = _atom_op(rest[0], t)
        assert op is not None
        return pre + [simt.AtomOp(op, self.dst32(inst, args[0]), "global", ptr.vreg, words,
                                  value, ptr.prov, guard, swap)]

    def memory64(self, inst: ptx.InstOp, guard: GuardAttr | None, ptr: Wide, words: int,
                 rest: list[str]) -> list[Operation]:
        """64-bit global accesses as two words, low first; `atom.add.u64` adds
        the low words, then the high words with each lane's carry (lanes in
        order, so the carries are those of the running sum)."""
        base, args = inst.op.base, inst.operands_decoded
        buf = ptr.prov
        dst = args[0] if base != "st" else None
        e = self.emitter(guard, dst.name if isinstance(dst, ptx.Reg) else None)
        if base == "st":
            lo, hi = self.pair_of(inst, e, args[1])
            e.ops += [simt.StOp("global", ptr.vreg, words, lo, buf, guard),
                      simt.StOp("global", ptr.vreg, words + 1, hi, buf, guard)]
            return e.ops
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 64:
            raise unsupported(inst, inst.opcode.data)
        lo, hi = e.temp(), e.temp()
        if base == "ld":
            e.ops += [simt.LdOp(lo, "global", ptr.vreg, words, buf, guard),
                      simt.LdOp(hi, "global", ptr.vreg, words + 1, buf, guard)]
            return self.set_int(inst, e, (lo, hi))
        if rest[:1] != ["add"] or inst.op.type != "u64":
            raise unsupported(inst, inst.opcode.data, "64-bit atomics other than add.u64")
        v_lo, v_hi = self.pair_of(inst, e, args[2])
        e.ops.append(simt.AtomOp("add", lo, "global", ptr.vreg, words, v_lo, buf, guard))
        _, carry = e.add_carry(lo, v_lo)
        e.ops.append(simt.AtomOp("add", hi, "global", ptr.vreg, words + 1,
                                 e.alu("add", [v_hi, carry]), buf, guard))
        return self.set_int(inst, e, (lo, hi))

    def memory_sub(self, inst: ptx.InstOp, guard: GuardAttr | None, ptr: Wide,
                   words: int) -> list[Operation]:
        """A byte or halfword access: one element per word of its buffer (the
        word holds it zero-extended; a store keeps only the element's bits)."""
        t, args = inst.op.type or "", inst.operands_decoded
        e = Emitter(self.fresh, guard)
        if inst.op.base == "st":
            value = self.get_sub(inst, e, args[1], t, False)
            e.ops.append(simt.StOp("global", ptr.vreg, words, value, ptr.prov, guard))
            return e.ops
        word = e.temp()
        e.ops.append(simt.LdOp(word, "global", ptr.vreg, words, ptr.prov, guard))
        self.put_sub(inst, e, args[0], t, word, None if t[0] == "s" else t)
        return e.ops

    def shared_memory(self, inst: ptx.InstOp, guard: GuardAttr | None,
                      rest: list[str]) -> list[Operation]:
        """ld/st/atom `.shared` of 32-bit words at a byte address of the window:
        `[%r7]`, `[%rd3+4]` (a shared address), `[sym+8]`."""
        opc, args = inst.op, inst.operands_decoded
        base, t = opc.base, opc.type
        if t not in WORD32 and not (base == "atom" and t in INT32) or len(opc.types) != 1:
            raise unsupported(inst, inst.opcode.data,
                              f"{ptx.TYPE_BITS.get(t or '', 0)}-bit shared accesses")
        atom = _atom_op(rest[0], t) if base == "atom" and rest else None
        if base == "atom" and (atom is None or not _harmless(rest[1:]) or
                               len(args) != (4 if rest[0] == "cas" else 3)) or \
                base != "atom" and not _harmless(rest):
            raise unsupported(inst, inst.opcode.data)
        addr = args[0] if base == "st" else args[1]
        if not isinstance(addr, ptx.Addr):
            raise unsupported(inst, inst.opcode.data)
        reg: RegAttr | None = None
        offset = addr.offset
        pre: list[Operation] = []
        if isinstance(addr.base, ptx.Sym) and addr.base.name in self.shared:
            reg = self.fresh()
            pre.append(simt.SharedAddrOp(reg, addr.base.name))
        elif isinstance(addr.base, ptx.Reg) and self.bits(addr.base.name) == 32:
            reg = self.vreg(addr.base.name)
        elif isinstance(addr.base, ptx.Reg) and addr.base.name in self.wide and \
                self.wide[addr.base.name].kind == "shared":
            reg = self.wide[addr.base.name].vreg
        else:
            raise unsupported(inst, inst.opcode.data, "a shared address that is not a "
                              "shared variable plus an offset")
        if base == "ld":
            return pre + [simt.LdOp(self.dst32(inst, args[0]), "shared", reg, offset, None, guard)]
        if base == "st":
            value = self.src32(inst, args[1], pre)
            return pre + [simt.StOp("shared", reg, offset, value, None, guard)]
        value = self.src32(inst, args[2], pre)
        swap = self.src32(inst, args[3], pre) if len(args) == 4 else None
        assert atom is not None
        return pre + [simt.AtomOp(atom, self.dst32(inst, args[0]), "shared", reg, offset, value,
                                  None, guard, swap)]

    def ld_param(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        dst, addr = inst.operands_decoded
        if not isinstance(addr, ptx.Addr) or not isinstance(addr.base, ptx.Sym) or \
                addr.base.name not in self.param_index or addr.offset != 0:
            raise unsupported(inst, inst.opcode.data, "a parameter access other than a whole "
                              "parameter")
        index = self.param_index[addr.base.name]
        mtype = self.params[index][1]
        bits = ptx.TYPE_BITS.get(inst.op.type or "", 0)
        if not isinstance(dst, ptx.Reg):
            raise unsupported(inst, inst.opcode.data)
        if mtype in simt.POINTER_TYPES and bits == 64 and self.bits(dst.name) == 64:
            v = self.own_vreg(dst.name)
            self.define_wide(inst, dst.name, Wide("ptr", v, prov=index,
                                                  stable=self.def_count[dst.name] == 1))
            return [simt.LdOp(v, "param", None, index, None, guard)]
        if mtype in simt.WIDE_SCALARS and bits == 64 and self.bits(dst.name) == 64:
            e = self.emitter(guard, dst.name)
            lo, hi = e.temp(), e.temp()
            e.ops += [simt.LdOp(lo, "param", None, index, None),
                      simt.LdOp(hi, "param", None, self.high_words[index], None)]
            return self.set_int(inst, e, (lo, hi))
        if mtype not in simt.POINTER_TYPES and bits == 32 and ptx.TYPE_BITS.get(mtype) == 32:
            return [simt.LdOp(self.dst32(inst, dst), "param", None, index, None, guard)]
        raise unsupported(inst, inst.opcode.data, f"{bits}-bit parameter loads" if bits != 32
                          else "a 32-bit load of a 64-bit parameter")

    # --------------------------------------------------- 64-bit narrowing
    def wide_src(self, inst: ptx.InstOp, operand: ptx.Operand) -> Wide:
        if isinstance(operand, ptx.Reg) and operand.name in self.wide:
            return self.wide[operand.name]
        raise unsupported(inst, inst.opcode.data, "a 64-bit value that is not a pointer "
                          "parameter or an offset computed from 32-bit values")

    def define_wide(self, inst: ptx.InstOp, name: str, value: Wide) -> None:
        old = self.wide.get(name)
        if old is not None and not old.same_shape(value):
            raise unsupported(inst, inst.opcode.data, f"'{name}' holds different kinds of "
                              "64-bit values")
        self.wide[name] = value

    def view(self, inst: ptx.InstOp, guard: GuardAttr | None, src: Wide,
             scale: int | None = None) -> list[Operation]:
        """An identity-like 64-bit def: the destination is `src` seen with a new scale."""
        dst = inst.operands_decoded[0]
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 64:
            raise unsupported(inst, inst.opcode.data)
        new = lg.replace(src, scale=src.scale if scale is None else scale)
        if new.kind == "int":
            e = self.emitter(guard, dst.name)
            if not lg.valid_scale(new.scale):   # multiply out: x·s·f as pairs
                factor = lg.const_pair(new.scale // src.scale)
                return self.set_int(inst, e, lg.mul_pairs(e, lg.materialize(e, src), factor))
            return self.set_int(inst, e, new)
        name = dst.name
        if self.may_alias and guard is None and src.stable and self.def_count[name] == 1:
            self.define_wide(inst, name, new)
            return []
        own = self.own_vreg(name)
        self.define_wide(inst, name, lg.replace(new, vreg=own,
                                                 stable=self.def_count[name] == 1))
        return [simt.AluOp("mov", own, [new.vreg], guard)]

    def set_int(self, inst: ptx.InstOp, e: Emitter, value: Wide | tuple[lg.Src, lg.Src],
                pair_scale: int = 1) -> list[Operation]:
        """Define a 64-bit integer register from a view or a pair. A view of
        a register written once costs no op; otherwise the value goes to the
        register's own two words (a register written at several places keeps
        the scale of its first definition, so all of them agree)."""
        dst = inst.operands_decoded[0]
        assert isinstance(dst, ptx.Reg)
        name, single = dst.name, self.def_count[dst.name] == 1
        if isinstance(value, Wide) and single and (not value.is_pair or value.stable):
            if self.may_alias and e.guard is None and value.stable:
                self.define_wide(inst, name, value)
                return e.ops
            if not value.is_pair:
                own = self.own_vreg(name)
                e.assign(own, value.vreg)
                self.define_wide(inst, name, lg.replace(value, vreg=own, stable=True))
                return e.ops
        if not isinstance(value, Wide):     # x = hi:lo, the value x * pair_scale
            lo, hi = value
            if isinstance(lo, int):
                lo = e.alu("mov", [lo], e.temp())
            value = Wide("int", lo, scale=pair_scale, hi=hi)
        old = self.wide.get(name)
        scale = old.scale if old is not None and old.kind == "int" else \
            value.scale if value.scale < 1 << 31 else 1
        if value.scale % scale:
            raise unsupported(inst, inst.opcode.data, f"'{name}' holds 64-bit values of "
                              "different scales")
        lo, hi = lg.unscaled(e, value, scale)
        own_lo, own_hi = self.own_vreg(name), self.own_hi(name)
        e.assign(own_lo, lo)
        e.assign(own_hi, hi)
        self.define_wide(inst, name, Wide("int", own_lo, scale=scale, stable=single, hi=own_hi))
        return e.ops

    def int_view_of32(self, inst: ptx.InstOp, operand: ptx.Operand,
                      signed: bool = False) -> Wide:
        if not isinstance(operand, ptx.Reg) or self.bits(operand.name) != 32:
            raise unsupported(inst, inst.opcode.data, _why_not_32(operand, self))
        return Wide("int", self.vreg(operand.name), scale=1,
                    stable=self.def_count[operand.name] == 1,
                    hi="sext" if signed else "zext")

    def pair_of(self, inst: ptx.InstOp, e: Emitter, operand: ptx.Operand) -> tuple[lg.Src,
                                                                                   lg.Src]:
        """A 64-bit integer operand as (low, high) words."""
        if isinstance(operand, ptx.Imm) and not operand.is_float:
            return lg.const_pair(operand.value)
        w = self.wide_src(inst, operand)
        if w.kind != "int":
            what = "pointer" if w.kind == "ptr" else "shared address"
            raise unsupported(inst, inst.opcode.data, f"a {what} as a 64-bit integer")
        return lg.materialize(e, w)

    def wide_op(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc = inst.op
        base, mods, t = opc.base, opc.modifiers, opc.type
        args = inst.operands_decoded
        if base == "mov" and not mods and isinstance(args[1], ptx.Reg):
            return self.view(inst, guard, self.wide_src(inst, args[1]))
        if base == "mov" and not mods and isinstance(args[1], ptx.Sym) and \
                args[1].name in self.shared and isinstance(args[0], ptx.Reg):
            own = self.own_vreg(args[0].name)
            self.define_wide(inst, args[0].name, Wide("shared", own,
                                                      stable=self.def_count[args[0].name] == 1))
            return [simt.SharedAddrOp(own, args[1].name, guard)]
        if base == "mul" and mods == ("wide",) and t in ("s32", "u32"):
            return self.mul_wide(inst, guard)
        if base == "cvt" and len(opc.types) == 2 and opc.types[1] in ("s32", "u32") and \
                not mods:
            return self.view(inst, guard, self.int_view_of32(inst, args[1],
                                                             opc.types[1] == "s32"), 1)
        if base in ("shl", "mul") and mods in ((), ("lo",)) and (base == "shl") == (not mods) \
                and isinstance(args[2], ptx.Imm) and args[2].value >= (base == "mul"):
            src = self.wide_src(inst, args[1])
            if src.kind == "int":
                factor = 1 << args[2].value if base == "shl" else args[2].value
                return self.view(inst, guard, src, src.scale * factor)
        if base in ("add", "sub") and not mods:
            return self.wide_add(inst, guard)
        if t in WIDE and isinstance(args[0], ptx.Reg) and self.bits(args[0].name) == 64:
            return self.int64(inst, guard)
        if base in ("popc", "clz") and not mods and t == "b64":
            d = self.dst32(inst, args[0])
            e = Emitter(self.fresh, guard, (d,))
            e.assign(d, lg.count_pair(e, base, self.pair_of(inst, e, args[1])))
            return e.ops
        syms = [a.name for a in args if isinstance(a, ptx.Sym)]
        raise unsupported(inst, inst.opcode.data, f"the address of '{syms[0]}'" if syms else "")

    def mul_wide(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`mul.wide.{s,u}32`: by a constant a view, of two registers a pair."""
        args, signed = inst.operands_decoded, inst.op.type == "s32"
        reg, imm = (args[1], args[2]) if isinstance(args[2], ptx.Imm) else (args[2], args[1])
        if isinstance(imm, ptx.Imm) and not imm.is_float and 0 < imm.value < 1 << 31:
            return self.view(inst, guard, self.int_view_of32(inst, reg, signed), imm.value)
        e = self.emitter(guard, args[0].name)
        pre: list[Operation] = []
        a, b = self.src32(inst, args[1], pre), self.src32(inst, args[2], pre)
        e.ops += pre
        lo = e.alu("mul.lo", [a, b])
        return self.set_int(inst, e, (lo, e.alu("mul.hi.s" if signed else "mul.hi.u", [a, b])))

    def int64(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """Integer 64-bit arithmetic and logic on register pairs."""
        opc, args = inst.op, inst.operands_decoded
        base, mods = opc.base, opc.modifiers
        e = self.emitter(guard, args[0].name)
        srcs = args[1:]
        if base == "mov" and not mods and len(srcs) == 1:
            return self.set_int(inst, e, self.pair_of(inst, e, srcs[0]))
        if base == "mul" and mods == ("lo",):
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            return self.set_int(inst, e, lg.mul_pairs(e, a, b))
        if base == "mul" and mods == ("hi",):
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            high = lg.mul_hi_pairs if opc.type != "s64" else lg.mul_hi_signed
            return self.set_int(inst, e, high(e, a, b))
        if base in ("min", "max") and not mods and opc.type in ("s64", "u64"):
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            return self.set_int(inst, e, lg.minmax_pairs(e, f"{base}.{opc.type[0]}", a, b))
        if base == "abs" and not mods and opc.type == "s64":
            return self.set_int(inst, e, lg.abs_pair(e, self.pair_of(inst, e, srcs[0])))
        if base == "brev" and not mods:
            lo, hi = self.pair_of(inst, e, srcs[0])
            return self.set_int(inst, e, (e.alu("brev", [hi]), e.alu("brev", [lo])))
        if base in ("shl", "shr") and not mods and len(srcs) == 2 and \
                not isinstance(srcs[1], ptx.Imm):
            pre: list[Operation] = []
            amount = self.src32(inst, srcs[1], pre)
            e.ops += pre
            how = "shl" if base == "shl" else "shr.s" if opc.type == "s64" else "shr.u"
            return self.set_int(inst, e, lg.shift_pair_by(e, how, self.pair_of(inst, e, srcs[0]),
                                                          amount))
        if base in ("and", "or", "xor") and not mods and len(srcs) == 2:
            a, b = (self.pair_of(inst, e, x) for x in srcs)
            return self.set_int(inst, e, (e.alu(base, [a[0], b[0]]), e.alu(base, [a[1], b[1]])))
        if base == "not" and not mods:
            a = self.pair_of(inst, e, srcs[0])
            return self.set_int(inst, e, (e.alu("not", [a[0]]), e.alu("not", [a[1]])))
        if base == "neg" and not mods:
            return self.set_int(inst, e, lg.add_pairs(e, (0, 0), self.pair_of(inst, e, srcs[0]),
                                                      sub=True))
        if base == "shr" and not mods and isinstance(srcs[1], ptx.Imm):
            a = self.pair_of(inst, e, srcs[0])
            return self.set_int(inst, e, lg.shift_pair(
                e, "shr.s" if opc.type == "s64" else "shr.u", a, srcs[1].value))
        if base == "bfi" and not mods and all(isinstance(x, ptx.Imm) for x in srcs[2:]):
            return self.bfi64(inst, e)
        if base == "selp" and not mods and isinstance(srcs[2], ptx.Reg) and \
                self.bits(srcs[2].name) == 1:
            a, b = (self.pair_of(inst, e, x) for x in srcs[:2])
            p = self.vreg(srcs[2].name)
            return self.set_int(inst, e, (e.alu("selp", [a[0], b[0], p]),
                                          e.alu("selp", [a[1], b[1], p])))
        raise unsupported(inst, inst.opcode.data)

    def bfi64(self, inst: ptx.InstOp, e: Emitter) -> list[Operation]:
        """`bfi.b64 d, a, b, pos, len` with a constant field inside one word."""
        _, a_op, b_op, pos_op, len_op = inst.operands_decoded
        pos, length = pos_op.value, len_op.value
        a, b = self.pair_of(inst, e, a_op), self.pair_of(inst, e, b_op)
        word, at = divmod(pos, 32)
        if word > 1 or at + length > 32 or length == 0:
            raise unsupported(inst, inst.opcode.data, "a field that crosses a word")
        field = a[0] if length == 32 else e.alu("bfi", [a[0], b[word], at, length])
        return self.set_int(inst, e, (field, b[1]) if word == 0 else (b[0], field))

    def narrow(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`cvt.u32.u64 d, x`: the low word of the 64-bit integer x."""
        dst, src = inst.operands_decoded
        wide = self.wide_src(inst, src)
        if wide.kind != "int":
            raise unsupported(inst, inst.opcode.data, "a pointer converted to 32 bits")
        d = self.dst32(inst, dst)
        e = Emitter(self.fresh, guard, (d,))
        e.assign(d, lg.materialize(e, wide)[0])
        return e.ops

    def shared_add(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """A shared-window byte address plus (or minus) a byte offset, in 32 bits."""
        base = inst.op.base
        dst, a_op, b_op = inst.operands_decoded
        a = self.wide_src(inst, a_op)
        pre: list[Operation] = []
        if isinstance(b_op, ptx.Imm) and not b_op.is_float:
            offset: RegAttr | int = to_i32(b_op.value)
        else:
            b = self.wide_src(inst, b_op)
            if base == "add" and b.kind == "shared":
                a, b = b, a
            if a.kind != "shared" or b.kind != "int":
                raise unsupported(inst, inst.opcode.data, "64-bit arithmetic on two shared "
                                  "addresses")
            offset = b.vreg
            if b.scale != 1:
                offset = self.fresh()
                pre.append(simt.AluOp("mul.lo", offset, [b.vreg, b.scale], guard))
        own = self.own_vreg(dst.name)
        self.define_wide(inst, dst.name, Wide("shared", own,
                                              stable=self.def_count[dst.name] == 1))
        return pre + [simt.AluOp(base, own, [a.vreg, offset], guard)]

    def wide_add(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        base = inst.op.base
        dst, a_op, b_op = inst.operands_decoded
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 64:
            raise unsupported(inst, inst.opcode.data)
        if isinstance(a_op, ptx.Imm):       # a constant minuend: integers only
            e = self.emitter(guard, dst.name)
            pa, pb = self.pair_of(inst, e, a_op), self.pair_of(inst, e, b_op)
            return self.set_int(inst, e, lg.add_pairs(e, pa, pb, base == "sub"))
        a = self.wide_src(inst, a_op)
        b_wide = self.wide.get(b_op.name) if isinstance(b_op, ptx.Reg) else None
        if "shared" in (a.kind, b_wide and b_wide.kind):
            return self.shared_add(inst, guard)
        if base == "add" and a.kind == "int" and b_wide is not None and b_wide.kind == "ptr":
            a, b_wide = b_wide, a
        if a.kind == "ptr":
            return self.pointer_add(inst, guard, a, b_op if b_wide is None else b_wide)
        if b_wide is not None and b_wide.kind != "int":
            raise unsupported(inst, inst.opcode.data, "64-bit arithmetic other than a pointer "
                              "plus an offset")
        e = self.emitter(guard, dst.name)
        sub = base == "sub"
        if b_wide is not None and a.scale == b_wide.scale and a.scale < 1 << 31:
            pa, pb = lg.unscaled(e, a, a.scale), lg.unscaled(e, b_wide, a.scale)
            return self.set_int(inst, e, lg.add_pairs(e, pa, pb, sub), a.scale)
        pa = lg.materialize(e, a)
        pb = self.pair_of(inst, e, b_op)
        return self.set_int(inst, e, lg.add_pairs(e, pa, pb, sub))

    def pointer_add(self, inst: ptx.InstOp, guard: GuardAttr | None, ptr: Wide,
                    offset: ptx.Operand | Wide) -> list[Operation]:
        """A pointer plus (or minus) a constant or an integer byte offset, in
        words of the pointer's buffer."""
        base = inst.op.base
        dst = inst.operands_decoded[0]
        assert ptr.prov is not None
        unit = self.units.get(ptr.prov, 4)
        own = self.own_vreg(dst.name)
        single = self.def_count[dst.name] == 1
        if isinstance(offset, ptx.Imm) and not offset.is_float:
            if offset.value % unit:
                raise unsupported(inst, inst.opcode.data, f"a 64-bit constant offset that is "
                                  f"not a multiple of {unit} bytes from a pointer")
            words = offset.value // unit * (1 if base == "add" else -1)
            if words == 0:
                return self.view(inst, guard, ptr)
            self.define_wide(inst, dst.name, Wide("ptr", own, ptr.prov, stable=single))
            return [simt.AluOp("add", own, [ptr.vreg, to_i32(words)], guard)]
        if not isinstance(offset, Wide) or offset.kind != "int":
            raise unsupported(inst, inst.opcode.data, "64-bit arithmetic other than a pointer "
                              "plus an offset")
        e = Emitter(self.fresh, guard, (own,))
        if offset.scale % unit:
            raise unsupported(inst, inst.opcode.data, _not_words(offset.scale, unit))
        words = lg.materialize(e, lg.replace(offset, scale=offset.scale // unit))[0]
        self.define_wide(inst, dst.name, Wide("ptr", own, ptr.prov, stable=single))
        e.ops.append(simt.AluOp(base, own, [ptr.vreg, words], guard))
        return e.ops


def _pointer_uses(insts: list[ptx.InstOp],
                  params: dict[str, int]) -> tuple[set[int], dict[int, set[int]]]:
    """Which 64-bit parameters are pointers, and the access sizes in bytes
    through each: a flow-insensitive fixpoint over copies (`mov`, `cvta`)
    and pointer arithmetic (`add`, `sub`)."""
    copy_of: dict[str, set[int]] = {}    # register -> parameters it is a copy of
    into: dict[str, set[int]] = {}       # register -> parameters it may point into
    changed = True
    while changed:
        changed = False
        for inst in insts:
            args = inst.operands_decoded
            if not args or not isinstance(args[0], ptx.Reg):
                continue
            base, d = inst.op.base, args[0].name
            srcs = [a.name for a in args[1:] if isinstance(a, ptx.Reg)]
            if base == "ld" and "param" in inst.op.modifiers and isinstance(args[1], ptx.Addr) \
                    and isinstance(args[1].base, ptx.Sym) and args[1].base.name in params:
                copies = points = {params[args[1].base.name]}
            elif base in ("mov", "cvta") and len(srcs) == 1:
                copies, points = copy_of.get(srcs[0], set()), into.get(srcs[0], set())
            elif base in ("add", "sub") and inst.op.type in WIDE:
                copies, points = set(), set().union(*(into.get(r, set()) for r in srcs))
            else:
                continue
            for table, new in ((copy_of, copies), (into, points)):
                if not new <= table.get(d, set()):
                    table[d] = table.get(d, set()) | new
                    changed = True
    converted: set[int] = set()     # copied into cvta: pointers for sure
    addressing: set[int] = set()    # reaching an address
    counted: set[int] = set()       # used as an integer (compared, scaled, subtracted)
    sizes: dict[int, set[int]] = {}
    for inst in insts:
        args, base = inst.operands_decoded, inst.op.base
        regs = [a.name for a in args[1:] if isinstance(a, ptx.Reg)]
        if base == "cvta" and len(regs) == 1:
            converted |= copy_of.get(regs[0], set())
        elif base in ("ld", "st", "atom", "red") and "param" not in inst.op.modifiers:
            addr = next((a for a in args if isinstance(a, ptx.Addr)), None)
            if addr is None or not isinstance(addr.base, ptx.Reg):
                continue
            addressing |= into.get(addr.base.name, set())
            width = ptx.TYPE_BITS.get(inst.op.type or "", 32) // 8
            for i in into.get(addr.base.name, set()):
                sizes.setdefault(i, set()).add(width)
        elif base not in ("mov", "add", "ld"):
            counted.update(*(into.get(r, set()) for r in regs[1 if base == "sub" else 0:]))
    pointers = converted | (addressing - counted)
    return pointers, {i: w for i, w in sizes.items() if i in pointers}


def _not_words(scale: int, unit: int = 4) -> str:
    size = "1 byte" if scale == 1 else f"{scale} bytes"
    return f"a byte offset that is not a multiple of {unit}: an index times {size}"


def _atom_op(name: str, t: str | None) -> str | None:
    """The machine's atomic for PTX `atom.NAME.T` on 32-bit words, or None."""
    if t not in INT32:
        return None
    if name in ("min", "max") and t != "b32":
        return f"{name}.{'s' if t == 's32' else 'u'}"
    if name == "add" and t != "b32":
        return "add"
    if name in ("and", "or", "xor", "exch", "cas") and t == "b32" or \
            name in ("exch", "cas") and t != "b32" or name in ("inc", "dec") and t == "u32":
        return name
    return None


def _harmless(mods: Sequence[str]) -> bool:
    return all(m in HARMLESS_MEMORY_MODS or m.startswith(("L1::", "L2::")) for m in mods)


def _why_not_32(operand: ptx.Operand, sel: _Selector) -> str:
    if isinstance(operand, ptx.Reg):
        if operand.name in ptx.SPECIAL_REGISTERS:
            return f"special register {operand.name}"
        bits = sel.bits(operand.name)
        if bits == 1:
            return f"predicate '{operand.name}' as a value"
        if bits:
            return f"{bits}-bit register '{operand.name}'"
    if isinstance(operand, ptx.Sym):
        return f"the address of '{operand.name}'"
    if isinstance(operand, ptx.Vec):
        return "vector operands"
    return ""


def _alu_opcode(base: str, mods: tuple[str, ...], t: str | None) -> str | None:
    if t not in INT32:
        return None
    if base in ("add", "sub") and not mods and t != "b32":
        return base
    if base in ("mul", "mad") and mods == ("lo",) and t != "b32":
        return f"{base}.lo"
    if base in ("and", "or", "xor", "not") and not mods:
        return base
    if base == "neg" and not mods and t == "s32":
        return "neg"
    if base == "shl" and not mods:
        return "shl"
    if base == "shr" and not mods:
        return "shr.s" if t == "s32" else "shr.u"
    sign = "s" if t == "s32" else "u"
    if base in ("min", "max", "div", "rem") and not mods and t != "b32":
        return f"{base}.{sign}"
    if base == "mul" and mods == ("hi",) and t != "b32":
        return f"mul.hi.{sign}"
    if base == "abs" and not mods and t == "s32":
        return "abs"
    if base in ("popc", "clz", "brev") and not mods and t == "b32":
        return base
    if base == "bfind" and mods in ((), ("shiftamt",)) and t != "b32":
        return ".".join(("bfind", *mods, sign))
    if base == "bfe" and not mods and t != "b32":
        return f"bfe.{sign}"
    if base == "bfi" and not mods and t == "b32":
        return "bfi"
    if base == "shf" and len(mods) == 2 and mods[0] in ("l", "r") and \
            mods[1] in ("wrap", "clamp") and t == "b32":
        return f"shf.{mods[0]}.{mods[1]}"
    return None


def _dests(inst: ptx.InstOp) -> list[str]:
    if inst.op.base in NO_DEST or not inst.args.data:
        return []
    first = inst.operands_decoded[0]
    if isinstance(first, ptx.Reg):
        return [first.name]
    if isinstance(first, ptx.Pair):
        return [first.first.name, first.second.name]
    if isinstance(first, ptx.Vec):
        return [r.name for r in first.items if isinstance(r, ptx.Reg)]
    return []


def _has_backward_branch(items: Sequence[ptx.LabelOp | ptx.InstOp]) -> bool:
    seen: set[str] = set()
    for op in items:
        if isinstance(op, ptx.LabelOp):
            seen.add(op.label.data)
        elif op.op.base in ("bra", "brx"):
            if any(isinstance(a, ptx.Sym) and a.name in seen for a in op.operands_decoded):
                return True
    return False


def _basic_blocks(items: Sequence[ptx.LabelOp | ptx.InstOp]) -> list[_PBlock]:
    blocks = [_PBlock()]
    for op in items:
        cur = blocks[-1]
        if isinstance(op, ptx.LabelOp):
            if cur.insts:
                cur = _PBlock()
                blocks.append(cur)
            cur.labels.append(op.label.data)
        else:
            cur.insts.append(op)
            if op.op.base in ("bra", "ret", "exit", "brx", "bar", "barrier"):
                blocks.append(_PBlock())
    if not blocks[-1].insts and not blocks[-1].labels:
        blocks.pop()
    return blocks


def check_no_functions(pmod: ptx.ModuleOp) -> None:
    for op in pmod.body.ops:
        if isinstance(op, ptx.FuncOp):
            raise unsupported(op, ".func", f"device function '{op.kernel_name}'; "
                              "run ptx-remove-dead-functions first if it is unused")


@dataclass(frozen=True)
class ConvertPtxToSimtPass(ModulePass):
    name = "convert-ptx-to-simt"

    mem_words: int = simt.DEFAULT_MEM_WORDS
    """Words of machine memory (parameter area, bounds pairs and buffers)."""

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        if self.mem_words < 1:
            raise DiagnosticException(f"error: mem-words must be positive, got {self.mem_words}")
        for pmod in [o for o in op.walk() if isinstance(o, ptx.ModuleOp)]:
            kernels = []
            for entry in pmod.kernels():
                for inst in entry.body.ops:
                    if isinstance(inst, ptx.InstOp) and inst.op.base == "call":
                        raise unsupported(inst, inst.opcode.data, "calls")
                kernels.append(_Selector(entry, self.mem_words).run())
            check_no_functions(pmod)
            parent = pmod.parent_block()
            assert parent is not None
            parent.insert_ops_before(kernels, pmod)
            pmod.detach()
            pmod.erase()
