"""Memory accesses: global (through a pointer's provenance, or located at run
time through a pointer held as a value; 64-bit data as two words, sub-word
data one element per word), shared and parameter loads, and loads of
constant memory at fixed addresses."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation

from qgc.dialects import ptx, simt
from qgc.dialects.simt import GuardAttr, RegAttr
from qgc.machine.abi import initial_bytes
from qgc.passes.ptx_to_simt import legalize as lg
from qgc.passes.ptx_to_simt.common import INT32, SUBWORD, WIDE, WORD32, unsupported
from qgc.passes.ptx_to_simt.legalize import Emitter, Wide

#: Modifiers of ld/st/atom that change nothing on the machine (caching, scope, order).
HARMLESS_MEMORY_MODS = {"nc", "ca", "cg", "cs", "lu", "cv", "wb", "wt", "volatile", "relaxed",
                        "weak", "gpu", "cta", "sys"}


class MemoryAccesses:
    """ld/st/atom on global, shared and parameter memory."""

    def memory(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        opc = inst.op
        base, mods, t = opc.base, opc.modifiers, opc.type
        args = inst.operands_decoded
        space = next((m for m in mods if m in _SPACES), None) or self.generic_space(inst)
        rest = [m for m in mods if m not in _SPACES]
        lanes = [m for m in rest if m in _VECTORS]
        if lanes and base in ("ld", "st") and space in ("global", "shared", "local"):
            return self.vector_access(inst, guard, int(lanes[0][1:]))
        if space in ("shared", "local"):
            return self.shared_memory(inst, guard, rest, space)
        if space == "const" and base == "ld" and not rest:
            addr = args[1]
            if not (isinstance(addr, ptx.Addr) and isinstance(addr.base, ptx.Reg)):
                return self.constant_load(inst, guard)
            space = "global"    # a constant variable's buffer (`_module_vars`)
        if base == "atom":
            if space != "global" or len(rest) < 1 or \
                    _atom_op(rest[0], t) is None and not _wide_atom(rest[0], t) \
                    or len(args) != (4 if rest[0] == "cas" else 3) \
                    or not _harmless(rest[1:]):
                raise unsupported(inst, inst.opcode.data)
        elif space is None or not _harmless(rest) or len(opc.types) != 1:
            raise unsupported(inst, inst.opcode.data)
        if base == "ld" and space == "param":
            return self.ld_param(inst, guard)
        addr = args[1] if base in ("ld", "atom") else args[0]
        if isinstance(addr, ptx.Addr) and isinstance(addr.base, ptx.Sym) and \
                self.is_module_var(addr.base.name):   # `[count+4]`: through its parameter
            reg = f"%module.{len(self.reg_types)}"
            self.reg_types[reg], self.def_count[reg] = "u64", 1
            return self.pointer_param(inst, guard, reg, self.param_index[addr.base.name]) + \
                self.memory(_through(inst, reg), guard)
        if not isinstance(addr, ptx.Addr) or not isinstance(addr.base, ptx.Reg):
            raise unsupported(inst, inst.opcode.data, "an address that is not a pointer "
                              "register plus an offset")
        ptr = self.wide_src(inst, addr.base)
        if ptr.kind == "int":
            return self.located(inst, guard, ptr, addr.offset, rest)
        if ptr.kind != "ptr":
            raise unsupported(inst, inst.opcode.data, "an address that does not derive from "
                              "a pointer parameter")
        assert ptr.prov is not None
        unit = self.units.get(ptr.prov, 4)
        if t in SUBWORD and unit == 4:      # a byte or halfword of a word buffer
            return self.located(inst, guard, ptr, addr.offset, rest)
        if addr.offset % unit:
            raise unsupported(inst, inst.opcode.data, f"a byte offset ({addr.offset}) that is "
                              f"not a multiple of {unit}")
        return self.global_access(inst, guard, _Words("global", ptr.vreg, addr.offset // unit,
                                                      ptr.prov, 1), rest)

    def global_access(self, inst: ptx.InstOp, guard: GuardAttr | None, at: _Words,
                      rest: list[str]) -> list[Operation]:
        """ld/st/atom of one global element at `at`."""
        base, t, args = inst.op.base, inst.op.type, inst.operands_decoded
        if t in WIDE:
            return self.memory64(inst, guard, at, rest)
        if t in SUBWORD and base in ("ld", "st") and at.buffer is not None:
            return self.memory_sub(inst, guard, at)
        if t not in WORD32:
            raise unsupported(inst, inst.opcode.data, f"{ptx.TYPE_BITS.get(t or '', 0)}-bit "
                              "data accesses" + (" through a pointer held as a 64-bit value"
                                                 if t in SUBWORD else ""))
        pre: list[Operation] = []
        if base == "ld":
            return self.load_word(inst, guard, lambda d: simt.LdOp(d, "global", at.base,
                                                                   at.offset, at.buffer, guard))
        if base == "st":
            value = self.stored_word(inst, args[1], pre)
            return pre + [simt.StOp("global", at.base, at.offset, value, at.buffer, guard)]
        value = self.src32(inst, args[2], pre)
        swap = self.src32(inst, args[3], pre) if len(args) == 4 else None
        op = _atom_op(rest[0], t)
        assert op is not None
        return pre + [simt.AtomOp(op, self.dst32(inst, args[0]), "global", at.base, at.offset,
                                  value, at.buffer, guard, swap)]

    def located(self, inst: ptx.InstOp, guard: GuardAttr | None, address: Wide,
                offset: int, rest: list[str]) -> list[Operation]:
        """A global access through a pointer held as a 64-bit value (loaded
        from memory, selected, compared): the machine finds the buffer that
        holds its byte address at run time (`simt.MemoryOp.located`)."""
        self.pointer_values = True
        e = Emitter(self.fresh, None)
        lo, hi = self.value_pair(inst, e, address)
        sub = inst.op.type in SUBWORD
        if offset < 0 or offset and sub:    # the ops' offsets count up from the address
            lo, hi = lg.add_pairs(e, (lo, hi), lg.const_pair(offset))
            offset = 0
        lo, hi = (w if isinstance(w, RegAttr) else e.alu("mov", [w], e.temp()) for w in (lo, hi))
        ops = e.ops + (self.packed_sub(inst, guard, "global", lo, 0) if sub else
                       self.global_access(inst, guard, _Words("global", lo, offset, None, 4),
                                          rest))
        for op in ops:
            if isinstance(op, simt.MemoryOp) and op.space.data == "global" and \
                    op.buffer is None and not op.is_located:
                op.located(hi)
        return ops

    def generic_space(self, inst: ptx.InstOp) -> str | None:
        """The space a generic access (`ld.u32 [%rd5]`, clang's way) reaches:
        that of its address's provenance (a global pointer or a shared
        address); None when it has none."""
        args = inst.operands_decoded
        addr = args[0] if inst.op.base == "st" else args[1] if len(args) > 1 else None
        if not isinstance(addr, ptx.Addr) or not isinstance(addr.base, ptx.Reg):
            return None
        held = self.wide.get(addr.base.name)
        return {"ptr": "global", "int": "global", "shared": "shared", "local": "local"}.get(
            held.kind) if held else None

    def load_word(self, inst: ptx.InstOp, guard: GuardAttr | None,
                  load: Callable[[RegAttr], Operation]) -> list[Operation]:
        """A 32-bit load into its destination; into a 64-bit register the word
        is sign-extended (`.s32`) or zero-extended, as PTX's `ld` does."""
        dst = inst.operands_decoded[0]
        if not (isinstance(dst, ptx.Reg) and self.bits(dst.name) == 64):
            return [load(self.dst32(inst, dst))]
        e = self.emitter(guard, dst.name)
        word = e.temp()
        e.ops.append(load(word))
        return self.set_int(inst, e, (word, self.high_word(e, word, inst.op.type or "")))

    @staticmethod
    def high_word(e: Emitter, word: RegAttr | int, t: str) -> RegAttr | int:
        """The high word of a 32-bit value extended to 64 bits as type t."""
        return e.alu("shr.s", [word, 31]) if t[0] == "s" else 0

    def stored_word(self, inst: ptx.InstOp, operand: ptx.Operand,
                    pre: list[Operation]) -> RegAttr | int:
        """A store's 32-bit value; of a 64-bit register its low word (PTX's
        `st` of a wider register)."""
        if isinstance(operand, ptx.Reg) and self.bits(operand.name) == 64:
            e = Emitter(self.fresh, None)
            low = self.pair_of(inst, e, operand)[0]
            pre += e.ops
            return low
        return self.src32(inst, operand, pre)

    def vector_access(self, inst: ptx.InstOp, guard: GuardAttr | None,
                      count: int) -> list[Operation]:
        """`ld/st.{global,shared}.v2/.v4` as one access per element at
        consecutive addresses (a `_` element of a load is not read)."""
        opc = inst.op
        vec_at, addr_at = (0, 1) if opc.base == "ld" else (1, 0)
        args = inst.operands_decoded
        vec, addr = args[vec_at], args[addr_at]
        if not isinstance(vec, ptx.Vec) or len(vec.items) != count or \
                not isinstance(addr, ptx.Addr) or addr.base is None:
            raise unsupported(inst, inst.opcode.data)
        if opc.base == "ld" and any(isinstance(r, ptx.Reg) and r == addr.base
                                    for r in vec.items):
            raise unsupported(inst, inst.opcode.data, "a vector load into its own address")
        items = inst.args.data[vec_at].data.strip("{}").split(",")
        size = ptx.TYPE_BITS[opc.type or ""] // 8
        scalar = ".".join(p for p in inst.opcode.data.split(".") if p not in _VECTORS)
        ops: list[Operation] = []
        for k, item in enumerate(i.strip() for i in items):
            if item == "_":
                continue
            at = f"[{addr.base.name}{addr.offset + k * size:+d}]"
            one = ptx.InstOp(scalar, [item, at] if opc.base == "ld" else [at, item],
                             None if inst.guard is None else inst.guard.data)
            one.location = inst.location
            ops += self.memory(one, guard)
        return ops

    def memory64(self, inst: ptx.InstOp, guard: GuardAttr | None, at: _Words,
                 rest: list[str]) -> list[Operation]:
        """64-bit accesses as two words, low first (global or shared: `at`);
        `atom.add.u64` adds the low words, then the high words with each
        lane's carry (lanes in order, so the carries are those of the running
        sum); exch, and, or and xor are one atomic per word (the words do not
        interact); min, max and cas one pair atomic on both words."""
        base, args = inst.op.base, inst.operands_decoded
        dst = args[0] if base != "st" else None
        e = self.emitter(guard, dst.name if isinstance(dst, ptx.Reg) else None)
        if base == "st":
            lo, hi = self.pair_of(inst, e, args[1])
            e.ops += [simt.StOp(at.space, at.base, at.offset, lo, at.buffer, guard),
                      simt.StOp(at.space, at.base, at.high, hi, at.buffer, guard)]
            return e.ops
        if not isinstance(dst, ptx.Reg) or self.bits(dst.name) != 64:
            raise unsupported(inst, inst.opcode.data)
        lo, hi = e.temp(), e.temp()
        if base == "ld":
            e.ops += [simt.LdOp(lo, at.space, at.base, at.offset, at.buffer, guard),
                      simt.LdOp(hi, at.space, at.base, at.high, at.buffer, guard)]
            return self.set_int(inst, e, (lo, hi))
        v_lo, v_hi = self.pair_of(inst, e, args[2])

        def atom(op: str, dst: RegAttr, offset: int, value, swap=None, high=None) -> None:
            e.ops.append(simt.AtomOp(op, dst, at.space, at.base, offset, value, at.buffer,
                                     guard, swap, high=high))
        if rest[0] in _PER_WORD:            # each word on its own, in lane order
            atom(rest[0], lo, at.offset, v_lo)
            atom(rest[0], hi, at.high, v_hi)
            return self.set_int(inst, e, (lo, hi))
        pair = _pair_op(rest[0], inst.op.type)
        if pair is not None:                # min, max, cas: one atomic on both words
            s_lo, s_hi = self.pair_of(inst, e, args[3]) if pair == "cas" else (None, None)
            atom(pair, lo, at.offset, v_lo, s_lo, (hi, v_hi, s_hi))
            return self.set_int(inst, e, (lo, hi))
        if rest[:1] != ["add"] or inst.op.type != "u64":
            raise unsupported(inst, inst.opcode.data)
        atom("add", lo, at.offset, v_lo)
        _, carry = e.add_carry(lo, v_lo)
        atom("add", hi, at.high, e.alu("add", [v_hi, carry]))
        return self.set_int(inst, e, (lo, hi))

    def memory_sub(self, inst: ptx.InstOp, guard: GuardAttr | None,
                   at: _Words) -> list[Operation]:
        """A byte or halfword access: one element per word of its buffer (the
        word holds it zero-extended; a store keeps only the element's bits)."""
        t, args = inst.op.type or "", inst.operands_decoded
        e = Emitter(self.fresh, guard)
        if inst.op.base == "st":
            value = self.get_sub(inst, e, args[1], t, False)
            e.ops.append(simt.StOp("global", at.base, at.offset, value, at.buffer, guard))
            return e.ops
        word = e.temp()
        e.ops.append(simt.LdOp(word, "global", at.base, at.offset, at.buffer, guard))
        return self.put_loaded_sub(inst, e, word, None if t[0] == "s" else t)

    def shared_memory(self, inst: ptx.InstOp, guard: GuardAttr | None,
                      rest: list[str], space: str = "shared") -> list[Operation]:
        """ld/st/atom `.shared` (ld/st `.local`) at a byte address of the
        CTA's window (the thread's frame): `[%r7]`, `[%rd3+4]`, `[sym+8]`."""
        opc, args = inst.op, inst.operands_decoded
        base, t = opc.base, opc.type
        sub = t in SUBWORD and base in ("ld", "st")
        wide = t in WIDE and (base in ("ld", "st") or bool(rest) and _wide_atom(rest[0], t))
        if t not in WORD32 and not (base == "atom" and t in INT32) and not sub and not wide or \
                len(opc.types) != 1:
            raise unsupported(inst, inst.opcode.data,
                              f"{ptx.TYPE_BITS.get(t or '', 0)}-bit {space} accesses")
        atom = _atom_op(rest[0], t) if base == "atom" and rest else None
        if base == "atom" and (space == "local" or (atom is None and not wide) or not _harmless(rest[1:]) or
                               len(args) != (4 if rest[0] == "cas" else 3)) or \
                base != "atom" and not _harmless(rest):
            raise unsupported(inst, inst.opcode.data)
        addr = args[0] if base == "st" else args[1]
        if not isinstance(addr, ptx.Addr):
            raise unsupported(inst, inst.opcode.data)
        reg: RegAttr | None = None
        offset = addr.offset
        pre: list[Operation] = []
        if isinstance(addr.base, ptx.Sym) and addr.base.name in self.shared and space == "shared":
            reg = self.fresh()
            pre.append(simt.SharedAddrOp(reg, addr.base.name))
        elif isinstance(addr.base, ptx.Sym) and addr.base.name in self.locals and \
                space == "local":
            offset += self.locals[addr.base.name]
        elif isinstance(addr.base, ptx.Reg) and self.bits(addr.base.name) == 32:
            reg = self.vreg(addr.base.name)
        elif isinstance(addr.base, ptx.Reg) and addr.base.name in self.wide and \
                self.wide[addr.base.name].kind == space:
            reg = self.wide[addr.base.name].vreg
        else:
            raise unsupported(inst, inst.opcode.data, f"a {space} address that is not a "
                              f"{space} variable plus an offset")
        if sub:
            return pre + self.packed_sub(inst, guard, space, reg, offset)
        if wide:
            return pre + self.memory64(inst, guard, _Words(space, reg, offset, None, 4), rest)
        if base == "ld":
            return pre + self.load_word(inst, guard, lambda d: simt.LdOp(d, space, reg, offset,
                                                                         None, guard))
        if base == "st":
            value = self.stored_word(inst, args[1], pre)
            return pre + [simt.StOp(space, reg, offset, value, None, guard)]
        value = self.src32(inst, args[2], pre)
        swap = self.src32(inst, args[3], pre) if len(args) == 4 else None
        assert atom is not None
        return pre + [simt.AtomOp(atom, self.dst32(inst, args[0]), "shared", reg, offset, value,
                                  None, guard, swap)]

    def put_loaded_sub(self, inst: ptx.InstOp, e: Emitter, value: RegAttr | int,
                       fits: str | None) -> list[Operation]:
        """A loaded byte or halfword (`value`'s low bits) into its destination,
        extended by its type; a 64-bit destination gets both words."""
        t, dst = inst.op.type or "", inst.operands_decoded[0]
        if not (isinstance(dst, ptx.Reg) and self.bits(dst.name) == 64):
            self.put_sub(inst, e, dst, t, value, fits)
            return e.ops
        bits = ptx.TYPE_BITS[t]
        low = e.alu("bfe.s", [value, 0, bits]) if t[0] == "s" else \
            e.alu("and", [value, (1 << bits) - 1])
        wide = self.emitter(e.guard, dst.name)
        wide.ops, wide.temps = e.ops, e.temps
        return self.set_int(inst, wide, (low, self.high_word(wide, low, t)))

    def packed_sub(self, inst: ptx.InstOp, guard: GuardAttr | None, space: str,
                   reg: RegAttr | None, offset: int) -> list[Operation]:
        """A byte or halfword packed in its word (shared or local memory, or a
        located word buffer; `reg` None: a constant address): a load extracts
        it, a store inserts it (`atom "ins"`, so lanes storing into one word
        keep each other's bytes). A halfword's word address keeps bit 0 of
        its byte address, so an odd one traps as misaligned."""
        t, args = inst.op.type or "", inst.operands_decoded
        bits = ptx.TYPE_BITS[t]
        e = Emitter(self.fresh, guard)
        at = e.alu("add", [0 if reg is None else reg, offset])
        word = e.alu("and", [at, ~3 if bits == 8 else ~2])
        shift = e.alu("shl", [e.alu("and", [at, 3]), 3])
        base, off = (None, word) if isinstance(word, int) else (word, 0)
        if inst.op.base == "ld":
            loaded = e.temp()
            e.ops.append(simt.LdOp(loaded, space, base, off, None, guard))
            return self.put_loaded_sub(inst, e, e.alu("shr.u", [loaded, shift]), None)
        element = self.get_sub(inst, e, args[1], t, False)      # within its bits already
        e.ops.append(simt.AtomOp("ins", e.temp(), space, base, off, e.alu("shl", [element, shift]),
                                 None, guard, e.alu("shl", [(1 << bits) - 1, shift])))
        return e.ops

    def constant_load(self, inst: ptx.InstOp, guard: GuardAttr | None) -> list[Operation]:
        """`ld.const` at a fixed address of a `.const` variable: its
        initializer's value there, an immediate (a kernel cannot write
        constant memory, and a launch gives no other contents)."""
        dst, addr = inst.operands_decoded
        t = inst.op.type or ""
        var = self.constants.get(addr.base.name) if isinstance(addr, ptx.Addr) and \
            isinstance(addr.base, ptx.Sym) else None
        if var is None:
            raise unsupported(inst, inst.opcode.data, "a constant-memory address that is "
                              "not a fixed place in a .const variable")
        size = ptx.TYPE_BITS.get(t, 0) // 8
        if not 0 <= addr.offset <= var.size_bytes - size or size == 0:
            raise unsupported(inst, inst.opcode.data, f"bytes {addr.offset}..{addr.offset + size}"
                              f" of the {var.size_bytes}-byte '{var.sym_name.data}'")
        try:
            data = initial_bytes(var).ljust(var.size_bytes, b"\0")
        except ValueError as e:
            raise unsupported(inst, inst.opcode.data, str(e)) from None
        value = int.from_bytes(data[addr.offset:addr.offset + size], "little")
        e = self.emitter(guard, dst.name if size == 8 and isinstance(dst, ptx.Reg) else None)
        if size == 8:
            return self.set_int(inst, e, lg.const_pair(value))
        if size < 4:
            self.put_sub(inst, e, dst, t, value, None)
            return e.ops
        e.assign(self.dst32(inst, dst), lg.to_i32(value))
        return e.ops

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
            return self.pointer_param(inst, guard, dst.name, index)
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


def _through(inst: ptx.InstOp, reg: str) -> ptx.InstOp:
    """`inst` with its symbol address `[sym+off]` read through `reg` instead."""
    def moved(text: str) -> str:
        operand = ptx.decode_operand(text)
        if not isinstance(operand, ptx.Addr) or not isinstance(operand.base, ptx.Sym):
            return text
        return f"[{reg}{operand.offset:+d}]" if operand.offset else f"[{reg}]"
    out = ptx.InstOp(inst.opcode.data, [moved(a.data) for a in inst.args.data])
    out.location = inst.location
    return out


def _atom_op(name: str, t: str | None) -> str | None:
    """The machine's atomic for PTX `atom.NAME.T` on 32-bit words, or None."""
    if name == "add" and t == "f32":
        return "add.f32"
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


_VECTORS = ("v2", "v4", "v8")
_SPACES = ("param", "global", "shared", "local", "const")


@dataclass(frozen=True)
class _Words:
    """Where a 64-bit access's two words are: its space, base register,
    offset (words of a global buffer, bytes of the shared window), buffer,
    and the offset step to the high word."""

    space: str
    base: RegAttr | None
    offset: int
    buffer: int | None
    step: int

    @property
    def high(self) -> int:
        return self.offset + self.step


#: 64-bit atomics whose words change independently: one 32-bit atomic per word
_PER_WORD = ("exch", "and", "or", "xor")


def _pair_op(name: str, t: str | None) -> str | None:
    """The machine's pair atomic for PTX `atom.NAME.T` on 64-bit words."""
    if name in ("min", "max") and t in ("s64", "u64"):
        return f"{name}.{t[0]}"
    return "cas" if name == "cas" and t in WIDE else None


def _wide_atom(name: str, t: str | None) -> bool:
    """A 64-bit atomic the machine runs: a 32-bit atomic per word (with the
    carry for add.u64) or one pair atomic."""
    return t in WIDE and (name in _PER_WORD or _pair_op(name, t) is not None
                          or (name, t) == ("add", "u64"))


def _harmless(mods: Sequence[str]) -> bool:
    return all(m in HARMLESS_MEMORY_MODS or m.startswith(("L1::", "L2::")) for m in mods)
