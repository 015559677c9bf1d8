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
parameter's word.

Anything else is refused at its PTX location:
`file.ptx:L:C: error: 'OPCODE' is not yet supported by the machine`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import builtin
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr

INT32 = ("s32", "u32", "b32")
WORD32 = ("s32", "u32", "b32", "f32")
WIDE = ("s64", "u64", "b64")
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


def _to_i32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass
class Wide:
    """What a 64-bit PTX register holds, narrowed: a pointer (word address in
    `vreg`, into the buffer of pointer parameter `prov`) or an integer equal to
    `ext(vreg) * scale` bytes. `stable`: `vreg` is written at one place only,
    so another register may alias it."""

    kind: str
    vreg: RegAttr
    prov: int | None = None
    scale: int = 1
    stable: bool = False

    def same_shape(self, other: Wide) -> bool:
        return (self.kind, self.prov, self.scale) == (other.kind, other.prov, other.scale)


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
        self.shared: dict[str, int] = {}    # .shared variable -> byte offset in the window
        self.shared_bytes = 0

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

    def bits(self, name: str) -> int:
        t = self.reg_types.get(name)
        return 1 if t == "pred" else ptx.TYPE_BITS.get(t, 0) if t else 0

    # ---------------------------------------------------------------- run
    def run(self) -> simt.KernelOp:
        entry = self.entry
        items: list[ptx.LabelOp | ptx.InstOp] = []
        module = entry.parent_op()
        outer = list(module.body.ops) if isinstance(module, ptx.ModuleOp) else []
        for op in outer + list(entry.body.ops):
            if isinstance(op, ptx.VarOp) and op.space.data == "shared":
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
        self.may_alias = not _has_backward_branch(items)
        pblocks = _basic_blocks(items)
        blocks = [Block() for _ in pblocks]
        by_label = {label: blocks[i] for i, pb in enumerate(pblocks) for label in pb.labels}
        exit_block: list[Block] = []

        def fallthrough(i: int) -> Block:
            if i + 1 < len(blocks):
                return blocks[i + 1]
            if not exit_block:
                exit_block.append(Block([simt.ExitOp()]))
            return exit_block[0]

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
        if pblocks and any(isinstance(t, simt.NextOp | simt.BranchOp) and
                           blocks[0] in t.successors
                           for b in blocks for t in [b.last_op]):
            blocks.insert(0, Block([simt.NextOp(blocks[0])]))
        if not blocks:
            blocks = [Block([simt.ExitOp()])]
        kernel = simt.KernelOp(entry.kernel_name, self.params, blocks, self.mem_words)
        if self.shared_bytes:
            kernel.properties["shared_words"] = IntegerAttr((self.shared_bytes + 3) // 4, 64)
        kernel.location = entry.location
        return kernel

    def _shared_var(self, op: ptx.VarOp) -> None:
        """Lay a `.shared` variable out in the CTA's shared window (byte offsets)."""
        name = op.sym_name.data
        if op.elements == 0:
            raise unsupported(op, ".extern .shared", f"dynamic shared memory '{name}'")
        align = max(4, op.align.value.data if op.align is not None else 4)
        start = -(-self.shared_bytes // align) * align
        self.shared[name] = start
        self.shared_bytes = start + op.size_bytes

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
            if guard is not None:
                raise unsupported(inst, inst.opcode.data, "a guarded return")
            term = simt.ExitOp()
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
            return _to_i32(operand.value)
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
            return [simt.AluOp("mov", d, [self.shared[src.name]], guard)]
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
            if space != "global" or len(rest) < 1 or _atom_op(rest[0], t) is None \
                    or len(args) != (4 if rest[0] == "cas" else 3) \
                    or not _harmless(rest[1:]):
                raise unsupported(inst, inst.opcode.data)
        elif space is None or not _harmless(rest) or len(opc.types) != 1:
            raise unsupported(inst, inst.opcode.data)
        if base == "ld" and space == "param":
            return self.ld_param(inst, guard)
        if t not in WORD32:
            raise unsupported(inst, inst.opcode.data, f"{ptx.TYPE_BITS.get(t or '', 0)}-bit "
                              "data accesses")
        addr = args[1] if base in ("ld", "atom") else args[0]
        if not isinstance(addr, ptx.Addr) or not isinstance(addr.base, ptx.Reg):
            raise unsupported(inst, inst.opcode.data, "an address that is not a pointer "
                              "register plus an offset")
        ptr = self.wide_src(inst, addr.base)
        if ptr.kind != "ptr":
            raise unsupported(inst, inst.opcode.data, "an address that does not derive from "
                              "a pointer parameter")
        if addr.offset % 4:
            raise unsupported(inst, inst.opcode.data, f"a byte offset ({addr.offset}) that is "
                              "not a multiple of 4")
        assert ptr.prov is not None
        words = addr.offset // 4
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
        if isinstance(addr.base, ptx.Sym) and addr.base.name in self.shared:
            offset += self.shared[addr.base.name]
        elif isinstance(addr.base, ptx.Reg) and self.bits(addr.base.name) == 32:
            reg = self.vreg(addr.base.name)
        elif isinstance(addr.base, ptx.Reg) and addr.base.name in self.wide and \
                self.wide[addr.base.name].kind == "shared":
            reg = self.wide[addr.base.name].vreg
        else:
            raise unsupported(inst, inst.opcode.data, "a shared address that is not a "
                              "shared variable plus an offset")
        pre: list[Operation] = []
        if base == "ld":
            return [simt.LdOp(self.dst32(inst, args[0]), "shared", reg, offset, None, guard)]
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
        if mtype == "ptr" and bits == 64 and self.bits(dst.name) == 64:
            v = self.own_vreg(dst.name)
            self.define_wide(inst, dst.name, Wide("ptr", v, prov=index,
                                                  stable=self.def_count[dst.name] == 1))
            return [simt.LdOp(v, "param", None, index, None, guard)]
        if mtype != "ptr" and bits == 32 and ptx.TYPE_BITS.get(mtype) == 32:
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
        name = dst.name
        new = Wide(src.kind, src.vreg, src.prov, src.scale if scale is None else scale,
                   src.stable)
        if self.may_alias and guard is None and src.stable and self.def_count[name] == 1:
            self.define_wide(inst, name, new)
            return []
        own = self.own_vreg(name)
        single = self.def_count[name] == 1
        if new.kind == "ptr":
            self.define_wide(inst, name, Wide("ptr", own, new.prov, stable=single))
            return [simt.AluOp("mov", own, [new.vreg], guard)]
        if new.scale % 4:  # keep the byte scale; a later pointer add may refuse it
            self.define_wide(inst, name, Wide("int", own, scale=new.scale, stable=single))
            return [simt.AluOp("mov", own, [new.vreg], guard)]
        self.define_wide(inst, name, Wide("int", own, scale=4, stable=single))
        k = new.scale // 4
        return [simt.AluOp("mov", own, [new.vreg], guard) if k == 1 else
                simt.AluOp("mul.lo", own, [new.vreg, k], guard)]

    def int_view_of32(self, inst: ptx.InstOp, operand: ptx.Operand) -> Wide:
        if not isinstance(operand, ptx.Reg) or self.bits(operand.name) != 32:
            raise unsupported(inst, inst.opcode.data, _why_not_32(operand, self))
        return Wide("int", self.vreg(operand.name), scale=1,
                    stable=self.def_count[operand.name] == 1)

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
            return [simt.AluOp("mov", own, [self.shared[args[1].name]], guard)]
        if base == "mul" and mods == ("wide",) and t in ("s32", "u32"):
            reg, imm = (args[1], args[2]) if isinstance(args[2], ptx.Imm) else (args[2], args[1])
            if isinstance(imm, ptx.Imm) and not imm.is_float and imm.value > 0:
                return self.view(inst, guard, self.int_view_of32(inst, reg), imm.value)
        if base == "cvt" and len(opc.types) == 2 and opc.types[1] in ("s32", "u32") and \
                not mods:
            return self.view(inst, guard, self.int_view_of32(inst, args[1]), 1)
        if base in ("shl", "mul") and mods in ((), ("lo",)) and (base == "shl") == (not mods) \
                and isinstance(args[2], ptx.Imm) and args[2].value > 0:
            src = self.wide_src(inst, args[1])
            if src.kind == "int":
                factor = 1 << args[2].value if base == "shl" else args[2].value
                if factor < 1 << 20:
                    return self.view(inst, guard, src, src.scale * factor)
        if base in ("add", "sub") and not mods:
            return self.wide_add(inst, guard)
        syms = [a.name for a in args if isinstance(a, ptx.Sym)]
        raise unsupported(inst, inst.opcode.data, f"the address of '{syms[0]}'" if syms else "")

    def narrow(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`cvt.u32.u64 d, x` of an integer view ext(v)·scale: the low word v·scale."""
        dst, src = inst.operands_decoded
        wide = self.wide_src(inst, src)
        if wide.kind != "int":
            raise unsupported(inst, inst.opcode.data, "a pointer converted to 32 bits")
        d = self.dst32(inst, dst)
        if wide.scale == 1:
            return [simt.AluOp("mov", d, [wide.vreg], guard)]
        return [simt.AluOp("mul.lo", d, [wide.vreg, wide.scale], guard)]

    def shared_add(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """A shared-window byte address plus (or minus) a byte offset, in 32 bits."""
        base = inst.op.base
        dst, a_op, b_op = inst.operands_decoded
        a = self.wide_src(inst, a_op)
        pre: list[Operation] = []
        if isinstance(b_op, ptx.Imm) and not b_op.is_float:
            offset: RegAttr | int = _to_i32(b_op.value)
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
        a = self.wide_src(inst, a_op)
        b_wide = self.wide.get(b_op.name) if isinstance(b_op, ptx.Reg) else None
        if "shared" in (a.kind, b_wide and b_wide.kind):
            return self.shared_add(inst, guard)
        if isinstance(b_op, ptx.Imm) and not b_op.is_float:
            if a.kind != "ptr" or b_op.value % 4:
                raise unsupported(inst, inst.opcode.data, "a 64-bit constant offset that is "
                                  "not a multiple of 4 bytes from a pointer")
            words = b_op.value // 4 * (1 if base == "add" else -1)
            if words == 0:
                return self.view(inst, guard, a)
            own = self.own_vreg(dst.name)
            self.define_wide(inst, dst.name, Wide("ptr", own, a.prov,
                                                  stable=self.def_count[dst.name] == 1))
            return [simt.AluOp("add", own, [a.vreg, _to_i32(words)], guard)]
        b = self.wide_src(inst, b_op)
        if base == "add" and a.kind == "int" and b.kind == "ptr":
            a, b = b, a
        pre: list[Operation] = []
        own = self.own_vreg(dst.name)
        single = self.def_count[dst.name] == 1
        if a.kind == "ptr" and b.kind == "int":
            if b.scale % 4:
                raise unsupported(inst, inst.opcode.data, _not_words(b.scale))
            offset = b.vreg
            if b.scale != 4:
                offset = self.fresh()
                pre.append(simt.AluOp("mul.lo", offset, [b.vreg, b.scale // 4], guard))
            self.define_wide(inst, dst.name, Wide("ptr", own, a.prov, stable=single))
            return pre + [simt.AluOp(base, own, [a.vreg, offset], guard)]
        if a.kind == "int" and b.kind == "int" and a.scale == b.scale:
            self.define_wide(inst, dst.name, Wide("int", own, scale=a.scale, stable=single))
            return [simt.AluOp(base, own, [a.vreg, b.vreg], guard)]
        raise unsupported(inst, inst.opcode.data, "64-bit arithmetic other than a pointer "
                          "plus an offset")


def _not_words(scale: int) -> str:
    unit = "1 byte" if scale == 1 else f"{scale} bytes"
    return f"a byte offset that is not a multiple of 4: an index times {unit}"


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
