"""The `simt` machine ops (ALU, compares, predicate logic, warp ops, specials,
memory accesses) and the terminators of machine blocks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, ArrayAttr, IntAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute, Block, Operation
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    successor_def,
    traits_def,
)
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import VerifyException

from qgc.dialects.simt.attributes import GuardAttr, RegAttr, Src, i64_attr
from qgc.dialects.simt.directives import (
    Address,
    Guard,
    OptReg,
    OptSource,
    Reg,
    Source,
    Sources,
    TrailingSources,
)
from qgc.dialects.simt.facts import ATOM_OPS, ATOM_PAIR_OPS, SETP_CONDS, SPACES, SPECIALS
from qgc.machine.opcodes import ALU_OPCODES, PRED_OPCODES


def _src(value: RegAttr | int) -> Src:
    return IntAttr(value) if isinstance(value, int) else value


GUARD_FORMAT = "(`guard` custom<Guard>($guard)^)? attr-dict"


class MachineOp(IRDLOperation):
    """Common base of the ops inside machine blocks (guarded, per lane)."""

    guard = opt_prop_def(GuardAttr)
    #: the properties that hold the registers this op writes
    DEF_PROPS: ClassVar[tuple[str, ...]] = ("dst",)

    def defs(self) -> list[RegAttr]:
        """Registers this op writes."""
        return []

    def def_props(self) -> dict[str, RegAttr]:
        """The properties naming the registers this op writes, and those registers."""
        return {name: reg for name in self.DEF_PROPS
                if isinstance(reg := self.properties.get(name), RegAttr)}

    def uses(self) -> list[RegAttr]:
        """Registers this op reads (the guard included)."""
        return [self.guard.pred] if self.guard is not None else []

    def replace_regs(self, mapping: dict[RegAttr, RegAttr]) -> None:
        """Rename registers (register allocation)."""
        for name, value in list(self.properties.items()):
            self.properties[name] = _rename(value, mapping)

    def replace_sources(self, mapping: dict[RegAttr, RegAttr]) -> None:
        """Rename the registers the op reads, not its destination or guard."""
        for name, value in list(self.properties.items()):
            if name not in self.DEF_PROPS and name != "guard":
                self.properties[name] = _rename(value, mapping)

    def verify_(self) -> None:
        pass


def _rename(value: Attribute, mapping: dict[RegAttr, RegAttr]) -> Attribute:
    if isinstance(value, RegAttr):
        return mapping.get(value, value)
    if isinstance(value, GuardAttr):
        return GuardAttr(mapping.get(value.pred, value.pred), value.is_negated)
    if isinstance(value, ArrayAttr):
        return ArrayAttr([_rename(v, mapping) for v in value.data])
    return value


def _regs_in(srcs: ArrayAttr) -> list[RegAttr]:
    return [s for s in srcs.data if isinstance(s, RegAttr)]


def _want(op: Operation, r: RegAttr, pred: bool, what: str) -> None:
    if r.is_pred != pred:
        kind = "a predicate" if pred else "a 32-bit register"
        raise VerifyException(f"{op.name}: {what} '{r.spelled}' must be {kind}")


@irdl_op_definition
class AluOp(MachineOp):
    """An ALU op on 32-bit lanes: `simt.alu "mad.lo" r1, r2, r3, r4 [guard p0]`.

    Opcodes: `qgc.machine.opcodes.ALU_OPCODES` (their arity and source
    kinds); sources are registers or immediates, `selp d, a, b, p` picks `a`
    where `p`.
    """

    name = "simt.alu"
    opcode = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | IntAttr])
    custom_directives = (Reg, Guard, Sources)
    assembly_format = ("$opcode custom<Reg>($dst) `,` custom<Sources>($srcs) " + GUARD_FORMAT)

    def __init__(self, opcode: str, dst: RegAttr, srcs: Sequence[RegAttr | int],
                 guard: GuardAttr | None = None):
        super().__init__(properties={"opcode": StringAttr(opcode), "dst": dst,
                                     "srcs": ArrayAttr([_src(s) for s in srcs]),
                                     "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return _regs_in(self.srcs) + super().uses()

    def verify_(self) -> None:
        opc = self.opcode.data
        if opc not in ALU_OPCODES:
            raise VerifyException(f"unknown ALU opcode '{opc}' (expected one of "
                                  f"{', '.join(ALU_OPCODES)})")
        code = ALU_OPCODES[opc]
        if len(self.srcs.data) != code.arity:
            raise VerifyException(f"'{opc}' takes {code.arity} sources, got "
                                  f"{len(self.srcs.data)}")
        _want(self, self.dst, False, "destination")
        for i, s in enumerate(self.srcs.data):
            is_pred = code.sources[i] == "pred"
            if isinstance(s, RegAttr):
                _want(self, s, is_pred, "source")
            elif is_pred:
                raise VerifyException(f"{opc}'s {_ORDINALS[i]} source must be a predicate "
                                      "register")


@irdl_op_definition
class SetpOp(MachineOp):
    """A comparison into a predicate: `simt.setp "lt.s" p0, r1, r2`."""

    name = "simt.setp"
    cond = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | IntAttr])
    custom_directives = (Reg, Guard, Sources)
    assembly_format = ("$cond custom<Reg>($dst) `,` custom<Sources>($srcs) " + GUARD_FORMAT)

    def __init__(self, cond: str, dst: RegAttr, a: RegAttr | int, b: RegAttr | int,
                 guard: GuardAttr | None = None):
        super().__init__(properties={"cond": StringAttr(cond), "dst": dst,
                                     "srcs": ArrayAttr([_src(a), _src(b)]), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return _regs_in(self.srcs) + super().uses()

    def verify_(self) -> None:
        if self.cond.data not in SETP_CONDS:
            raise VerifyException(f"unknown comparison '{self.cond.data}' (expected one of "
                                  f"{', '.join(SETP_CONDS)})")
        if len(self.srcs.data) != 2:
            raise VerifyException("simt.setp takes two sources")
        _want(self, self.dst, True, "destination")
        for s in _regs_in(self.srcs):
            _want(self, s, False, "source")


_ORDINALS = ("first", "second", "third", "fourth")

#: Predicate logic of `simt.pred` and its number of sources.
PRED_ARITY: dict[str, int] = {name: arity for name, (arity, _) in PRED_OPCODES.items()}


@irdl_op_definition
class PredOp(MachineOp):
    """Logic on predicates: `simt.pred "and" p0, p1, !p2` (mov not and or xor;
    a source is a predicate, maybe negated, or 0/1)."""

    name = "simt.pred"
    opcode = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | GuardAttr | IntAttr])
    custom_directives = (Reg, Guard, Sources)
    assembly_format = ("$opcode custom<Reg>($dst) `,` custom<Sources>($srcs) " + GUARD_FORMAT)

    def __init__(self, opcode: str, dst: RegAttr, srcs: Sequence[GuardAttr | int],
                 guard: GuardAttr | None = None):
        # a plain predicate is kept as its register, a negated one as a guard
        items = [s.pred if isinstance(s, GuardAttr) and not s.is_negated else _src(s)
                 for s in srcs]
        super().__init__(properties={"opcode": StringAttr(opcode), "dst": dst,
                                     "srcs": ArrayAttr(items), "guard": guard})

    def sources(self) -> list[GuardAttr | int]:
        """Each source as a condition (`GuardAttr`) or a constant 0/1."""
        return [GuardAttr(s) if isinstance(s, RegAttr) else s if isinstance(s, GuardAttr)
                else s.data for s in self.srcs.data]

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return [s.pred for s in self.sources() if isinstance(s, GuardAttr)] + super().uses()

    def verify_(self) -> None:
        opc = self.opcode.data
        if opc not in PRED_ARITY:
            raise VerifyException(f"unknown predicate opcode '{opc}' (expected one of "
                                  f"{', '.join(PRED_ARITY)})")
        if len(self.srcs.data) != PRED_ARITY[opc]:
            raise VerifyException(f"'{opc}' takes {PRED_ARITY[opc]} sources, got "
                                  f"{len(self.srcs.data)}")
        _want(self, self.dst, True, "destination")
        for s in self.sources():
            if isinstance(s, GuardAttr):
                _want(self, s.pred, True, "source")
            elif s not in (0, 1):
                raise VerifyException(f"a predicate constant is 0 or 1, not {s}")


#: Cross-lane ops of `simt.warp`: (number of sources, result is a predicate,
#: sources are predicates).
WARP_OPS: dict[str, tuple[int, bool, bool]] = {
    "shfl.up": (3, False, False), "shfl.down": (3, False, False),
    "shfl.bfly": (3, False, False), "shfl.idx": (3, False, False),
    "shfl.up.p": (2, True, False), "shfl.down.p": (2, True, False),
    "shfl.bfly.p": (2, True, False), "shfl.idx.p": (2, True, False),
    "ballot": (1, False, True), "activemask": (0, False, False),
    "any": (1, True, True), "all": (1, True, True), "uni": (1, True, True),
}


@irdl_op_definition
class WarpOp(MachineOp):
    """A cross-lane op over the lanes that execute it (active, guard true):
    `simt.warp "shfl.down" r1, r2, 1, 3` (value, lane delta or index, the
    PTX clamp/segment word; lane fields masked to the 4 lanes),
    `simt.warp "shfl.down.p" p1, 1, 3` (whether the source lane is in range),
    `simt.warp "ballot" r1, !p0`, `simt.warp "activemask" r1`,
    `simt.warp "any" p1, p0` (also all, uni)."""

    name = "simt.warp"
    opcode = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    srcs = prop_def(ArrayAttr[RegAttr | GuardAttr | IntAttr])
    custom_directives = (Reg, Guard, TrailingSources)
    assembly_format = "$opcode custom<Reg>($dst) custom<TrailingSources>($srcs) " + GUARD_FORMAT

    def __init__(self, opcode: str, dst: RegAttr, srcs: Sequence[RegAttr | GuardAttr | int],
                 guard: GuardAttr | None = None):
        items = [s.pred if isinstance(s, GuardAttr) and not s.is_negated else _src(s)
                 if not isinstance(s, GuardAttr) else s for s in srcs]
        super().__init__(properties={"opcode": StringAttr(opcode), "dst": dst,
                                     "srcs": ArrayAttr(items), "guard": guard})

    def conditions(self) -> list[GuardAttr]:
        """The predicate sources (of a vote or ballot) as conditions."""
        if not WARP_OPS[self.opcode.data][2]:
            return []
        return [GuardAttr(s) if isinstance(s, RegAttr) else s for s in self.srcs.data
                if isinstance(s, RegAttr | GuardAttr)]

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        regs = [s.pred if isinstance(s, GuardAttr) else s for s in self.srcs.data
                if isinstance(s, RegAttr | GuardAttr)]
        return regs + super().uses()

    def verify_(self) -> None:
        opc = self.opcode.data
        if opc not in WARP_OPS:
            raise VerifyException(f"unknown warp op '{opc}' (expected one of "
                                  f"{', '.join(WARP_OPS)})")
        n, pred_dst, pred_srcs = WARP_OPS[opc]
        if len(self.srcs.data) != n:
            raise VerifyException(f"'{opc}' takes {n} sources, got {len(self.srcs.data)}")
        _want(self, self.dst, pred_dst, "destination")
        for s in self.srcs.data:
            if isinstance(s, GuardAttr):
                _want(self, s.pred, True, "source")
                if not pred_srcs:
                    raise VerifyException(f"'{opc}' takes no predicate source")
            elif isinstance(s, RegAttr):
                _want(self, s, pred_srcs, "source")
            elif pred_srcs:
                raise VerifyException(f"'{opc}' takes a predicate source")


@irdl_op_definition
class SpecialOp(MachineOp):
    """A machine-provided value per lane: `simt.special r1, "tid.x"`
    (tid, ntid, ctaid, nctaid; x, y, z)."""

    name = "simt.special"
    dst = prop_def(RegAttr)
    which = prop_def(StringAttr)
    custom_directives = (Reg, Guard)
    assembly_format = "custom<Reg>($dst) `,` $which " + GUARD_FORMAT

    def __init__(self, dst: RegAttr, which: str, guard: GuardAttr | None = None):
        super().__init__(properties={"dst": dst, "which": StringAttr(which), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def verify_(self) -> None:
        if self.which.data not in SPECIALS:
            raise VerifyException(f"unknown special register '{self.which.data}'")
        _want(self, self.dst, False, "destination")


@irdl_op_definition
class SharedAddrOp(MachineOp):
    """The byte address of a `.shared` variable in the CTA's window:
    `simt.shared_addr v3, "tile"`. `simt-layout-memory` replaces it by the
    variable's offset (folded into the accesses it addresses, or a `mov`)."""

    name = "simt.shared_addr"
    dst = prop_def(RegAttr)
    var = prop_def(StringAttr)
    custom_directives = (Reg, Guard)
    assembly_format = "custom<Reg>($dst) `,` $var " + GUARD_FORMAT

    def __init__(self, dst: RegAttr, var: str, guard: GuardAttr | None = None):
        super().__init__(properties={"dst": dst, "var": StringAttr(var), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def verify_(self) -> None:
        _want(self, self.dst, False, "destination")


_WINDOWS = {"shared": "CTA's shared window", "local": "thread's local frame"}


class MemoryOp(MachineOp):
    """Shared parts of ld/st/atom: a space and an address. `global[r1 + 2]
    buffer 1` is a word address with the buffer it derives from; `param[3]` a
    word of the parameter area; `shared[r1 + 8]` a *byte* address in the
    CTA's shared window (PTX computes shared addresses in bytes; the machine
    checks alignment and bounds and maps it onto the CTA's words); `local[r2 + 4]`
    a byte address in the executing thread's `.local` frame (checked the same
    way); `spill[2]`
    slot 2 of the executing lane's own spill area (register allocation's
    spill code: a constant slot, no base, no buffer, never out of bounds).

    `global[r3:r4 + 8]` (no buffer) is a *located* access: a pointer held as
    a 64-bit value (loaded from memory, selected, compared), the byte address
    the reference engine gives it, low word first, plus a byte offset. The
    machine finds the word buffer that holds it at run time and traps when
    none does (`located`)."""

    space = prop_def(StringAttr)
    base = opt_prop_def(RegAttr)
    base_hi = opt_prop_def(RegAttr)
    offset = prop_def(IntegerAttr[I64])
    buffer = opt_prop_def(IntegerAttr[I64])

    @property
    def buffer_index(self) -> int | None:
        return None if self.buffer is None else self.buffer.value.data

    @property
    def is_located(self) -> bool:
        return self.base_hi is not None

    def located(self, hi: RegAttr) -> MemoryOp:
        """This global access through the byte address `base:hi` instead of a
        buffer's word address (`offset` in bytes)."""
        self.properties["base_hi"] = hi
        self.properties.pop("buffer", None)
        return self

    def _address_uses(self) -> list[RegAttr]:
        return [r for r in (self.base, self.base_hi) if r is not None]

    def _verify_address(self) -> None:
        space = self.space.data
        if space not in SPACES:
            raise VerifyException(f"unknown memory space '{space}'")
        if space == "param":
            if self.base is not None or self.buffer is not None:
                raise VerifyException("a param-area access has a constant address and no "
                                      "buffer")
        elif space == "spill":
            if self.base is not None or self.buffer is not None:
                raise VerifyException("a spill access names a constant slot of the lane's "
                                      "spill area: no base register, no buffer")
        elif space in ("shared", "local"):
            if self.buffer is not None:
                raise VerifyException(f"a {space} access names no buffer: its address is a "
                                      f"byte address in the {_WINDOWS[space]}")
            if self.base is not None:
                _want(self, self.base, False, "address base")
        elif self.is_located:
            if self.base is None or self.buffer is not None:
                raise VerifyException("a located access has a 64-bit byte address and no "
                                      "buffer: the machine finds its buffer at run time")
            _want(self, self.base, False, "address base")
            _want(self, self.base_hi, False, "address base")
        else:
            if self.base is None or self.buffer is None:
                raise VerifyException("a global access needs a base register and the buffer "
                                      "it derives from (`buffer N`)")
            _want(self, self.base, False, "address base")
        if self.is_located and space != "global":
            raise VerifyException("only a global access takes a 64-bit byte address")


@irdl_op_definition
class LdOp(MemoryOp):
    """Load a word: `simt.ld r5, global[r1 + 0] buffer 1`, `simt.ld r0, param[3]`,
    `simt.ld r3, spill[2]` (a reload).

    A global access is checked against the bounds of buffer N (the pointer
    parameter N it derives from); out of bounds traps."""

    name = "simt.ld"
    dst = prop_def(RegAttr)
    custom_directives = (Reg, Guard, Address)
    assembly_format = ("custom<Reg>($dst) `,` custom<Address>($space, $base, $base_hi, $offset) "
                       "(`buffer` $buffer^)? " + GUARD_FORMAT)

    def __init__(self, dst: RegAttr, space: str, base: RegAttr | None, offset: int,
                 buffer: int | None = None, guard: GuardAttr | None = None):
        super().__init__(properties={
            "dst": dst, "space": StringAttr(space), "base": base, "offset": i64_attr(offset),
            "buffer": None if buffer is None else i64_attr(buffer), "guard": guard})

    def defs(self) -> list[RegAttr]:
        return [self.dst]

    def uses(self) -> list[RegAttr]:
        return self._address_uses() + super().uses()

    def verify_(self) -> None:
        self._verify_address()
        _want(self, self.dst, False, "destination")


@irdl_op_definition
class StOp(MemoryOp):
    """Store a word: `simt.st global[r1 + 0], r5 buffer 2`, `simt.st spill[2], r3`
    (a spill)."""

    name = "simt.st"
    value = prop_def(RegAttr | IntAttr)
    custom_directives = (Reg, Guard, Address, Source)
    assembly_format = ("custom<Address>($space, $base, $base_hi, $offset) `,` custom<Source>($value) "
                       "(`buffer` $buffer^)? " + GUARD_FORMAT)

    def __init__(self, space: str, base: RegAttr | None, offset: int, value: RegAttr | int,
                 buffer: int | None, guard: GuardAttr | None = None):
        super().__init__(properties={
            "space": StringAttr(space), "base": base, "offset": i64_attr(offset),
            "value": _src(value), "buffer": None if buffer is None else i64_attr(buffer),
            "guard": guard})

    def uses(self) -> list[RegAttr]:
        v = [self.value] if isinstance(self.value, RegAttr) else []
        return self._address_uses() + v + super().uses()

    def verify_(self) -> None:
        self._verify_address()
        if self.space.data == "param":
            raise VerifyException("the parameter area is read-only")
        if isinstance(self.value, RegAttr):
            _want(self, self.value, False, "value")


@irdl_op_definition
class AtomOp(MemoryOp):
    """Atomic read-modify-write: `simt.atom "add" r9, global[r1 + 0], r8 buffer 2`
    (`ATOM_OPS`; `simt.atom "cas" r9, global[r1 + 0], r8, r7`: compare with r8,
    swap in r7; `simt.atom "ins" r9, shared[r1 + 0], r8, r7`: the bits r7 of the
    word become r8's, a sub-word store).

    `dst` receives the old value. When several lanes hit the same word, they
    apply in lane order.

    A pair atomic (`ATOM_PAIR_OPS`) works on the 64-bit value in the word and
    the next one, low first, its registers written `low:high`:
    `simt.atom "min.s" r1:r2, global[r3 + 0], r4:r5 buffer 1`."""

    name = "simt.atom"
    op = prop_def(StringAttr)
    dst = prop_def(RegAttr)
    value = prop_def(RegAttr | IntAttr)
    swap = opt_prop_def(RegAttr | IntAttr)
    dst_hi = opt_prop_def(RegAttr)
    value_hi = opt_prop_def(RegAttr | IntAttr)
    swap_hi = opt_prop_def(RegAttr | IntAttr)
    DEF_PROPS: ClassVar[tuple[str, ...]] = ("dst", "dst_hi")
    custom_directives = (Reg, OptReg, Guard, Address, Source, OptSource)
    assembly_format = ("$op custom<Reg>($dst) (`:` custom<OptReg>($dst_hi)^)? `,` "
                       "custom<Address>($space, $base, $base_hi, $offset) `,` "
                       "custom<Source>($value) (`:` custom<OptSource>($value_hi)^)? "
                       "(`,` custom<OptSource>($swap)^)? (`:` custom<OptSource>($swap_hi)^)? "
                       "(`buffer` $buffer^)? " + GUARD_FORMAT)

    def __init__(self, op: str, dst: RegAttr, space: str, base: RegAttr | None, offset: int,
                 value: RegAttr | int, buffer: int | None, guard: GuardAttr | None = None,
                 swap: RegAttr | int | None = None,
                 high: tuple[RegAttr, RegAttr | int, RegAttr | int | None] | None = None):
        """`high`: a pair atomic's high words (destination, value, swap)."""
        dst_hi, value_hi, swap_hi = high if high is not None else (None, None, None)
        super().__init__(properties={
            "op": StringAttr(op), "dst": dst, "space": StringAttr(space), "base": base,
            "offset": i64_attr(offset), "value": _src(value),
            "buffer": None if buffer is None else i64_attr(buffer),
            "guard": guard, "swap": None if swap is None else _src(swap),
            "dst_hi": dst_hi, "value_hi": None if value_hi is None else _src(value_hi),
            "swap_hi": None if swap_hi is None else _src(swap_hi)})

    @property
    def is_pair(self) -> bool:
        return self.dst_hi is not None

    def defs(self) -> list[RegAttr]:
        return [self.dst] + ([self.dst_hi] if self.dst_hi is not None else [])

    def uses(self) -> list[RegAttr]:
        v = [s for s in (self.value, self.swap, self.value_hi, self.swap_hi)
             if isinstance(s, RegAttr)]
        return self._address_uses() + v + super().uses()

    def verify_(self) -> None:
        self._verify_address()
        if self.is_pair:
            self._verify_pair()
        elif self.op.data not in ATOM_OPS:
            raise VerifyException(f"unknown atomic operation '{self.op.data}'")
        if (self.swap is not None) != (self.op.data in ("cas", "ins")):
            raise VerifyException("simt.atom takes a second value exactly when it is a cas "
                                  "(the swap) or an ins (the element's bits)")
        if self.space.data == "param":
            raise VerifyException("the parameter area is read-only")
        if self.space.data == "spill":
            raise VerifyException("a lane's spill slots take only simt.ld and simt.st")
        _want(self, self.dst, False, "destination")
        if isinstance(self.value, RegAttr):
            _want(self, self.value, False, "value")

    def _verify_pair(self) -> None:
        if self.op.data not in ATOM_PAIR_OPS:
            raise VerifyException(f"unknown pair atomic operation '{self.op.data}' "
                                  f"(pairs: {', '.join(ATOM_PAIR_OPS)})")
        if self.value_hi is None or (self.swap_hi is None) != (self.swap is None):
            raise VerifyException("a pair atomic takes the high words of its value (and "
                                  "swap) too")
        if self.space.data not in ("global", "shared"):
            raise VerifyException("a pair atomic works on global or shared memory")
        _want(self, self.dst_hi, False, "destination")


# ----------------------------------------------------------------- terminators

@irdl_op_definition
class NextOp(IRDLOperation):
    """End of a machine block: the warp continues at `^bbN` (a uniform jump)."""

    name = "simt.next"
    dest = successor_def()
    traits = traits_def(IsTerminator())
    assembly_format = "$dest attr-dict"

    def __init__(self, dest: Block):
        super().__init__(successors=[dest])


@irdl_op_definition
class ExitOp(IRDLOperation):
    """End of a machine block: the warp has finished the kernel."""

    name = "simt.exit"
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class BranchOp(IRDLOperation):
    """A per-lane conditional branch: `simt.branch !p0, ^bb2, ^bb1`.

    Lanes where the condition holds continue at the first block, the others at
    the second. Diverged lanes reconverge by min-PC scheduling: a step runs
    the lowest-numbered block any live lane waits at (docs/machine.md,
    "Divergence"), so no reconvergence block needs naming.
    """

    name = "simt.branch"
    cond = prop_def(GuardAttr)
    then_dest = successor_def()
    else_dest = successor_def()
    traits = traits_def(IsTerminator())
    custom_directives = (Guard,)
    assembly_format = "custom<Guard>($cond) `,` $then_dest `,` $else_dest attr-dict"

    def __init__(self, cond: GuardAttr, then_dest: Block, else_dest: Block):
        super().__init__(properties={"cond": cond}, successors=[then_dest, else_dest])

    def uses(self) -> list[RegAttr]:
        return [self.cond.pred]


@irdl_op_definition
class BarrierOp(IRDLOperation):
    """`bar.sync`: `simt.barrier ^bb3` — the lanes wait until every live thread
    of the CTA has arrived, then continue at `^bb3` (the host releases it)."""

    name = "simt.barrier"
    dest = successor_def()
    traits = traits_def(IsTerminator())
    assembly_format = "$dest attr-dict"

    def __init__(self, dest: Block):
        super().__init__(successors=[dest])


TERMINATORS = (NextOp, ExitOp, BranchOp, BarrierOp)
